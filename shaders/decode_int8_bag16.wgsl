// decode_int8_bag16: INT8 rows for bag.wgsl with WIDE — rows aligned to 16 bytes (row_words a
// multiple of 4, PackedTable::with_row_alignment), every dim a multiple of 16 — sixteen codes
// read with one 16-byte load. The shard is bound as array<vec4<u32>> (`shard4`, the binding
// bag.wgsl's `shard` names as u32 words, which this module does not read): tables are whole
// rows of a multiple of 4 words and shards hold whole rows, so every row starts on a 16-byte
// boundary of its shard, and its scale and bias are the first two words of the vec4 after its
// codes (code_words = dim / 4, a multiple of 4). Values are decode_int8's, code · scale + bias,
// bit for bit. Helpers for the bag driver; no entry point.
// Bindings: 5 shard4 (the bag's shard, as vec4<u32>).

@group(0) @binding(5) var<storage, read> shard4: array<vec4<u32>>;

alias RowParams = vec2<f32>;

// (scale, bias) of the row at word `base` (a multiple of 4).
fn row_params(base: u32, code_words: u32) -> RowParams {
    return bitcast<vec2<f32>>(shard4[(base + code_words) / 4u].xy);
}

// One value (POOL_NONE's rows): the word that holds it, out of its vec4.
fn decode1(base: u32, c: u32, sb: RowParams) -> f32 {
    let p = base + c / 4u;
    return f32(extractBits(shard4[p / 4u][p % 4u], 8u * (c & 3u), 8u)) * sb.x + sb.y;
}

// Values c .. c + 4 (c a multiple of 4), for bag.wgsl's VEC4 path, which WIDE does not take.
fn decode4(base: u32, c: u32, sb: RowParams) -> vec4<f32> {
    let p = base + c / 4u;
    return vec4<f32>(unpack4xU8(shard4[p / 4u][p % 4u])) * sb.x + sb.y;
}

// Values c .. c + 16 (c a multiple of 16): one 16-byte load.
fn decode16(base: u32, c: u32, sb: RowParams) -> Quads {
    let w = shard4[(base + c / 4u) / 4u];
    return Quads(
        vec4<f32>(unpack4xU8(w.x)) * sb.x + sb.y,
        vec4<f32>(unpack4xU8(w.y)) * sb.x + sb.y,
        vec4<f32>(unpack4xU8(w.z)) * sb.x + sb.y,
        vec4<f32>(unpack4xU8(w.w)) * sb.x + sb.y,
    );
}
