// sort_pairs: one workgroup per query sorts its output segment of (key, row) pairs by key, then
// row, ascending: a bitonic sort in the workspace itself (any power-of-two segment length).
// Bindings: 0 params, 3 ws (the search workspace); 1 and 2 are bound but unused.

@group(0) @binding(0) var<uniform> params: SearchParams;
@group(0) @binding(3) var<storage, read_write> ws: array<u32>;

fn after(a: u32, b: u32) -> bool {
    let ka = ws[a];
    let kb = ws[b];
    return ka > kb || (ka == kb && ws[a + 1u] > ws[b + 1u]);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let q = chunk_of(wid, nwg);
    let live = q < params.n_queries;
    let base = params.off_out + q * params.seg * 2u;
    for (var size = 2u; size <= params.seg; size <<= 1u) {
        for (var stride = size >> 1u; stride > 0u; stride >>= 1u) {
            if (live) {
                for (var i = lid.x; i < params.seg / 2u; i += 256u) {
                    let a = 2u * stride * (i / stride) + i % stride;
                    let b = a + stride;
                    let up = (a & size) == 0u;
                    let pa = base + 2u * a;
                    let pb = base + 2u * b;
                    if (after(pa, pb) == up) {
                        let k = ws[pa];
                        let r = ws[pa + 1u];
                        ws[pa] = ws[pb];
                        ws[pa + 1u] = ws[pb + 1u];
                        ws[pb] = k;
                        ws[pb + 1u] = r;
                    }
                }
            }
            storageBarrier();
            workgroupBarrier();
        }
    }
}
