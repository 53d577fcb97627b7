// rescore: the score of each candidate row of one query: the dot product of the float query
// with the row of the rescoring table (decoded by the decode_<format>.wgsl before this file, which
// reads the shard through gather_shard.wgsl's word()),
// summed in column order. Each candidate is scored by the dispatch of the shard holding its row;
// its key becomes the score mapped so that ascending keys are descending scores.
// Bindings: 0 params, 1 float queries (Q × dim), 2 one shard of the rescoring table, 3 ws.

@group(0) @binding(0) var<uniform> params: SearchParams;
@group(0) @binding(1) var<storage, read> fqueries: array<f32>;
@group(0) @binding(3) var<storage, read_write> ws: array<u32>;

// Ascending in the score's descending order: flip the order-preserving map of f32 to u32.
fn descending_key(s: f32) -> u32 {
    let b = bitcast<u32>(s);
    let ordered = select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
    return ~ordered;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let q = wid.y;
    let j = gid.x;
    if (j >= params.k || q >= params.n_queries) {
        return;
    }
    let o = params.off_out + (q * params.seg + j) * 2u;
    let id = ws[o + 1u];
    if (id < params.shard_first || id - params.shard_first >= params.shard_rows) {
        return;
    }
    let base = (id - params.shard_first) * params.table_row_words;
    let rp = row_params(base, params.table_code_words);
    let qb = q * params.dim;
    var s = 0.0;
    for (var c = 0u; c < params.dim; c++) {
        s += fqueries[qb + c] * decode1(base, c, rp);
    }
    ws[o] = descending_key(s);
}
