// gather_rows4_f32: gather_rows4 for FP32 rows, each quad of a row read with one 16-byte load.
// The shard is bound as 16-byte words (gather_shard4.wgsl): an FP32 row is `dim` words, dim a
// multiple of 4 (row_words, more where rows are aligned, is one too), so every row starts on a
// 16-byte boundary. The WG_X invocations of an id take
// neighbouring quads, so their loads and stores are contiguous. No decoder: FP32 needs none.
// Bindings: 0 params, 1 ids, 2 shard (as vec4<u32>), 3 out (vec4<f32>, n_ids × dim / 4).

override WG_X: u32 = 32u;
override WG_Y: u32 = 8u;

@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(WG_X, WG_Y)
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let ir = output_and_row(lid, wid, nwg);
    let i = ir.x;
    let row = ir.y;
    if (row == ROW_SKIP) {
        return;
    }
    let quads = params.dim / 4u;
    let o = i * quads;
    if (row == ROW_ZERO) {
        for (var k = lid.x; k < quads; k += WG_X) {
            out[o + k] = vec4<f32>(0.0);
        }
        return;
    }
    let base = row * (params.row_words / 4u); // dim words, or more for aligned rows: a multiple of 4
    for (var k = lid.x; k < quads; k += WG_X) {
        out[o + k] = bitcast<vec4<f32>>(quad(base + k));
    }
}
