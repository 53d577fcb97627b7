// gather_rows8_f16: gather_rows4 for FP16 rows of a dim that is a multiple of 8: each step of an
// invocation reads eight halves with one 16-byte load and writes their two quads. A row is
// dim / 2 words, a multiple of 4 (or more where rows are aligned on the GPU, row_words still a
// multiple of 4), so every row starts on a 16-byte boundary. The shard is bound as
// 16-byte words (gather_shard4.wgsl). The WG_X invocations of an id take neighbouring vec4s, so a
// row's loads, and its stores, are contiguous. Values are decode_f16's (unpack2x16float, exact).
// Bindings: 0 params, 1 ids, 2 shard (as vec4<u32>), 3 out (vec4<f32>, n_ids × dim / 4).

alias Out = vec4<f32>;
const UNIT_VALUES: u32 = 4u;
const STEP_UNITS: u32 = 2u;

@group(0) @binding(3) var<storage, read_write> out: array<Out>;

// Values 8s .. 8s + 8 of the row at word base (a multiple of 4): one 16-byte load, two quads.
fn write_step(o: u32, base: u32, s: u32, rp: RowParams) {
    let w = quad(base / 4u + s);
    out[o] = vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
    out[o + 1u] = vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w));
}

@compute @workgroup_size(WG_X, WG_Y)
fn main(at: Invocation) {
    gather(at);
}
