// hamming_hist: counts the rows of one chunk at each distance from one query, in workgroup
// memory, then adds the counts to the query's histogram.
// Bindings: 0–2 as hamming_common.wgsl, 3 ws (the search workspace, atomic).

@group(0) @binding(3) var<storage, read_write> ws: array<atomic<u32>>;

var<workgroup> hist: array<atomic<u32>, 4096>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let q = wid.z;
    let first = chunk_of(wid, nwg) * CHUNK + lid.x * 4u;
    for (var b = lid.x; b < params.bins; b += 256u) {
        atomicStore(&hist[b], 0u);
    }
    workgroupBarrier();
    for (var j = 0u; j < 4u; j++) {
        let r = first + j;
        if (r < params.shard_rows) {
            atomicAdd(&hist[distance(q, r)], 1u);
        }
    }
    workgroupBarrier();
    for (var b = lid.x; b < params.bins; b += 256u) {
        let n = atomicLoad(&hist[b]);
        if (n > 0u) {
            atomicAdd(&ws[params.off_hist + q * params.bins + b], n);
        }
    }
}
