// decode_f16_bag16: FP16 rows for bag.wgsl with WIDE — every dim a multiple of 16, so a row is
// dim / 2 words, a multiple of 4 (or more, a multiple of 4 still, where rows are aligned on the
// GPU) — sixteen values read with two 16-byte loads. The shard is bound as array<vec4<u32>>
// (`shard4`, the binding bag.wgsl's `shard` names as u32 words, which this module does not read):
// tables are whole rows and shards hold whole rows, so every row starts on a 16-byte boundary of
// its shard. Values are decode_f16's (unpack2x16float, exact). Helpers for the bag driver; no
// entry point.
// Bindings: 5 shard4 (the bag's shard, as vec4<u32>).

@group(0) @binding(5) var<storage, read> shard4: array<vec4<u32>>;

// No parameters.
alias RowParams = u32;

fn row_params(base: u32, code_words: u32) -> RowParams {
    return 0u;
}

// The word holding values c and c + 1 (c even) of the row at word `base`.
fn word_at(base: u32, c: u32) -> u32 {
    let p = base + c / 2u;
    return shard4[p / 4u][p % 4u];
}

// One value (POOL_NONE's rows).
fn decode1(base: u32, c: u32, rp: RowParams) -> f32 {
    let pair = unpack2x16float(word_at(base, c & ~1u));
    return select(pair.x, pair.y, (c & 1u) == 1u);
}

// Values c .. c + 4 (c a multiple of 4), for bag.wgsl's VEC4 path, which WIDE does not take.
fn decode4(base: u32, c: u32, rp: RowParams) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(word_at(base, c)), unpack2x16float(word_at(base, c + 2u)));
}

// Values c .. c + 16 (c a multiple of 16): two 16-byte loads.
fn decode16(base: u32, c: u32, rp: RowParams) -> Quads {
    let p = (base + c / 2u) / 4u;
    let a = shard4[p];
    let b = shard4[p + 1u];
    return Quads(
        vec4<f32>(unpack2x16float(a.x), unpack2x16float(a.y)),
        vec4<f32>(unpack2x16float(a.z), unpack2x16float(a.w)),
        vec4<f32>(unpack2x16float(b.x), unpack2x16float(b.y)),
        vec4<f32>(unpack2x16float(b.z), unpack2x16float(b.w)),
    );
}
