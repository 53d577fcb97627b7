// gather_rows4: out[i, :] = decode(table[ids[i], :]) for dim a multiple of 4, four output values
// (one vec4 store) per invocation step — a quarter of the stores of gather_rows, which matters
// most where stores are expensive (lavapipe runs each store one lane at a time). The
// decode_<format>.wgsl before it supplies row_params(base, code_words) (read once per row) and
// decode4(base, c, row_params) for c a multiple of 4.
// Bindings: 0 params (uniform GatherParams), 1 ids (u32, or (output row, id) pairs when listed),
// 2 shard (the packed rows of one shard, row_words words each), 3 out (vec4<f32>, n_ids × dim / 4,
// dense; each row written whole by the dispatch of the shard that holds it, or as zeros by
// shard 0's for a bad id under POLICY_ZERO).

alias Out = vec4<f32>;
const UNIT_VALUES: u32 = 4u;
const STEP_UNITS: u32 = 1u;

@group(0) @binding(3) var<storage, read_write> out: array<Out>;

fn write_step(o: u32, base: u32, s: u32, rp: RowParams) {
    out[o] = decode4(base, 4u * s, rp);
}

@compute @workgroup_size(WG_X, WG_Y)
fn main(at: Invocation) {
    gather(at);
}
