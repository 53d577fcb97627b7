// decode_f32_bag4: FP32 rows for bag.wgsl with VEC4 (every table's dim a multiple of 4), each quad
// of a row read with one 16-byte load. The shard is bound as array<vec4<u32>> (`shard4`, the
// binding bag.wgsl's `shard` names as u32 words, which this module does not read): tables are
// concatenated whole rows of dim words (or more, aligned), dim a multiple of 4, and shards hold
// whole rows, so every row starts on a 16-byte boundary of its shard. Helpers for the bag driver,
// as the other decode_<format>.wgsl files; no entry point.
// Bindings: 5 shard4 (the bag's shard, as vec4<u32>).

@group(0) @binding(5) var<storage, read> shard4: array<vec4<u32>>;

// No parameters.
alias RowParams = u32;

fn row_params(base: u32, code_words: u32) -> RowParams {
    return 0u;
}

// One value (POOL_NONE's rows, and bag.wgsl's one-column path, which VEC4 never takes): a lane of
// the quad that holds it.
fn decode1(base: u32, c: u32, rp: RowParams) -> f32 {
    let p = base + c;
    return bitcast<f32>(shard4[p / 4u][p % 4u]);
}

// Values c .. c + 4 (c a multiple of 4): one 16-byte load.
fn decode4(base: u32, c: u32, rp: RowParams) -> vec4<f32> {
    return bitcast<vec4<f32>>(shard4[(base + c) / 4u]);
}
