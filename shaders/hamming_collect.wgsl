// hamming_collect: writes each query's k nearest rows as (distance, row) pairs: every row below
// the threshold (in any order, through an atomic counter) and the lowest-indexed rows at it (in
// row order: the chunk's prefix from hamming_scan plus the rank inside the chunk).
// Bindings: 0–2 as hamming_common.wgsl, 3 ws (the search workspace, atomic).

@group(0) @binding(3) var<storage, read_write> ws: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let q = wid.z;
    let chunk = chunk_of(wid, nwg);
    let s = params.off_sel + q * 4u;
    let t = atomicLoad(&ws[s]);
    let less = atomicLoad(&ws[s + 1u]);
    let need = atomicLoad(&ws[s + 2u]);
    let first = chunk * CHUNK + lid.x * 4u;
    var d = array<u32, 4>(NONE, NONE, NONE, NONE);
    var mine = 0u;
    for (var j = 0u; j < 4u; j++) {
        if (first + j < params.shard_rows) {
            d[j] = distance(q, first + j);
            if (d[j] == t) {
                mine += 1u;
            }
        }
    }
    let before = exclusive_prefix(lid.x, mine);
    if (chunk * CHUNK >= params.shard_rows) {
        return;
    }
    var rank = atomicLoad(&ws[params.off_ties + q * params.chunks + params.chunk_base + chunk]) + before;
    for (var j = 0u; j < 4u; j++) {
        var slot = NONE;
        if (d[j] < t) {
            slot = atomicAdd(&ws[s + 3u], 1u);
        } else if (d[j] == t) {
            if (rank < need) {
                slot = less + rank;
            }
            rank += 1u;
        }
        if (slot != NONE) {
            let o = params.off_out + (q * params.seg + slot) * 2u;
            atomicStore(&ws[o], d[j]);
            atomicStore(&ws[o + 1u], params.shard_first + first + j);
        }
    }
}
