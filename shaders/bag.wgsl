// bag: EmbeddingBag over one table or a batch of tables of one format (FBGEMM's table-batched
// embedding), dequantisation fused into the pooling loop: no [indices × dim] intermediate.
// Assembled after gather_common.wgsl (bounds policy, grid helper), bag_shard.wgsl or
// bag_shard4.wgsl (the shard, word(), quad()) and decode_<format>.wgsl.
//
// Bindings: 0 params (uniform BagParams), 1 tables (TableMeta per table), 2 indices (u32),
// 3 offsets (u32, bags + 1, validated on the host: start at 0, never decrease, end at the number
// of indices; when sorted out by shard, bags + 1 per shard and then the bags' own), 4 weights
// (f32 per index; read only when has_weights), 5 shard (packed rows of all tables, concatenated
// table after table; this dispatch sees words [shard_start, shard_end) of them, always whole
// rows), 6 out (f32: bag (t, b) at out_base_t + b·out_stride_t, dim_t values;
// for POOL_NONE, index j's row at j·dim).
//
// Bags are feature-major: bag g = t·batch + b. A workgroup pools WG_Y consecutive bags, whose
// indices are one contiguous range: the whole workgroup stages them (and their weights) in
// workgroup memory, CHUNK at a time, with one coalesced load, as FBGEMM's table-batched kernels
// stage a warp's indices. The WG_X lanes of a bag then walk the staged indices four at a time (four
// rows in flight), each lane owning interleaved columns: with VEC4 (every dim a multiple of 4) the
// quads lane, lane + WG_X, lane + 2·WG_X, lane + 3·WG_X of a block of 16·WG_X columns, else single
// columns the same way, so neighbouring lanes read neighbouring words of a row. With WIDE (and
// VEC4: a decoder with a 16-byte read, decode16, over rows aligned to 16 bytes, every dim a
// multiple of 16) a lane owns sixteen contiguous columns instead, the four quads one load of a
// row brings, and neighbouring lanes read neighbouring 16-byte words. Accumulators are
// four named values, never a runtime-indexed array (which a compiler puts in local memory).
// Indices are pooled in order, so on one shard the sum is the CPU oracle's up to the driver's
// fusing of w·x + acc. A batch spread over several shards is pooled by one dispatch per shard: the
// first initialises the output (0, or −∞ for max), later ones add to (or max with) what is there,
// the last finalises (÷ n for mean; an empty bag becomes 0); across shards partial sums are added,
// a different order (a documented tolerance).
// Indices from the host come to a sharded table sorted out by shard: each dispatch's offsets
// (from offsets_base) then cover only the indices in its shard, and the bags' own offsets (from
// counts_base) count them for mean. Otherwise both bases are 0 and every dispatch reads every
// index, pooling those in its shard.

struct BagParams {
    batch: u32,        // B: bags per table
    n_bags: u32,       // B·T, or the number of indices for POOL_NONE
    pooling: u32,      // POOL_*
    policy: u32,       // POLICY_ZERO or POLICY_CLAMP (Error is checked on the host)
    has_weights: u32,
    shard_start: u32,  // first word (of the concatenated tables) in the bound shard
    shard_end: u32,    // one past its last word
    first_pass: u32,   // 1: initialise the output
    last_pass: u32,    // 1: finalise the output
    offsets_base: u32, // where this dispatch's offsets start in `offsets`
    counts_base: u32,  // where the offsets that count each bag's indices (for mean) start
    max_dim: u32,      // the widest table's dim: the column blocks of every bag
}

struct TableMeta {
    word_base: u32,    // first word of the table in the concatenation
    rows: u32,
    dim: u32,
    row_words: u32,    // words from a row to the next (an aligned row's padding included)
    code_words: u32,
    out_base: u32,     // where bag (t, 0) starts in out
    out_stride: u32,   // distance between bags (t, b) and (t, b + 1)
    _pad: u32,
}

const POOL_SUM: u32 = 0u;
const POOL_MEAN: u32 = 1u;
const POOL_MAX: u32 = 2u;
const POOL_NONE: u32 = 3u;

override WG_X: u32 = 16u;
override WG_Y: u32 = 16u;
override VEC4: bool = false;
override WIDE: bool = false;

@group(0) @binding(0) var<uniform> params: BagParams;
@group(0) @binding(1) var<storage, read> tables: array<TableMeta>;
@group(0) @binding(2) var<storage, read> indices: array<u32>;
@group(0) @binding(3) var<storage, read> offsets: array<u32>;
@group(0) @binding(4) var<storage, read> weights: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

