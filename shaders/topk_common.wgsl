// Shared by the one-pass Hamming top-k kernels (hamming_topk_scan.wgsl, hamming_topk_merge.wgsl):
// the parameter block, the bindings, and `keep_nearest`, which keeps a block's k nearest entries
// in workgroup memory.
//
// A block is up to 1024 entries in order; invocation `lid` of the 256 holds positions
// j·256 + lid (j < 4, "stripe" j), so consecutive invocations read consecutive rows. Its k
// nearest, ties to the earlier position (the lower row), are written in position order: lists of
// blocks in row order stay in row order, and merging them again keeps the CPU path's tie rule.
// Workspace pairs are (distance, row); NONE marks padding.
//
// The selection runs for a batch of up to eight queries at once, so its barriers are paid once a
// batch, not once a query (eight in all; where invocations are emulated, as on lavapipe, each
// barrier costs more than the block's reads):
//   hist_clear, then hist_add per query: each query's distance histogram (16-bit counts);
//   pick_thresholds: each query's threshold t, the distance of its want-th nearest entry;
//   count_flags: each invocation's entries flagged nearer than t or at t, per query and stripe,
//     and counted per group of 16 invocations;
//   keep_nearest per query: each kept entry's place from the counts before it, and its write.
// Bindings: 0 params, 1 the query codes, 2 one shard of corpus codes (declared by the scan's
// topk_rows*.wgsl, as u32 words or vec4s), 3 ws (the search workspace).

