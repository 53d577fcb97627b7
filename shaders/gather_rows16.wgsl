// gather_rows16: gather_rows4 for rows whose decoder reads sixteen values a load (decode16, from
// the format's decode_<format>_16.wgsl): every dim a multiple of 16, rows starting on 16-byte
// boundaries (row_words a multiple of 4). Each step of an invocation decodes sixteen values and
// writes their four quads; the WG_X invocations of an id take neighbouring sixteens, so a row's
// loads, and its stores, are contiguous. Values are the format's decode4's, bit for bit.
// Bindings: 0 params, 1 ids, 2 shard (as vec4<u32>, gather_shard4.wgsl), 3 out (vec4<f32>,
// n_ids × dim / 4).

alias Out = vec4<f32>;
const UNIT_VALUES: u32 = 4u;
const STEP_UNITS: u32 = 4u;

@group(0) @binding(3) var<storage, read_write> out: array<Out>;

// Values 16s .. 16s + 16: the decoder's decode16, four quads.
fn write_step(o: u32, base: u32, s: u32, rp: RowParams) {
    let v = decode16(base, 16u * s, rp);
    out[o] = v.a;
    out[o + 1u] = v.b;
    out[o + 2u] = v.c;
    out[o + 3u] = v.d;
}

@compute @workgroup_size(WG_X, WG_Y)
fn main(at: Invocation) {
    gather(at);
}
