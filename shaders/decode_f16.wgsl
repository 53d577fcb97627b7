// decode_f16: FP16 rows, two halves per word, element 2k in the low half of word k (row_words =
// ceil(dim / 2), or more for rows aligned on the GPU). Decoded with unpack2x16float, which is
// exact: no shader-f16 feature needed. Helpers for a driver, whose
// helpers define word(p), the shard's u32 word p.

// No parameters.
alias RowParams = u32;

fn row_params(base: u32, code_words: u32) -> RowParams {
    return 0u;
}

fn decode1(base: u32, c: u32, rp: RowParams) -> f32 {
    let pair = unpack2x16float(word(base + c / 2u));
    return select(pair.x, pair.y, (c & 1u) == 1u);
}

fn decode4(base: u32, c: u32, rp: RowParams) -> vec4<f32> {
    let p = base + c / 2u;
    return vec4<f32>(unpack2x16float(word(p)), unpack2x16float(word(p + 1u)));
}