// The first word, within the bound shard, of row `index` of table `m`; ROW_SKIP or ROW_ZERO.
// Every index is checked before the table is read (WebGPU would clamp a bad read silently).
fn locate(index: u32, m: TableMeta) -> u32 {
    var row = index;
    if (row >= m.rows) {
        if (params.policy == POLICY_CLAMP) {
            row = m.rows - 1u;
        } else {
            return ROW_ZERO;
        }
    }
    let w = m.word_base + row * m.row_words;
    if (w < params.shard_start || w >= params.shard_end) {
        return ROW_SKIP;
    }
    return w - params.shard_start;
}

fn weight(j: u32) -> f32 {
    if (params.has_weights == 1u) {
        return weights[j];
    }
    return 1.0;
}

fn combine4(acc: vec4<f32>, v: vec4<f32>, w: f32) -> vec4<f32> {
    if (params.pooling == POOL_MAX) {
        return max(acc, v);
    }
    return acc + w * v;
}

fn combine1(acc: f32, v: f32, w: f32) -> f32 {
    if (params.pooling == POOL_MAX) {
        return max(acc, v);
    }
    return acc + w * v;
}

fn start_value() -> f32 {
    // The lowest finite f32 for max: table values are finite, so it never wins. (Not −∞: a WGSL
    // constant expression may not produce an infinity, and Chrome's compiler enforces it.)
    return select(0.0, bitcast<f32>(0xff7fffffu), params.pooling == POOL_MAX); // −FLT_MAX
}

// The finished value of an accumulator over n indices.
fn finish(acc: f32, n: u32) -> f32 {
    if (n == 0u) {
        return 0.0;
    }
    if (params.pooling == POOL_MEAN) {
        return acc / f32(n);
    }
    return acc;
}

// Indices staged per round: a workgroup's worth (WebGPU guarantees 256 invocations; a smaller
// workgroup stages several per lane).
const CHUNK: u32 = 256u;
var<workgroup> staged_ids: array<u32, CHUNK>;
var<workgroup> staged_weights: array<f32, CHUNK>;
// The workgroup's indices: first, one past the last.
var<workgroup> span: vec2<u32>;

// Indices lo .. min(lo + CHUNK, end) (and their weights) into workgroup memory, lane by lane.
fn stage(lo: u32, end: u32, flat: u32) {
    for (var i = flat; i < CHUNK; i += WG_X * WG_Y) {
        let j = lo + i;
        if (j < end) {
            staged_ids[i] = indices[j];
            if (params.has_weights == 1u) {
                staged_weights[i] = weights[j];
            }
        }
    }
}

// One staged index, resolved: where its row is (or ROW_SKIP / ROW_ZERO), its weight and its
// row's parameters (read only for a row in the shard).
struct Term {
    loc: u32,
    w: f32,
    rp: RowParams,
}

// The term that changes nothing: pads a group of four past the bag's end.
fn no_term() -> Term {
    var x: Term;
    x.loc = ROW_SKIP;
    return x;
}

// Staged index i of table m, or no_term() when i is not below hi.
fn term(i: u32, hi: u32, m: TableMeta) -> Term {
    var x = no_term();
    if (i < hi) {
        x.loc = locate(staged_ids[i], m);
        if (x.loc < ROW_ZERO) {
            x.w = select(1.0, staged_weights[i], params.has_weights == 1u);
            x.rp = row_params(x.loc, m.code_words);
        }
    }
    return x;
}

// What a term adds for a row it does not read: nothing (0 for sum, −FLT_MAX for max), but a zero
// row of a bad index under POLICY_ZERO is pooled by the first pass (max with 0).
fn empty_value(loc: u32) -> f32 {
    return select(start_value(), 0.0, loc == ROW_ZERO && params.first_pass == 1u);
}

fn value4(x: Term, c: u32) -> vec4<f32> {
    if (x.loc >= ROW_ZERO) {
        return vec4<f32>(empty_value(x.loc));
    }
    return decode4(x.loc, c, x.rp);
}

// Columns c .. c + 16 of a term's row (c a multiple of 16), from decode16.
fn value16(x: Term, c: u32) -> Quads {
    if (x.loc >= ROW_ZERO) {
        let e = vec4<f32>(empty_value(x.loc));
        return Quads(e, e, e, e);
    }
    return decode16(x.loc, c, x.rp);
}

fn value1(x: Term, c: u32) -> f32 {
    if (x.loc >= ROW_ZERO) {
        return empty_value(x.loc);
    }
    return decode1(x.loc, c, x.rp);
}

