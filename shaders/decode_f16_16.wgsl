// decode_f16_16: decode16 for FP16 rows read eight halves a load, after decode_f16.wgsl, in the
// kernels that bind the shard as 16-byte words (bag_shard4.wgsl) — every dim a multiple of 16, so
// a row is dim / 2 words, a multiple of 4 (or more, a multiple of 4 still, where rows are aligned
// on the GPU), and values c .. c + 16 (c a multiple of 16) are two 16-byte words. No alignment
// needed. Values are decode4's (unpack2x16float, exact).

fn decode16(base: u32, c: u32, rp: RowParams) -> Quads {
    let v = (base + c / 2u) / 4u;
    let a = quad(v);
    let b = quad(v + 1u);
    return Quads(
        vec4<f32>(unpack2x16float(a.x), unpack2x16float(a.y)),
        vec4<f32>(unpack2x16float(a.z), unpack2x16float(a.w)),
        vec4<f32>(unpack2x16float(b.x), unpack2x16float(b.y)),
        vec4<f32>(unpack2x16float(b.z), unpack2x16float(b.w)),
    );
}
