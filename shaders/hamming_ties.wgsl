// hamming_ties: rows of one chunk at the threshold distance of one query.
// Bindings: 0–2 as hamming_common.wgsl, 3 ws (the search workspace).

@group(0) @binding(3) var<storage, read_write> ws: array<u32>;

var<workgroup> count: atomic<u32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let q = wid.z;
    let chunk = chunk_of(wid, nwg);
    if (lid.x == 0u) {
        atomicStore(&count, 0u);
    }
    workgroupBarrier();
    let t = ws[params.off_sel + q * 4u];
    let first = chunk * CHUNK + lid.x * 4u;
    var n = 0u;
    for (var j = 0u; j < 4u; j++) {
        let r = first + j;
        if (r < params.shard_rows && distance(q, r) == t) {
            n += 1u;
        }
    }
    if (n > 0u) {
        atomicAdd(&count, n);
    }
    workgroupBarrier();
    // Grid padding past the shard's chunks writes nothing (that slot is another shard's).
    if (lid.x == 0u && chunk * CHUNK < params.shard_rows) {
        ws[params.off_ties + q * params.chunks + params.chunk_base + chunk] = atomicLoad(&count);
    }
}
