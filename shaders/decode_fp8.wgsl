// decode_fp8: FP8 rows with an f32 scale per row (fp8_e4m3, fp8_e5m2; src/format/fp8.rs):
// code_words words of four 8-bit codes (element 4k+j in byte j of word k), then the f32 scale
// (row_words = code_words + 1, or more for rows aligned on the GPU). Value = fp8(code) · scale, fp8
// the OCP E4M3 (bias 7, no infinities) or E5M2 (bias 15, IEEE specials) value, built from its bits
// exactly. A code has at most 4 significant bits and edo's scales 20, so the product is exact: the
// CPU oracle's bits. Helpers for a driver, whose
// helpers define word(p), the shard's u32 word p.

override E5M2: bool = false;

alias RowParams = f32;

fn row_params(base: u32, code_words: u32) -> RowParams {
    return bitcast<f32>(word(base + code_words));
}

// The value of an FP8 code.
fn fp8(c: u32) -> f32 {
    let mbits = select(3u, 2u, E5M2);
    let emask = select(15u, 31u, E5M2);
    let bias = select(7u, 15u, E5M2);
    let mmask = (1u << mbits) - 1u;
    let sign = (c & 0x80u) << 24u;
    let e = (c >> mbits) & emask;
    let m = c & mmask;
    if (e == 0u) {
        // Subnormal: m · 2^(1 − bias − mbits).
        let v = ldexp(f32(m), select(-9i, -16i, E5M2));
        return select(v, -v, sign != 0u);
    }
    var bits = sign | ((e + 127u - bias) << 23u) | (m << (23u - mbits));
    if (e == emask && (E5M2 || m == mmask)) {
        // E5M2's ±inf and NaNs, E4M3's NaN (edo never stores them; import refuses them).
        bits = sign | 0x7f800000u | (m << (23u - mbits));
    }
    return bitcast<f32>(bits);
}

fn decode1(base: u32, c: u32, scale: RowParams) -> f32 {
    return fp8(extractBits(word(base + c / 4u), 8u * (c & 3u), 8u)) * scale;
}

fn decode4(base: u32, c: u32, scale: RowParams) -> vec4<f32> {
    let w = word(base + c / 4u);
    return vec4<f32>(fp8(w & 0xffu), fp8((w >> 8u) & 0xffu), fp8((w >> 16u) & 0xffu), fp8(w >> 24u)) * scale;
}
