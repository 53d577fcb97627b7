// decode_q8_0_16: decode16 for ggml's q8_0 (decode_blocks.wgsl with BITS = 8) read sixteen codes
// a load, after decode_blocks.wgsl, in the kernels that bind the shard as 16-byte words
// (gather_shard4.wgsl, bag_shard4.wgsl) — rows aligned to 16 bytes (row_words a multiple of 4,
// PackedTable::with_row_alignment, or packed rows that are whole vec4s: dims 224 + 256k and
// multiples of 256; a row's codes are 8 words a block of 32, a short last block's as far as its
// values reach), every dim a multiple of 16, so the codes of values c .. c + 16 (c a multiple of 16) are one 16-byte
// word, all of block c / 32.
// Values are decode4's, (code − OFFSET) · d, bit for bit (q8_0 has no MIN).

fn decode16(base: u32, c: u32, p: RowParams) -> Quads {
    let dm = block_params(p, c / 32u);
    let w = quad((base + c / 4u) / 4u);
    return Quads(
        (vec4<f32>(unpack4xU8(w.x)) - OFFSET) * dm.x,
        (vec4<f32>(unpack4xU8(w.y)) - OFFSET) * dm.x,
        (vec4<f32>(unpack4xU8(w.z)) - OFFSET) * dm.x,
        (vec4<f32>(unpack4xU8(w.w)) - OFFSET) * dm.x,
    );
}
