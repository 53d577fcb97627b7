// hamming_topk_merge: the k nearest of each group of 1024 entries of a query's list (the blocks'
// kept pairs, in row order), kept again (topk_common.wgsl): lists shrink by 1024/k a level until
// one group is left, whose k are the query's. Grid: x·y over the groups, z over queries.
// Bindings: as topk_common.wgsl: 0 params, 3 ws (1 and 2 are bound but unused).

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = block_of(wid, nwg);
    let q = wid.z;
    if (g * BLOCK >= params.in_len) {
        return;
    }
    var d = vec4<u32>(NONE);
    var row = vec4<u32>(NONE);
    for (var j = 0u; j < 4u; j++) {
        let p = g * BLOCK + j * 256u + lid.x;
        if (p < params.in_len) {
            let a = params.off_in + (q * params.in_len + p) * 2u;
            d[j] = ws[a];
            row[j] = ws[a + 1u];
        }
    }
    hist_clear(lid.x, 1u);
    hist_add(0u, d);
    pick_thresholds(lid.x, 1u);
    count_flags(lid.x, 1u, flags_of(0u, d), 0u);
    keep_nearest(lid.x, 0u, d, row, params.off_out + (q * params.out_stride + g * params.k) * 2u);
}
