// hamming_scan: one workgroup per query turns its per-chunk tie counts into exclusive prefix
// sums: the rank, among the rows at the threshold, of each chunk's first such row.
// Bindings: 0–2 as hamming_common.wgsl, 3 ws (the search workspace).

@group(0) @binding(3) var<storage, read_write> ws: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let q = chunk_of(wid, nwg);
    let base = params.off_ties + q * params.chunks;
    let per = (params.chunks + 255u) / 256u;
    let start = min(lid.x * per, params.chunks);
    let end = min(start + per, params.chunks);
    var s = 0u;
    if (q < params.n_queries) {
        for (var i = start; i < end; i++) {
            s += ws[base + i];
        }
    }
    let before = exclusive_prefix(lid.x, s);
    if (q < params.n_queries) {
        var acc = before;
        for (var i = start; i < end; i++) {
            let v = ws[base + i];
            ws[base + i] = acc;
            acc += v;
        }
    }
}
