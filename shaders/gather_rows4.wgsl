// gather_rows4: out[i, :] = decode(table[ids[i], :]) for dim a multiple of 4, four output values
// (one vec4 store) per invocation step — a quarter of the stores of gather_rows, which matters
// most where stores are expensive (lavapipe runs each store one lane at a time). The
// decode_<format>.wgsl before it supplies row_params(base, code_words) (read once per row) and
// decode4(base, c, row_params) for c a multiple of 4.
// Bindings: 0 params (uniform GatherParams), 1 ids (u32, or (output row, id) pairs when listed),
// 2 shard (the packed rows of one shard, row_words words each), 3 out (vec4<f32>, n_ids × dim / 4,
// dense; each row written whole by the dispatch of the shard that holds it, or as zeros by
// shard 0's for a bad id under POLICY_ZERO).

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
    let base = row * params.row_words;
    let rp = row_params(base, params.code_words);
    for (var k = lid.x; k < quads; k += WG_X) {
        out[o + k] = decode4(base, 4u * k, rp);
    }
}
