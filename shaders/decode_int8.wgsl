// decode_int8: INT8 row-wise rows: code_words words of four u8 codes (element 4k+j in byte j of
// word k), then the f32 scale and the f32 bias (row_words = code_words + 2, or more for rows
// aligned on the GPU) — FBGEMM's fused 8-bit row. Value = code * scale + bias. edo's scales have 16
// significant bits, so code * scale is exact and the add is the one rounding: the result is the CPU
// oracle's bit for bit whether or not the driver fuses the multiply-add. Helpers for a driver,
// whose helpers define word(p), the shard's u32 word p.

alias RowParams = vec2<f32>;

// (scale, bias) of the row.
fn row_params(base: u32, code_words: u32) -> RowParams {
    return bitcast<vec2<f32>>(vec2<u32>(word(base + code_words), word(base + code_words + 1u)));
}

fn decode1(base: u32, c: u32, sb: RowParams) -> f32 {
    let q = f32(extractBits(word(base + c / 4u), 8u * (c & 3u), 8u));
    return q * sb.x + sb.y;
}

fn decode4(base: u32, c: u32, sb: RowParams) -> vec4<f32> {
    let q = vec4<f32>(unpack4xU8(word(base + c / 4u)));
    return q * sb.x + sb.y;
}
