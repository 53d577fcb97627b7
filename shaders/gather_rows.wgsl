// gather_rows: out[i, :] = decode(table[ids[i], :]) for any dim, one output value per invocation
// step. The decode_<format>.wgsl before it supplies row_params(base, code_words) (read once per
// row) and decode1(base, c, row_params).
// Bindings: 0 params (uniform GatherParams), 1 ids (u32, or (output row, id) pairs when listed),
// 2 shard (the packed rows of one shard, row_words words each), 3 out (f32, n_ids × dim, dense;
// each row written whole by the dispatch of the shard that holds it, or as zeros by shard 0's
// for a bad id under POLICY_ZERO).

alias Out = f32;
const UNIT_VALUES: u32 = 1u;
const STEP_UNITS: u32 = 1u;

@group(0) @binding(3) var<storage, read_write> out: array<Out>;

fn write_step(o: u32, base: u32, s: u32, rp: RowParams) {
    out[o] = decode1(base, s, rp);
}

@compute @workgroup_size(WG_X, WG_Y)
fn main(at: Invocation) {
    gather(at);
}