// Four terms into one accumulator, in index order; the four reads are independent.
fn step4(acc: vec4<f32>, c: u32, x0: Term, x1: Term, x2: Term, x3: Term) -> vec4<f32> {
    let v0 = value4(x0, c);
    let v1 = value4(x1, c);
    let v2 = value4(x2, c);
    let v3 = value4(x3, c);
    return combine4(combine4(combine4(combine4(acc, v0, x0.w), v1, x1.w), v2, x2.w), v3, x3.w);
}

// step4 over sixteen columns, one read of each row: each accumulator still takes the four terms
// in index order.
fn step16(acc: Quads, c: u32, x0: Term, x1: Term, x2: Term, x3: Term) -> Quads {
    let v0 = value16(x0, c);
    let v1 = value16(x1, c);
    let v2 = value16(x2, c);
    let v3 = value16(x3, c);
    var r: Quads;
    r.a = combine4(combine4(combine4(combine4(acc.a, v0.a, x0.w), v1.a, x1.w), v2.a, x2.w), v3.a, x3.w);
    r.b = combine4(combine4(combine4(combine4(acc.b, v0.b, x0.w), v1.b, x1.w), v2.b, x2.w), v3.b, x3.w);
    r.c = combine4(combine4(combine4(combine4(acc.c, v0.c, x0.w), v1.c, x1.w), v2.c, x2.w), v3.c, x3.w);
    r.d = combine4(combine4(combine4(combine4(acc.d, v0.d, x0.w), v1.d, x1.w), v2.d, x2.w), v3.d, x3.w);
    return r;
}

fn step1(acc: f32, c: u32, x0: Term, x1: Term, x2: Term, x3: Term) -> f32 {
    let v0 = value1(x0, c);
    let v1 = value1(x1, c);
    let v2 = value1(x2, c);
    let v3 = value1(x3, c);
    return combine1(combine1(combine1(combine1(acc, v0, x0.w), v1, x1.w), v2, x2.w), v3, x3.w);
}

// The accumulator of the quad starting at column c (c < dim): the output so far, or the start.
fn load4(p: u32) -> vec4<f32> {
    if (params.first_pass == 1u) {
        return vec4<f32>(start_value());
    }
    return vec4<f32>(out[p], out[p + 1u], out[p + 2u], out[p + 3u]);
}

fn load1(p: u32) -> f32 {
    if (params.first_pass == 1u) {
        return start_value();
    }
    return out[p];
}

fn store4(p: u32, acc: vec4<f32>, n: u32) {
    var v = acc;
    if (params.last_pass == 1u) {
        v = vec4<f32>(finish(v.x, n), finish(v.y, n), finish(v.z, n), finish(v.w, n));
    }
    out[p] = v.x;
    out[p + 1u] = v.y;
    out[p + 2u] = v.z;
    out[p + 3u] = v.w;
}

fn store1(p: u32, acc: f32, n: u32) {
    var v = acc;
    if (params.last_pass == 1u) {
        v = finish(v, n);
    }
    out[p] = v;
}

// POOL_NONE: index j's own row, times its weight.
fn unpooled_row(j: u32, lane: u32) {
    let m = tables[0];
    let o = j * m.dim;
    let loc = locate(indices[j], m);
    if (loc == ROW_SKIP) {
        return;
    }
    if (loc == ROW_ZERO) {
        if (params.first_pass == 1u) {
            for (var c = lane; c < m.dim; c += WG_X) {
                out[o + c] = 0.0;
            }
        }
        return;
    }
    let rp = row_params(loc, m.code_words);
    let w = weight(j);
    for (var c = lane; c < m.dim; c += WG_X) {
        out[o + c] = w * decode1(loc, c, rp);
    }
}

