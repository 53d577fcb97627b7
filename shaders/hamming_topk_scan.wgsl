// hamming_topk_scan: the one pass over the codes. A workgroup takes a tile of queries (staged in
// workgroup memory) and a block of 1024 consecutive rows of one shard; each invocation reads four
// rows (consecutive invocations, consecutive rows), each code word once for every query of the
// tile, and the block's k nearest per query are kept (topk_common.wgsl) in the query's list at
// the block's place. Grid: x·y over the shard's blocks, z over query tiles.
// Bindings: as topk_common.wgsl: 0 params, 1 the query codes, 2 one shard of corpus codes, 3 ws.

const MAX_TILE: u32 = 8u;
const QTILE_WORDS: u32 = 896u;

var<workgroup> qtile: array<u32, 896>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let block = block_of(wid, nwg);
    let q0 = wid.z * params.tile;
    let nt = min(params.tile, params.n_queries - q0);
    let cw = params.code_words;
    for (var i = lid.x; i < nt * cw; i += 256u) {
        qtile[i] = queries[(q0 + i / cw) * params.query_row_words + i % cw];
    }
    workgroupBarrier();
    // Grid padding past the shard's blocks (a whole workgroup) writes nothing: that place in the
    // lists is another shard's.
    if (block * BLOCK >= params.shard_rows) {
        return;
    }
    var d: array<u32, 32>; // d[j·8 + qi]: row j of this invocation, query qi of the tile
    var row: array<u32, 4>;
    for (var j = 0u; j < 4u; j++) {
        let r = block * BLOCK + j * 256u + lid.x;
        row[j] = params.shard_first + r;
        var acc = array<u32, 8>(0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u);
        if (r < params.shard_rows) {
            let rb = r * params.corpus_row_words;
            for (var w = 0u; w < cw; w++) {
                let x = shard[rb + w];
                for (var qi = 0u; qi < MAX_TILE; qi++) {
                    if (qi < nt) {
                        acc[qi] += countOneBits(x ^ qtile[qi * cw + w]);
                    }
                }
            }
        }
        for (var qi = 0u; qi < MAX_TILE; qi++) {
            d[j * 8u + qi] = select(NONE, acc[qi], r < params.shard_rows);
        }
    }
    for (var qi = 0u; qi < nt; qi++) {
        let dq = array<u32, 4>(d[qi], d[8u + qi], d[16u + qi], d[24u + qi]);
        let out = params.off_out + ((q0 + qi) * params.out_stride + (params.block_base + block) * params.k) * 2u;
        keep_nearest(lid.x, dq, row, out);
    }
}
