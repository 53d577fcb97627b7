// decode_f32_bag4: FP32 rows for bag.wgsl with VEC4 (every table's dim a multiple of 4), each quad
// of a row read with one 16-byte load. The shard is bound as 16-byte words (bag_shard4.wgsl,
// which defines quad() and word()): tables are
// concatenated whole rows of dim words (or more, aligned), dim a multiple of 4, and shards hold
// whole rows, so every row starts on a 16-byte boundary of its shard. Helpers for the bag driver,
// as the other decode_<format>.wgsl files; no entry point.

// No parameters.
alias RowParams = u32;

fn row_params(base: u32, code_words: u32) -> RowParams {
    return 0u;
}

// One value (POOL_NONE's rows, and bag.wgsl's one-column path, which VEC4 never takes): a lane of
// the quad that holds it.
fn decode1(base: u32, c: u32, rp: RowParams) -> f32 {
    return bitcast<f32>(word(base + c));
}

// Values c .. c + 4 (c a multiple of 4): one 16-byte load.
fn decode4(base: u32, c: u32, rp: RowParams) -> vec4<f32> {
    return bitcast<vec4<f32>>(quad((base + c) / 4u));
}
