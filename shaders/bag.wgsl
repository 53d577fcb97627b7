// bag: EmbeddingBag over one table or a batch of tables of one format (FBGEMM's table-batched
// embedding), dequantisation fused into the pooling loop: no [indices × dim] intermediate.
// Assembled after gather_common.wgsl (bounds policy, grid helper) and decode_<format>.wgsl.
//
// Bindings: 0 params (uniform BagParams), 1 tables (TableMeta per table), 2 indices (u32),
// 3 offsets (u32, bags + 1, validated on the host: start at 0, never decrease, end at the number
// of indices; when sorted out by shard, bags + 1 per shard and then the bags' own), 4 weights
// (f32 per index; read only when has_weights), 5 shard (packed rows of all tables, concatenated
// table after table; this dispatch sees words [shard_start, shard_end) of them, always whole
// rows), 6 out (f32: bag (t, b) at out_base_t + b·out_stride_t, dim_t values;
// for POOL_NONE, index j's row at j·dim).
//
// Bags are feature-major: bag g = t·batch + b. A workgroup handles WG_Y bags; its WG_X
// invocations split the bag's columns, 16 at a time (four vec4 accumulators) when VEC4 (every
// dim a multiple of 4), else one. A batch spread over several shards is pooled by one dispatch
// per shard: the first initialises the output (0, or −∞ for max), later ones add to (or max with)
// what is there, the last finalises (÷ n for mean; an empty bag becomes 0). Indices are pooled in
// order within a shard, so on one shard the sum is the CPU oracle's up to the driver's fusing of
// w·x + acc; across shards partial sums are added, a different order (a documented tolerance).
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
    _pad0: u32,
}

struct TableMeta {
    word_base: u32,    // first word of the table in the concatenation
    rows: u32,
    dim: u32,
    row_words: u32,
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

@group(0) @binding(0) var<uniform> params: BagParams;
@group(0) @binding(1) var<storage, read> tables: array<TableMeta>;
@group(0) @binding(2) var<storage, read> indices: array<u32>;
@group(0) @binding(3) var<storage, read> offsets: array<u32>;
@group(0) @binding(4) var<storage, read> weights: array<f32>;
@group(0) @binding(5) var<storage, read> shard: array<u32>;
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

// Pools columns c0 .. c0 + 16 (those below dim) of one bag, whose indices here are
// start .. end, n in all.
fn pool16(m: TableMeta, start: u32, end: u32, n: u32, o: u32, c0: u32) {
    let quads = min(4u, (m.dim - c0) / 4u);
    var acc: array<vec4<f32>, 4>;
    for (var q = 0u; q < quads; q++) {
        let p = o + c0 + 4u * q;
        if (params.first_pass == 1u) {
            acc[q] = vec4<f32>(start_value());
        } else {
            acc[q] = vec4<f32>(out[p], out[p + 1u], out[p + 2u], out[p + 3u]);
        }
    }
    for (var j = start; j < end; j++) {
        let loc = locate(indices[j], m);
        if (loc == ROW_ZERO) {
            if (params.first_pass == 1u && params.pooling == POOL_MAX) {
                for (var q = 0u; q < quads; q++) {
                    acc[q] = max(acc[q], vec4<f32>(0.0));
                }
            }
            continue;
        }
        if (loc == ROW_SKIP) {
            continue;
        }
        let rp = row_params(loc, m.code_words);
        let w = weight(j);
        for (var q = 0u; q < quads; q++) {
            acc[q] = combine4(acc[q], decode4(loc, c0 + 4u * q, rp), w);
        }
    }
    for (var q = 0u; q < quads; q++) {
        let p = o + c0 + 4u * q;
        var v = acc[q];
        if (params.last_pass == 1u) {
            v = vec4<f32>(finish(v.x, n), finish(v.y, n), finish(v.z, n), finish(v.w, n));
        }
        out[p] = v.x;
        out[p + 1u] = v.y;
        out[p + 2u] = v.z;
        out[p + 3u] = v.w;
    }
}

// Pools column c of one bag, whose indices here are start .. end, n in all.
fn pool1(m: TableMeta, start: u32, end: u32, n: u32, o: u32, c: u32) {
    var acc = start_value();
    if (params.first_pass == 0u) {
        acc = out[o + c];
    }
    for (var j = start; j < end; j++) {
        let loc = locate(indices[j], m);
        if (loc == ROW_ZERO) {
            if (params.first_pass == 1u && params.pooling == POOL_MAX) {
                acc = max(acc, 0.0);
            }
            continue;
        }
        if (loc == ROW_SKIP) {
            continue;
        }
        acc = combine1(acc, decode1(loc, c, row_params(loc, m.code_words)), weight(j));
    }
    if (params.last_pass == 1u) {
        acc = finish(acc, n);
    }
    out[o + c] = acc;
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
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let g = id_index(wid, nwg, lid, WG_Y);
    if (g >= params.n_bags) {
        return;
    }
    if (params.pooling == POOL_NONE) {
        unpooled_row(g, lid.x);
        return;
    }
    let t = g / params.batch;
    let b = g - t * params.batch;
    let m = tables[t];
    let start = offsets[params.offsets_base + g];
    let end = offsets[params.offsets_base + g + 1u];
    let n = offsets[params.counts_base + g + 1u] - offsets[params.counts_base + g];
    let o = m.out_base + b * m.out_stride;
    if (VEC4) {
        for (var c0 = lid.x * 16u; c0 < m.dim; c0 += WG_X * 16u) {
            pool16(m, start, end, n, o, c0);
        }
    } else {
        for (var c = lid.x; c < m.dim; c += WG_X) {
            pool1(m, start, end, n, o, c);
        }
    }
}
