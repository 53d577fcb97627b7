// Shared by the one-pass Hamming top-k kernels (hamming_topk_scan.wgsl, hamming_topk_merge.wgsl):
// the parameter block, the bindings, and the selection that keeps a block's k nearest entries in
// workgroup memory.
//
// A block is 256 · STRIPES entries in order (2048 for k ≤ 64, 4096 for k ≤ 1024: a level of
// merges shrinks the lists at least fourfold); invocation `lid` of the 256 holds positions
// s·256 + lid (s < STRIPES, "stripe" s), so consecutive invocations read consecutive rows. It
// holds them as vec4 groups: group g is stripes 4g to 4g + 3. A block's k nearest, ties to the
// earlier position (the lower row), are written in position order: lists of blocks in row order
// stay in row order, and merging them again keeps the CPU path's tie rule. Workspace pairs are
// (distance, row); NONE marks padding.
//
// The selection runs for a batch of queries at once (up to eight; four with 16 stripes), so its
// eight barriers are paid once a batch, not once a query (where invocations are emulated, as on
// lavapipe, each barrier costs more than the block's reads):
//   hist_clear, then hist_add per query and group: each query's distance histogram (16-bit
//     counts);
//   pick_thresholds: each query's threshold t, the distance of its want-th nearest entry;
//   marks_clear, then mark per query and group: the entries nearer than t, and those at t, as a
//     bit per invocation in one 256-bit mask per query, kind and stripe (in the histograms'
//     words, free once the thresholds are picked);
//   marks_done: per query and kind, the marks before each mask word;
//   keep_group per query and group: each kept entry's place (the marks before its mask word, and
//     the bits before its own in that word) and its write.
// Bindings: 0 params, 1 the query codes, 2 one shard of corpus codes (declared by the scan's
// topk_rows*.wgsl, as u32 words or vec4s), 3 ws (the search workspace).

