// decode_fp8_16: decode16 for FP8 rows (fp8_e4m3, fp8_e5m2) read sixteen codes a load, after
// decode_fp8.wgsl, in the kernels that bind the shard as 16-byte words (gather_shard4.wgsl,
// bag_shard4.wgsl) — rows aligned to 16 bytes (row_words a multiple of 4,
// PackedTable::with_row_alignment), every dim a multiple of 16, so the codes of values c .. c + 16
// (c a multiple of 16) are one 16-byte word. Values are decode4's, fp8(code) · scale, bit for bit.

fn fp8x4(w: u32, scale: f32) -> vec4<f32> {
    return vec4<f32>(fp8(w & 0xffu), fp8((w >> 8u) & 0xffu), fp8((w >> 16u) & 0xffu), fp8(w >> 24u)) * scale;
}

fn decode16(base: u32, c: u32, scale: RowParams) -> Quads {
    let w = quad((base + c / 4u) / 4u);
    return Quads(fp8x4(w.x, scale), fp8x4(w.y, scale), fp8x4(w.z, scale), fp8x4(w.w, scale));
}
