// no_row_params: row_params for the kernels that read rows needing no parameters with no decoder
// (FP32's and FP16's 16-byte gathers, which unpack their rows themselves).

alias RowParams = u32;

fn row_params(base: u32, code_words: u32) -> RowParams {
    return 0u;
}