struct TopkParams {
    n_queries: u32,
    code_words: u32,        // code words per row (corpus and queries)
    corpus_row_words: u32,  // words per corpus row (codes, + 1 scale word for binary+scale)
    query_row_words: u32,   // words per query row
    bins: u32,              // bits + 1: the distances there can be
    k: u32,                 // entries kept per block (< 256 · STRIPES; the host: ≤ 64 with 8 stripes)
    tile: u32,              // scan: queries per workgroup (8, or 4 where code_words > 112 or STRIPES is 16)
    shard_first: u32,       // scan: first corpus row of the bound shard
    shard_rows: u32,        // scan: rows of the bound shard
    block_base: u32,        // scan: the shard's first block among all shards'
    in_len: u32,            // merge: entries per query in the input lists
    off_in: u32,            // merge: the input lists in ws (words)
    off_out: u32,           // the output lists in ws (words)
    out_stride: u32,        // pairs per query in the output lists
    pad_to: u32,            // pairs written per block, the kept ones then NONE (k, or more)
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: TopkParams;
@group(0) @binding(1) var<storage, read> queries: array<u32>;
@group(0) @binding(3) var<storage, read_write> ws: array<u32>;

const NONE: u32 = 0xffffffffu;

// Entries per invocation: 8 (blocks of 2048, k ≤ 64) or 16 (blocks of 4096, k ≤ 1024). (4, blocks
// of 1024, works too: more workgroups, each paying the selection's fixed costs.)
override STRIPES: u32 = 8u;
fn block_len() -> u32 {
    return 256u * STRIPES;
}

fn groups() -> u32 {
    return STRIPES / 4u;
}

// Workgroup memory: 8 KiB of histograms (4096 counts, 16 bits each, two to a word; a block's count
// never passes 4096), then the marks in the same words; 1 KiB of partial sums, 128 bytes of
// thresholds, and the scan kernel's 3.5 KiB of queries: 12 928 bytes, under the 16 KiB every
// WebGPU device gives.
var<workgroup> hist: array<atomic<u32>, 2048>;
// An invocation's partial histogram sum (pick_thresholds).
var<workgroup> scratch: array<u32, 256>;
// Per query of the batch: the threshold distance t, the entries nearer than t, and how many to
// keep (want = min(k, entries)).
var<workgroup> picked: array<vec4<u32>, 8>;

// Where the marks' prefix counts start in `hist`, after the masks (8 words each: at most
// 4 queries × 2 kinds × 16 stripes or 8 × 2 × 8, 1024 words; as many prefix counts).
const PREFIX: u32 = 1024u;

fn block_of(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// Histogram words per query: (bins + 1) / 2; a batch's histograms lie side by side.
fn hist_words() -> u32 {
    return (params.bins + 1u) / 2u;
}

// Queries whose histograms (and marks) fit at once: 1 to 8, or to 4 with 16 stripes.
fn batch_size() -> u32 {
    return clamp(2048u / hist_words(), 1u, min(8u, 64u / STRIPES));
}

fn count_at(b: u32) -> u32 {
    return (atomicLoad(&hist[b >> 1u]) >> ((b & 1u) * 16u)) & 0xffffu;
}

// Starts the histograms of a batch of `nb` queries. Call from uniform control flow, then add each
// query's entries with hist_add.
fn hist_clear(lid: u32, nb: u32) {
    workgroupBarrier(); // the previous batch's histograms and marks have been read
    for (var w = lid; w < nb * hist_words(); w += 256u) {
        atomicStore(&hist[w], 0u);
    }
    workgroupBarrier();
}

// Counts the entries `d` (NONE: no entry) of one of this invocation's groups in query qb's
// histogram.
fn hist_add(qb: u32, d: vec4<u32>) {
    let base = 2u * qb * hist_words();
    for (var j = 0u; j < 4u; j++) {
        if (d[j] != NONE) {
            let b = base + d[j];
            atomicAdd(&hist[b >> 1u], 1u << ((b & 1u) * 16u));
        }
    }
}

// For each of the batch's `nb` queries, the distance t of its want-th nearest entry, from its
// histogram: 32 invocations a query each sum a 32nd of the bins, then each adds the sums before
// its own, and the one whose bins hold the want-th finds it. Call from uniform control flow after
// the batch's hist_add calls.
fn pick_thresholds(lid: u32, nb: u32) {
    workgroupBarrier(); // the histograms are complete
    let q = lid / 32u;
    let part = lid % 32u;
    let per = (params.bins + 31u) / 32u;
    let b0 = min(part * per, params.bins);
    let b1 = min(b0 + per, params.bins);
    let base = 2u * q * hist_words();
    var s = 0u;
    if (q < nb) {
        for (var b = b0; b < b1; b++) {
            s += count_at(base + b);
        }
    }
    scratch[lid] = s;
    workgroupBarrier();
    if (q < nb) {
        var before = 0u;
        var total = 0u;
        for (var i = 0u; i < 32u; i++) {
            let v = scratch[q * 32u + i];
            total += v;
            if (i < part) {
                before += v;
            }
        }
        let want = min(params.k, total);
        if (want == 0u && part == 0u) {
            picked[q] = vec4<u32>(0u);
        }
        if (want > 0u && before < want && want <= before + s) {
            var acc = before;
            for (var b = b0; b < b1; b++) {
                let c = count_at(base + b);
                if (acc + c >= want) {
                    picked[q] = vec4<u32>(b, acc, want, 0u);
                    break;
                }
                acc += c;
            }
        }
    }
    workgroupBarrier();
}

// Query qb's flags of the entries `d` of one group: bit j, entry j nearer than the threshold;
// bit 4 + j, entry j at it.
fn flags_of(qb: u32, d: vec4<u32>) -> u32 {
    let pick = picked[qb];
    var f = 0u;
    if (pick.z > 0u) {
        for (var j = 0u; j < 4u; j++) {
            f |= select(0u, 1u << j, d[j] < pick.x) | select(0u, 16u << j, d[j] == pick.x);
        }
    }
    return f;
}

// The mask of query qb, kind (0: nearer than t, 1: at t) and stripe s: 8 words in `hist` from
// 8 × this index, bit `lid % 32` of word `lid / 32` for invocation lid. A query's masks of one
// kind lie in position order, so PREFIX + a word's index holds the marks before that word.
fn mark_index(qb: u32, kind: u32, s: u32) -> u32 {
    return (qb * 2u + kind) * STRIPES + s;
}

// Clears the marks of a batch of `nb` queries (the thresholds are picked: the histograms are
// free). Call from uniform control flow after pick_thresholds, then mark each query's groups.
fn marks_clear(lid: u32, nb: u32) {
    for (var w = lid; w < 16u * nb * STRIPES; w += 256u) {
        atomicStore(&hist[w], 0u);
    }
    workgroupBarrier();
}

// Marks query qb's flagged entries (`f`, from flags_of) of this invocation's group g.
fn mark(lid: u32, qb: u32, g: u32, f: u32) {
    if (f == 0u) {
        return; // most invocations: none of their entries is kept
    }
    let bit = 1u << (lid % 32u);
    for (var j = 0u; j < 4u; j++) {
        for (var kind = 0u; kind < 2u; kind++) {
            if ((f & ((1u << j) << (4u * kind))) != 0u) {
                atomicOr(&hist[8u * mark_index(qb, kind, 4u * g + j) + lid / 32u], bit);
            }
        }
    }
}

// The marks before each mask word, per query and kind: one invocation a query and kind sums its
// 8 · STRIPES words in order. Call from uniform control flow after the batch's mark calls.
fn marks_done(lid: u32, nb: u32) {
    workgroupBarrier();
    if (lid < 2u * nb) {
        let w0 = 8u * mark_index(lid / 2u, lid % 2u, 0u);
        var n = 0u;
        for (var w = w0; w < w0 + 8u * STRIPES; w++) {
            atomicStore(&hist[PREFIX + w], n);
            n += countOneBits(atomicLoad(&hist[w]));
        }
    }
    workgroupBarrier();
}

// Query qb's entries of `kind` before invocation lid's entry in stripe s: those before its mask
// word, then the bits before its own in that word.
fn marked_before(lid: u32, qb: u32, kind: u32, s: u32) -> u32 {
    let w = 8u * mark_index(qb, kind, s) + lid / 32u;
    return atomicLoad(&hist[PREFIX + w]) + countOneBits(atomicLoad(&hist[w]) & ((1u << (lid % 32u)) - 1u));
}

// Writes NONE to query qb's pairs past its kept ones, up to params.pad_to, at ws[out].
fn pad_list(lid: u32, qb: u32, out: u32) {
    for (var p = picked[qb].z + lid; p < params.pad_to; p += 256u) {
        ws[out + 2u * p] = NONE;
        ws[out + 2u * p + 1u] = NONE;
    }
}

// Keeps query qb's nearest among this invocation's group g (entries `d`, rows `row`): of the
// block's min(k, entries) nearest, ties to the earlier position, writes those of this group to
// their places in position order among the pairs at ws[out]. Call after marks_done.
fn keep_group(lid: u32, qb: u32, g: u32, d: vec4<u32>, row: vec4<u32>, out: u32) {
    let own = flags_of(qb, d);
    if (own == 0u) {
        return;
    }
    let pick = picked[qb];
    let need = pick.z - pick.y; // entries at t to keep
    for (var j = 0u; j < 4u; j++) {
        let lt_flag = (own & (1u << j)) != 0u;
        let at_flag = (own & (16u << j)) != 0u;
        if (lt_flag || at_flag) {
            let s = 4u * g + j;
            let at = marked_before(lid, qb, 1u, s);
            if (lt_flag || at < need) {
                let pos = marked_before(lid, qb, 0u, s) + min(at, need);
                ws[out + 2u * pos] = d[j];
                ws[out + 2u * pos + 1u] = row[j];
            }
        }
    }
}
