// gather_rows16: gather_rows4 for rows whose decoder reads sixteen values a load (decode16, from
// the format's decode_<format>_16.wgsl): every dim a multiple of 16, rows starting on 16-byte
// boundaries (row_words a multiple of 4). Each step of an invocation decodes sixteen values and
// writes their four quads; the WG_X invocations of an id take neighbouring sixteens, so a row's
// loads, and its stores, are contiguous. Values are the format's decode4's, bit for bit.
// Bindings: 0 params, 1 ids, 2 shard (as vec4<u32>, gather_shard4.wgsl), 3 out (vec4<f32>,
// n_ids × dim / 4).

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
        for (var k = 4u * lid.x; k < quads; k += 4u * WG_X) {
            out[o + k] = vec4<f32>(0.0);
            out[o + k + 1u] = vec4<f32>(0.0);
            out[o + k + 2u] = vec4<f32>(0.0);
            out[o + k + 3u] = vec4<f32>(0.0);
        }
        return;
    }
    let base = row * params.row_words;
    let rp = row_params(base, params.code_words);
    for (var k = lid.x; k < quads / 4u; k += WG_X) {
        let v = decode16(base, 16u * k, rp);
        let q = o + 4u * k;
        out[q] = v.a;
        out[q + 1u] = v.b;
        out[q + 2u] = v.c;
        out[q + 3u] = v.d;
    }
}
