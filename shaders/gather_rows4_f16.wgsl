// gather_rows4_f16: gather_rows_f16 for dim a multiple of 4 — four values (decode4) rounded to
// f16 and written as one vec2<u32> per invocation step, as gather_rows4 writes one vec4<f32>.
// Bindings: as gather_rows, but 3 out (vec2<u32>, n_ids × dim / 4: f16 pairs, two a vec2).

override WG_X: u32 = 32u;
override WG_Y: u32 = 8u;

@group(0) @binding(3) var<storage, read_write> out: array<vec2<u32>>;

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
            out[o + k] = vec2<u32>(0u);
        }
        return;
    }
    let base = row * params.row_words;
    let rp = row_params(base, params.code_words);
    for (var k = lid.x; k < quads; k += WG_X) {
        let v = decode4(base, 4u * k, rp);
        out[o + k] = vec2<u32>(pack_f16(v.x, v.y), pack_f16(v.z, v.w));
    }
}