struct TopkParams {
    n_queries: u32,
    code_words: u32,        // code words per row (corpus and queries)
    corpus_row_words: u32,  // words per corpus row (codes, + 1 scale word for binary+scale)
    query_row_words: u32,   // words per query row
    bins: u32,              // bits + 1: the distances there can be
    k: u32,                 // entries kept per block (≤ 256)
    tile: u32,              // scan: queries per workgroup (8, or 4 where code_words > 112)
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
const BLOCK: u32 = 1024u;

// Workgroup memory: 8 KiB of histograms (4096 counts, 16 bits each, two to a word; a block's count
// never passes 1024), 3 KiB of flags and counts, 256 bytes of thresholds and totals and the scan
// kernel's 3.5 KiB of queries: 15 104 bytes, under the 16 KiB every WebGPU device gives.
var<workgroup> hist: array<atomic<u32>, 2048>;
// .x: an invocation's partial histogram sum (pick_thresholds); then its flags, a byte a query
// (queries 0–3 in .x, 4–7 in .y); then at g·8 + q the counts before group g (count_flags).
var<workgroup> scratch: array<vec2<u32>, 256>;
// At g·8 + q: the counts of group g's flags (count_flags). Apart from `scratch`, which other
// invocations read meanwhile: a write to one component of a vector may touch the whole vector.
var<workgroup> group_counts: array<vec2<u32>, 128>;
// Per query of the batch: the threshold distance t, the entries nearer than t, and how many to
// keep (want = min(k, entries)).
var<workgroup> picked: array<vec4<u32>, 8>;

// The most queries a batch takes.
const MAX_BATCH: u32 = 8u;

fn block_of(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// Histogram words per query: (bins + 1) / 2; a batch's histograms lie side by side.
fn hist_words() -> u32 {
    return (params.bins + 1u) / 2u;
}

// Queries whose histograms fit at once (1 to MAX_BATCH).
fn batch_size() -> u32 {
    return clamp(2048u / hist_words(), 1u, MAX_BATCH);
}

fn count_at(b: u32) -> u32 {
    return (atomicLoad(&hist[b >> 1u]) >> ((b & 1u) * 16u)) & 0xffffu;
}

// Starts the histograms of a batch of `nb` queries. Call from uniform control flow, then add each
// query's entries with hist_add.
fn hist_clear(lid: u32, nb: u32) {
    workgroupBarrier(); // the previous batch's histograms, flags and counts have been read
    for (var w = lid; w < nb * hist_words(); w += 256u) {
        atomicStore(&hist[w], 0u);
    }
    workgroupBarrier();
}

// Counts this invocation's entries `d` (NONE: no entry) in query qb's histogram.
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
    scratch[lid] = vec2<u32>(s, 0u);
    workgroupBarrier();
    if (q < nb) {
        var before = 0u;
        var total = 0u;
        for (var i = 0u; i < 32u; i++) {
            let v = scratch[q * 32u + i].x;
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

// Query qb's flags of this invocation's entries `d`: bit j, entry j nearer than the threshold;
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

// Four flag bits spread to the low bits of four bytes, one a stripe.
fn spread(f: u32) -> u32 {
    return (f & 1u) | ((f & 2u) << 7u) | ((f & 4u) << 14u) | ((f & 8u) << 21u);
}

// Four byte counts (each ≤ 15) as four nibbles, and back.
fn nibbles(x: u32) -> u32 {
    return (x & 0xfu) | ((x >> 4u) & 0xf0u) | ((x >> 8u) & 0xf00u) | ((x >> 12u) & 0xf000u);
}

fn spread_nibbles(x: u32) -> u32 {
    return (x & 0xfu) | ((x & 0xf0u) << 4u) | ((x & 0xf00u) << 8u) | ((x & 0xf000u) << 12u);
}

fn flag_byte(i: u32, qb: u32) -> u32 {
    let w = select(scratch[i].y, scratch[i].x, qb < 4u);
    return (w >> ((qb & 3u) * 8u)) & 0xffu;
}

// Per query of the batch: the entries nearer than the threshold in each stripe, a byte a stripe
// (fewer than want ≤ 256, so a byte holds them), and those at it, 16 bits a stripe (a stripe
// can hold 256): stripes 0 and 2 in .y, 1 and 3 in .z.
var<workgroup> totals: array<vec4<u32>, 8>;

// Publishes this invocation's flags (`lo`: queries 0–3 of the batch, a byte each; `hi`: 4–7)
// and turns every query's flags into counts before each entry, so keep_nearest places an entry
// in constant time. Invocations 0–127 work, one per group of 16 invocations g and query q (the
// others skip together): first the counts of the flags before each invocation i of the group,
// per stripe and kind (a nibble each: ≤ 15), stored in the histograms' words (free once the
// thresholds are picked) at i·8 + q, and the group's counts (a byte each: ≤ 16) at
// group_counts[g·8 + q]; then the counts of the groups before g (≤ 255, a byte each) at
// scratch[g·8 + q], and the totals. Call from uniform control flow after pick_thresholds.
fn count_flags(lid: u32, nb: u32, lo: u32, hi: u32) {
    // pick_thresholds' partial sums were read before its last barrier.
    scratch[lid] = vec2<u32>(lo, hi);
    workgroupBarrier();
    let g = lid / 8u;
    let q = lid % 8u;
    let busy = lid < 128u && q < nb;
    if (busy) {
        var lt = 0u;
        var at = 0u;
        for (var i = g * 16u; i < g * 16u + 16u; i++) {
            let f = flag_byte(i, q);
            atomicStore(&hist[i * 8u + q], nibbles(lt) | (nibbles(at) << 16u));
            lt += spread(f & 15u);
            at += spread(f >> 4u);
        }
        group_counts[g * 8u + q] = vec2<u32>(lt, at);
    }
    workgroupBarrier();
    if (busy) {
        var lt_before = 0u;
        var at_before = 0u;
        var lt_total = 0u;
        var at02 = 0u;
        var at13 = 0u;
        for (var i = 0u; i < 16u; i++) {
            let c = group_counts[i * 8u + q];
            lt_total += c.x;
            at02 += c.y & 0x00ff00ffu;
            at13 += (c.y >> 8u) & 0x00ff00ffu;
            if (i < g) {
                lt_before += c.x;
                at_before += c.y;
            }
        }
        scratch[g * 8u + q] = vec2<u32>(lt_before, at_before);
        if (g == 0u) {
            totals[q] = vec4<u32>(lt_total, at02, at13, 0u);
        }
    }
    workgroupBarrier();
}

// Keeps query qb's min(k, entries) nearest of the block, this invocation's entries being `d` and
// `row`, ties to the earlier position, and writes them in position order to the pairs at ws[out],
// then NONE up to params.pad_to pairs. Call after count_flags.
fn keep_nearest(lid: u32, qb: u32, d: vec4<u32>, row: vec4<u32>, out: u32) {
    let pick = picked[qb];
    let want = pick.z;
    let need = want - pick.y;
    for (var p = want + lid; p < params.pad_to; p += 256u) {
        ws[out + 2u * p] = NONE;
        ws[out + 2u * p + 1u] = NONE;
    }
    let own = flags_of(qb, d);
    if (own == 0u) {
        return; // most invocations: none of their entries is kept
    }
    // Entries nearer than t, and at t, before this invocation's in each stripe: the groups'
    // before its group, then the group's before it.
    let groups = scratch[(lid / 16u) * 8u + qb];
    let within = atomicLoad(&hist[lid * 8u + qb]);
    let lt_before = groups.x + spread_nibbles(within & 0xffffu);
    let at_before = groups.y + spread_nibbles(within >> 16u);
    let tot = totals[qb];
    let at_total = vec4<u32>(tot.y & 0xffffu, tot.z & 0xffffu, tot.y >> 16u, tot.z >> 16u);
    var lt_base = 0u;
    var at_base = 0u;
    for (var j = 0u; j < 4u; j++) {
        let lt = lt_base + ((lt_before >> (8u * j)) & 0xffu);
        let at = at_base + ((at_before >> (8u * j)) & 0xffu);
        if ((own & (1u << j)) != 0u || ((own & (16u << j)) != 0u && at < need)) {
            let pos = lt + min(at, need);
            ws[out + 2u * pos] = d[j];
            ws[out + 2u * pos + 1u] = row[j];
        }
        lt_base += (tot.x >> (8u * j)) & 0xffu;
        at_base += at_total[j];
    }
}
