// gather_rows_f16: gather_rows writing f16 rows — two values per u32 word (the first in the low
// half), ⌈dim / 2⌉ words a row, the last word's high half 0 for an odd dim — rounded to nearest
// even (f16_common.wgsl), so half the bytes of an f32 gather are written. The decode_<format>.wgsl
// before it supplies row_params(base, code_words) and decode1(base, c, row_params).
// Bindings: as gather_rows, but 3 out (u32, n_ids × ⌈dim / 2⌉ words of f16 pairs).

alias Out = u32;
const UNIT_VALUES: u32 = 2u; // a word of two f16s
const STEP_UNITS: u32 = 1u;

@group(0) @binding(3) var<storage, read_write> out: array<Out>;

// Values 2s and 2s + 1 (0 past an odd dim) as one word of f16s.
fn write_step(o: u32, base: u32, s: u32, rp: RowParams) {
    let c = 2u * s;
    var hi = 0.0;
    if (c + 1u < params.dim) {
        hi = decode1(base, c + 1u, rp);
    }
    out[o] = pack_f16(decode1(base, c, rp), hi);
}

@compute @workgroup_size(WG_X, WG_Y)
fn main(at: Invocation) {
    gather(at);
}
