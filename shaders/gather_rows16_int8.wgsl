// gather_rows16_int8: gather_rows4 for INT8 rows aligned to 16 bytes (row_words a multiple of 4,
// PackedTable::with_row_alignment) of a dim that is a multiple of 16: each step of an invocation
// reads sixteen codes with one 16-byte load and writes their four quads. The shard is bound as
// array<vec4<u32>> (`shard4`, the binding gather_driver.wgsl's `shard` names as u32 words, which
// this entry point does not use); the row's scale and bias are the first two words of the vec4
// after its codes (code_words = dim / 4, a multiple of 4). The WG_X invocations of an id take
// neighbouring vec4s, so a row's loads, and its stores, are contiguous. Values are decode_int8's,
// code · scale + bias, bit for bit.
// Bindings: 0 params, 1 ids, 2 shard (as vec4<u32>), 3 out (vec4<f32>, n_ids × dim / 4).

override WG_X: u32 = 32u;
override WG_Y: u32 = 8u;

@group(0) @binding(2) var<storage, read> shard4: array<vec4<u32>>;
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
        for (var k = 4u * lid.x; k < quads; k += 4u * WG_X) {
            out[o + k] = vec4<f32>(0.0);
            out[o + k + 1u] = vec4<f32>(0.0);
            out[o + k + 2u] = vec4<f32>(0.0);
            out[o + k + 3u] = vec4<f32>(0.0);
        }
        return;
    }
    let base = row * (params.row_words / 4u);
    let sb = bitcast<vec2<f32>>(shard4[base + params.code_words / 4u].xy);
    for (var k = lid.x; k < quads / 4u; k += WG_X) {
        let w = shard4[base + k];
        let q = o + 4u * k;
        out[q] = vec4<f32>(unpack4xU8(w.x)) * sb.x + sb.y;
        out[q + 1u] = vec4<f32>(unpack4xU8(w.y)) * sb.x + sb.y;
        out[q + 2u] = vec4<f32>(unpack4xU8(w.z)) * sb.x + sb.y;
        out[q + 3u] = vec4<f32>(unpack4xU8(w.w)) * sb.x + sb.y;
    }
}
