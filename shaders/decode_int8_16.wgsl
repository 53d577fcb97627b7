// decode_int8_16: decode16 for INT8 rows read sixteen codes a load, after decode_int8.wgsl, in
// the kernels that bind the shard as 16-byte words (gather_shard4.wgsl, bag_shard4.wgsl) — rows
// aligned to 16 bytes (row_words a multiple of 4, PackedTable::with_row_alignment), every dim a
// multiple of 16, so the codes of values c .. c + 16 (c a multiple of 16) are one 16-byte word.
// Values are decode4's, code · scale + bias, bit for bit.

fn decode16(base: u32, c: u32, sb: RowParams) -> Quads {
    let w = quad((base + c / 4u) / 4u);
    return Quads(
        vec4<f32>(unpack4xU8(w.x)) * sb.x + sb.y,
        vec4<f32>(unpack4xU8(w.y)) * sb.x + sb.y,
        vec4<f32>(unpack4xU8(w.z)) * sb.x + sb.y,
        vec4<f32>(unpack4xU8(w.w)) * sb.x + sb.y,
    );
}
