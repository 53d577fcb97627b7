// hamming_select: one invocation per query reads its histogram: the k-th smallest distance t,
// the rows below it, and how many rows at t to keep; pads the query's output segment.
// Bindings: 0–2 as hamming_common.wgsl, 3 ws (the search workspace).

@group(0) @binding(3) var<storage, read_write> ws: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let q = gid.x;
    if (q >= params.n_queries) {
        return;
    }
    var below = 0u;
    var t = 0u;
    for (var d = 0u; d < params.bins; d++) {
        let c = ws[params.off_hist + q * params.bins + d];
        if (below + c >= params.k) {
            t = d;
            break;
        }
        below += c;
    }
    let s = params.off_sel + q * 4u;
    ws[s] = t;
    ws[s + 1u] = below;
    ws[s + 2u] = params.k - below;
    ws[s + 3u] = 0u;
    for (var j = params.k; j < params.seg; j++) {
        let o = params.off_out + (q * params.seg + j) * 2u;
        ws[o] = NONE;
        ws[o + 1u] = NONE;
    }
}
