// decode_kquants: ggml's k-quant super-blocks of 256 values (q4_k, q6_k; src/format/kquant.rs):
// code_words words of codes, BITS · 8 words per super-block (value 8k+j in nibble j of word k,
// and for BITS = 6 the top two bits of value 16k+j at bits 2j of word 32+k) but the row's last,
// which stores only the sub-blocks (of 32 values for q4_k, 16 for q6_k) its values reach (for
// q6_k with s of them, the top bits at word 2s+k), then every
// super-block's parameter bytes as GGUF holds them: q4_k 16 bytes (fp16 d, fp16 dmin, 12 bytes of
// 6-bit sub-block scales and minimums), q6_k 18 bytes (16 signed 8-bit scales, fp16 d), so a
// q6_k super-block's parameters may start mid-word.
// q4_k: value = (d · sc) · q − dmin · m per 32 values; q6_k: value = (d · sc) · (q − 32) per 16.
// Both products are exact in f32 (at most 11 + 7 + 5 significant bits), so fused or not the
// result is the CPU oracle's (and ggml's).
// Helpers for a driver, whose helpers define word(p), the shard's u32 word p.

override BITS: u32 = 4u;

// The word where the row's parameter bytes start.
alias RowParams = u32;

fn row_params(base: u32, code_words: u32) -> RowParams {
    return base + code_words;
}

// Byte b of the parameters that start at word p.
fn param_byte(p: RowParams, b: u32) -> u32 {
    return extractBits(word(p + b / 4u), 8u * (b & 3u), 8u);
}

// The word of top bits (q6_k) of value i of the super-block whose codes start at w, in a row
// whose parameters start at p: after the nibbles of the sub-blocks stored from w on, 16 or fewer
// in the row's last super-block (3 words each).
fn top_word(w: u32, i: u32, p: RowParams) -> u32 {
    let subs = min(16u, (p - w) / 3u);
    return word(w + 2u * subs + i / 16u);
}

// The code of value c of the row that starts at base, whose parameters start at p.
fn kcode(base: u32, c: u32, p: RowParams) -> u32 {
    let w = base + (c / 256u) * BITS * 8u;
    let i = c & 255u;
    let low = extractBits(word(w + i / 8u), 4u * (i & 7u), 4u);
    if (BITS == 6u) {
        return low | (extractBits(top_word(w, i, p), 2u * (i & 15u), 2u) << 4u);
    }
    return low;
}

// (step, offset) of the sub-block holding value c: value = step · q − offset (q4_k) or
// step · (q − 32) (q6_k, offset 0).
fn sub_params(p: RowParams, c: u32) -> vec2<f32> {
    let g = c / 256u;
    if (BITS == 6u) {
        let b = g * 18u;
        let d = unpack2x16float(word(p + (b + 16u) / 4u))[((b + 16u) / 2u) & 1u];
        let sc = f32(extractBits(i32(param_byte(p, b + (c & 255u) / 16u)), 0u, 8u));
        return vec2<f32>(d * sc, 0.0);
    }
    let q = p + g * 4u;
    let dm = unpack2x16float(word(q));
    let j = (c & 255u) / 32u;
    var sc: u32;
    var m: u32;
    if (j < 4u) {
        sc = param_byte(q + 1u, j) & 63u;
        m = param_byte(q + 1u, j + 4u) & 63u;
    } else {
        sc = (param_byte(q + 1u, j + 4u) & 15u) | ((param_byte(q + 1u, j - 4u) >> 6u) << 4u);
        m = (param_byte(q + 1u, j + 4u) >> 4u) | ((param_byte(q + 1u, j) >> 6u) << 4u);
    }
    return vec2<f32>(dm.x * f32(sc), dm.y * f32(m));
}

fn decode1(base: u32, c: u32, p: RowParams) -> f32 {
    let s = sub_params(p, c);
    let q = kcode(base, c, p);
    if (BITS == 6u) {
        return s.x * f32(i32(q) - 32);
    }
    return s.x * f32(q) - s.y;
}

// Values c .. c + 4 (c a multiple of 4: one word of nibbles, and for q6_k one of top bits).
fn decode4(base: u32, c: u32, p: RowParams) -> vec4<f32> {
    let s = sub_params(p, c);
    let w = base + (c / 256u) * BITS * 8u;
    let i = c & 255u;
    let low = word(w + i / 8u) >> (4u * (i & 7u));
    let nibbles = vec4<u32>(low, low >> 4u, low >> 8u, low >> 12u) & vec4<u32>(15u);
    if (BITS == 6u) {
        let top = top_word(w, i, p) >> (2u * (i & 15u));
        let q = nibbles | ((vec4<u32>(top, top >> 2u, top >> 4u, top >> 6u) & vec4<u32>(3u)) << vec4<u32>(4u));
        return s.x * vec4<f32>(vec4<i32>(q) - vec4<i32>(32));
    }
    return s.x * vec4<f32>(nibbles) - s.y;
}
