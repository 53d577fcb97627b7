// decode_f32: FP32 rows, one value per word (row_words = dim, or more for rows aligned on the GPU).
// Helpers for a driver, whose helpers define word(p), the shard's u32 word p; no bindings or
// entry point here.

// No parameters.
alias RowParams = u32;

fn row_params(base: u32, code_words: u32) -> RowParams {
    return 0u;
}

fn decode1(base: u32, c: u32, rp: RowParams) -> f32 {
    return bitcast<f32>(word(base + c));
}

fn decode4(base: u32, c: u32, rp: RowParams) -> vec4<f32> {
    let p = base + c;
    return bitcast<vec4<f32>>(vec4<u32>(word(p), word(p + 1u), word(p + 2u), word(p + 3u)));
}
