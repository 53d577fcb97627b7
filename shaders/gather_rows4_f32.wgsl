// gather_rows4_f32: gather_rows4 for FP32 rows, each quad of a row read with one 16-byte load.
// The shard is bound as 16-byte words (gather_shard4.wgsl): an FP32 row is `dim` words, dim a
// multiple of 4 (row_words, more where rows are aligned, is one too), so every row starts on a
// 16-byte boundary. The WG_X invocations of an id take
// neighbouring quads, so their loads and stores are contiguous. No decoder: FP32 needs none (no_row_params.wgsl).
// Bindings: 0 params, 1 ids, 2 shard (as vec4<u32>), 3 out (vec4<f32>, n_ids × dim / 4).

alias Out = vec4<f32>;
const UNIT_VALUES: u32 = 4u;
const STEP_UNITS: u32 = 1u;

@group(0) @binding(3) var<storage, read_write> out: array<Out>;

// Quad s of the row at word base (dim words, or more for aligned rows: a multiple of 4).
fn write_step(o: u32, base: u32, s: u32, rp: RowParams) {
    out[o] = bitcast<vec4<f32>>(quad(base / 4u + s));
}

@compute @workgroup_size(WG_X, WG_Y)
fn main(at: Invocation) {
    gather(at);
}
