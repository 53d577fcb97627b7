// decode_int4: INT4 row-wise rows: code_words words of eight 4-bit codes (element 8k+j at bits
// 4j..4j+3 of word k — FBGEMM's low-nibble-first order), then one word holding the fp16 scale (low
// half) and fp16 bias (high half) (row_words = code_words + 1, or more for rows aligned on the GPU)
// — FBGEMM's fused 4-bit row. Value = code * scale + bias; a 4-bit code times an fp16 scale is
// exact in f32, so fused or not the result is the CPU oracle's. Helpers for a driver, whose
// helpers define word(p), the shard's u32 word p.

alias RowParams = vec2<f32>;

// (scale, bias) of the row, from their fp16 halves.
fn row_params(base: u32, code_words: u32) -> RowParams {
    return unpack2x16float(word(base + code_words));
}

fn decode1(base: u32, c: u32, sb: RowParams) -> f32 {
    let q = f32(extractBits(word(base + c / 8u), 4u * (c & 7u), 4u));
    return q * sb.x + sb.y;
}

fn decode4(base: u32, c: u32, sb: RowParams) -> vec4<f32> {
    let w = word(base + c / 8u) >> (4u * (c & 7u));
    let q = vec4<f32>(vec4<u32>(w, w >> 4u, w >> 8u, w >> 12u) & vec4<u32>(15u));
    return q * sb.x + sb.y;
}
