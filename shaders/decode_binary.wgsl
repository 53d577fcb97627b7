// decode_binary: binary rows: code_words words of sign bits in numpy.packbits order (element 32k+j
// is bit 7 − (j mod 8) of byte j / 8 of word k), then, when SCALED, one f32 scale (row_words =
// code_words + SCALED, or more for rows aligned on the GPU). Value = +s for a set bit, −s
// otherwise, with s = 1 or the row's scale. Helpers for a driver, whose
// helpers define word(p), the shard's u32 word p.

override SCALED: bool = false;

alias RowParams = vec2<f32>;

// (s, unused): the magnitude every value of the row decodes to.
fn row_params(base: u32, code_words: u32) -> RowParams {
    if (SCALED) {
        return vec2<f32>(bitcast<f32>(word(base + code_words)), 0.0);
    }
    return vec2<f32>(1.0, 0.0);
}

// Bit position of column c within its word (MSB-first inside each byte).
fn bit_of(c: u32) -> u32 {
    let j = c & 31u;
    return (j & 24u) + 7u - (j & 7u);
}

fn decode1(base: u32, c: u32, rp: RowParams) -> f32 {
    let s = rp.x;
    return select(-s, s, extractBits(word(base + c / 32u), bit_of(c), 1u) == 1u);
}

fn decode4(base: u32, c: u32, rp: RowParams) -> vec4<f32> {
    let s = rp.x;
    // c is a multiple of 4, so its four bits are bit_of(c), bit_of(c) − 1, − 2 and − 3.
    let w = word(base + c / 32u) >> (bit_of(c) - 3u);
    let bits = vec4<u32>(w >> 3u, w >> 2u, w >> 1u, w) & vec4<u32>(1u);
    return select(vec4<f32>(-s), vec4<f32>(s), bits == vec4<u32>(1u));
}