@compute @workgroup_size(WG_X, WG_Y)
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) flat: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    if (params.pooling == POOL_NONE) {
        let j = id_index(wid, nwg, lid, WG_Y);
        if (j < params.n_bags) {
            unpooled_row(j, lid.x);
        }
        return;
    }
    // No return from here on: every lane reaches the barriers, those of bags past the end too.
    let first = min((wid.y * nwg.x + wid.x) * WG_Y, params.n_bags);
    let g = first + lid.y;
    let live = g < params.n_bags;
    var m: TableMeta;
    var start = 0u;
    var end = 0u;
    var n = 0u;
    var o = 0u;
    if (live) {
        let t = g / params.batch;
        m = tables[t];
        start = offsets[params.offsets_base + g];
        end = offsets[params.offsets_base + g + 1u];
        n = offsets[params.counts_base + g + 1u] - offsets[params.counts_base + g];
        o = m.out_base + (g - t * params.batch) * m.out_stride;
    }
    if (flat == 0u) {
        let last = min(first + WG_Y, params.n_bags);
        span = vec2<u32>(offsets[params.offsets_base + first], offsets[params.offsets_base + last]);
    }
    let range = workgroupUniformLoad(&span);
    let rounds = (range.y - range.x + CHUNK - 1u) / CHUNK;
    let width = select(1u, 4u, VEC4); // columns per lane and accumulator
    let block = 4u * width * WG_X;    // columns per block: four accumulators per lane
    let blocks = (params.max_dim + block - 1u) / block;
    for (var blk = 0u; blk < blocks; blk++) {
        // The first column of each accumulator, and whether it is inside the bag's row.
        // Quads interleaved across lanes, or (WIDE) a lane's sixteen contiguous columns.
        var c0 = blk * block + width * lid.x;
        var spread = width * WG_X;
        if (WIDE) {
            c0 = blk * block + 16u * lid.x;
            spread = 4u;
        }
        let c1 = c0 + spread;
        let c2 = c1 + spread;
        let c3 = c2 + spread;
        let in0 = c0 < m.dim;
        let in1 = c1 < m.dim;
        let in2 = c2 < m.dim;
        let in3 = c3 < m.dim;
        var a0 = vec4<f32>(0.0);
        var a1 = vec4<f32>(0.0);
        var a2 = vec4<f32>(0.0);
        var a3 = vec4<f32>(0.0);
        if (VEC4) {
            if (in0) { a0 = load4(o + c0); }
            if (in1) { a1 = load4(o + c1); }
            if (in2) { a2 = load4(o + c2); }
            if (in3) { a3 = load4(o + c3); }
        } else {
            if (in0) { a0.x = load1(o + c0); }
            if (in1) { a1.x = load1(o + c1); }
            if (in2) { a2.x = load1(o + c2); }
            if (in3) { a3.x = load1(o + c3); }
        }
        for (var r = 0u; r < rounds; r++) {
            let base = range.x + r * CHUNK;
            stage(base, range.y, flat);
            workgroupBarrier();
            // This bag's staged indices (positions i .. hi of the stage), in order, four at a
            // time; none for a lane with no column in this block.
            let first_j = max(start, base);
            let end_j = min(end, base + CHUNK);
            var i = 0u;
            var hi = 0u;
            if (in0 && first_j < end_j) {
                i = first_j - base;
                hi = end_j - base;
            }
            for (; i < hi; i += 4u) {
                let x0 = term(i, hi, m);
                let x1 = term(i + 1u, hi, m);
                let x2 = term(i + 2u, hi, m);
                let x3 = term(i + 3u, hi, m);
                if (WIDE) {
                    // dim a multiple of 16: the four quads are in the row together.
                    let q = step16(Quads(a0, a1, a2, a3), c0, x0, x1, x2, x3);
                    a0 = q.a;
                    a1 = q.b;
                    a2 = q.c;
                    a3 = q.d;
                } else if (VEC4) {
                    a0 = step4(a0, c0, x0, x1, x2, x3);
                    if (in1) { a1 = step4(a1, c1, x0, x1, x2, x3); }
                    if (in2) { a2 = step4(a2, c2, x0, x1, x2, x3); }
                    if (in3) { a3 = step4(a3, c3, x0, x1, x2, x3); }
                } else {
                    a0.x = step1(a0.x, c0, x0, x1, x2, x3);
                    if (in1) { a1.x = step1(a1.x, c1, x0, x1, x2, x3); }
                    if (in2) { a2.x = step1(a2.x, c2, x0, x1, x2, x3); }
                    if (in3) { a3.x = step1(a3.x, c3, x0, x1, x2, x3); }
                }
            }
            workgroupBarrier();
        }
        if (VEC4) {
            if (in0) { store4(o + c0, a0, n); }
            if (in1) { store4(o + c1, a1, n); }
            if (in2) { store4(o + c2, a2, n); }
            if (in3) { store4(o + c3, a3, n); }
        } else {
            if (in0) { store1(o + c0, a0.x, n); }
            if (in1) { store1(o + c1, a1.x, n); }
            if (in2) { store1(o + c2, a2.x, n); }
            if (in3) { store1(o + c3, a3.x, n); }
        }
    }
}
