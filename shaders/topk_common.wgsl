// Shared by the one-pass Hamming top-k kernels (hamming_topk_scan.wgsl, hamming_topk_merge.wgsl):
// the parameter block, the bindings, and `keep_nearest`, which keeps a block's k nearest entries
// in workgroup memory.
//
// A block is up to 1024 entries in order; invocation `lid` of the 256 holds positions
// j·256 + lid (j < 4), so consecutive invocations read consecutive rows. Its k nearest, ties to
// the earlier position (the lower row), are written in position order: lists of blocks in row
// order stay in row order, and merging them again keeps the CPU path's tie rule.
// Workspace pairs are (distance, row); NONE marks padding.
// Bindings: 0 params, 1 the query codes, 2 one shard of corpus codes, 3 ws (the search workspace).

struct TopkParams {
    n_queries: u32,
    code_words: u32,        // code words per row (corpus and queries)
    corpus_row_words: u32,  // words per corpus row (codes, + 1 scale word for binary+scale)
    query_row_words: u32,   // words per query row
    bins: u32,              // bits + 1: the distances there can be
    k: u32,                 // entries kept per block (≤ 256)
    tile: u32,              // scan: queries per workgroup (≤ MAX_TILE, tile·code_words ≤ QTILE_WORDS)
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
@group(0) @binding(2) var<storage, read> shard: array<u32>;
@group(0) @binding(3) var<storage, read_write> ws: array<u32>;

const NONE: u32 = 0xffffffffu;
const BLOCK: u32 = 1024u;

// Workgroup memory: 8 KiB of histogram (4096 distances, 16-bit counts two to a word; a block's
// count never passes 1024), 4.25 KiB of scan, and the scan kernel's 3.5 KiB of queries: 15.8 KiB
// (16 136 bytes with the rest), under the 16 KiB every WebGPU device gives.
var<workgroup> hist: array<atomic<u32>, 2048>;
var<workgroup> scan4: array<vec4<u32>, 256>;
var<workgroup> picked: vec2<u32>;

fn block_of(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// What scan_exclusive gives each invocation: the sums of the values before its own, and of all.
struct Scan {
    before: vec4<u32>,
    total: vec4<u32>,
}

var<workgroup> group_sums: array<vec4<u32>, 16>;

// Exclusive prefix sums of `v` over the 256 invocations, four at once: sixteen invocations sum
// sixteen values each, then each invocation adds the groups before its own and the values before
// it in its group. Three barriers (a log-step scan takes seventeen, which costs more than the
// reads on a GPU and far more where invocations are emulated). Call from uniform control flow.
fn scan_exclusive(lid: u32, v: vec4<u32>) -> Scan {
    workgroupBarrier(); // the previous call's values have been read
    scan4[lid] = v;
    workgroupBarrier();
    if (lid < 16u) {
        var acc = vec4<u32>(0u);
        for (var i = lid * 16u; i < lid * 16u + 16u; i++) {
            acc += scan4[i];
        }
        group_sums[lid] = acc;
    }
    workgroupBarrier();
    let g = lid / 16u;
    var out: Scan;
    for (var i = 0u; i < 16u; i++) {
        let s = group_sums[i];
        out.total += s;
        if (i < g) {
            out.before += s;
        }
    }
    for (var i = g * 16u; i < lid; i++) {
        out.before += scan4[i];
    }
    return out;
}

fn count_at(b: u32) -> u32 {
    return (atomicLoad(&hist[b >> 1u]) >> ((b & 1u) * 16u)) & 0xffffu;
}

// Keeps the min(k, entries) nearest of the block held in `d` and `row` (distance NONE: no entry),
// ties to the earlier position, and writes them in position order to the pairs at ws[out], then
// NONE up to params.pad_to pairs. Call from uniform control flow.
fn keep_nearest(lid: u32, d: array<u32, 4>, row: array<u32, 4>, out: u32) {
    for (var w = lid; w < (params.bins + 1u) / 2u; w += 256u) {
        atomicStore(&hist[w], 0u);
    }
    workgroupBarrier();
    for (var j = 0u; j < 4u; j++) {
        if (d[j] != NONE) {
            atomicAdd(&hist[d[j] >> 1u], 1u << ((d[j] & 1u) * 16u));
        }
    }
    workgroupBarrier();
    // The threshold t: the distance of the want-th nearest; `below` entries are nearer.
    let per = (params.bins + 255u) / 256u;
    let b0 = min(lid * per, params.bins);
    let b1 = min(b0 + per, params.bins);
    var s = 0u;
    for (var b = b0; b < b1; b++) {
        s += count_at(b);
    }
    let sums = scan_exclusive(lid, vec4<u32>(s, 0u, 0u, 0u));
    let before = sums.before.x;
    let want = min(params.k, sums.total.x);
    if (want > 0u && before < want && want <= before + s) {
        var acc = before;
        for (var b = b0; b < b1; b++) {
            let c = count_at(b);
            if (acc + c >= want) {
                picked = vec2<u32>(b, acc);
                break;
            }
            acc += c;
        }
    }
    workgroupBarrier();
    var t = 0u;
    var need = 0u;
    if (want > 0u) {
        t = picked.x;
        need = want - picked.y;
    }
    // Per stripe j: entries nearer than t (low half) and at t (high half), then their prefixes.
    var v = vec4<u32>(0u);
    for (var j = 0u; j < 4u; j++) {
        if (want > 0u && d[j] < t) {
            v[j] = 1u;
        } else if (want > 0u && d[j] == t) {
            v[j] = 1u << 16u;
        }
    }
    let stripes = scan_exclusive(lid, v);
    let ex = stripes.before;
    let tot = stripes.total;
    var lt_base = 0u;
    var tie_base = 0u;
    for (var j = 0u; j < 4u; j++) {
        let lt_before = lt_base + (ex[j] & 0xffffu);
        let tie_before = tie_base + (ex[j] >> 16u);
        if (v[j] == 1u || (v[j] != 0u && tie_before < need)) {
            let pos = lt_before + min(tie_before, need);
            ws[out + 2u * pos] = d[j];
            ws[out + 2u * pos + 1u] = row[j];
        }
        lt_base += tot[j] & 0xffffu;
        tie_base += tot[j] >> 16u;
    }
    for (var p = want + lid; p < params.pad_to; p += 256u) {
        ws[out + 2u * p] = NONE;
        ws[out + 2u * p + 1u] = NONE;
    }
}
