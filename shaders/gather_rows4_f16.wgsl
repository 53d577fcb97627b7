// gather_rows4_f16: gather_rows_f16 for dim a multiple of 4 — four values (decode4) rounded to
// f16 and written as one vec2<u32> per invocation step, as gather_rows4 writes one vec4<f32>.
// Bindings: as gather_rows, but 3 out (vec2<u32>, n_ids × dim / 4: f16 pairs, two a vec2).

alias Out = vec2<u32>;
const UNIT_VALUES: u32 = 4u;
const STEP_UNITS: u32 = 1u;

@group(0) @binding(3) var<storage, read_write> out: array<Out>;

fn write_step(o: u32, base: u32, s: u32, rp: RowParams) {
    let v = decode4(base, 4u * s, rp);
    out[o] = vec2<u32>(pack_f16(v.x, v.y), pack_f16(v.z, v.w));
}

@compute @workgroup_size(WG_X, WG_Y)
fn main(at: Invocation) {
    gather(at);
}
