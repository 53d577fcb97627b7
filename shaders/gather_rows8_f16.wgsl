// gather_rows8_f16: gather_rows4 for FP16 rows of a dim that is a multiple of 8: each step of an
// invocation reads eight halves with one 16-byte load and writes their two quads. A row is
// dim / 2 words, a multiple of 4 (or more where rows are aligned on the GPU, row_words still a
// multiple of 4), so every row starts on a 16-byte boundary. The shard is bound as
// 16-byte words (gather_shard4.wgsl). The WG_X invocations of an id take neighbouring vec4s, so a
// row's loads, and its stores, are contiguous. Values are decode_f16's (unpack2x16float, exact).
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
        for (var k = 2u * lid.x; k < quads; k += 2u * WG_X) {
            out[o + k] = vec4<f32>(0.0);
            out[o + k + 1u] = vec4<f32>(0.0);
        }
        return;
    }
    let base = row * (params.row_words / 4u);
    for (var k = lid.x; k < quads / 2u; k += WG_X) {
        let w = quad(base + k);
        out[o + 2u * k] = vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
        out[o + 2u * k + 1u] = vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w));
    }
}
