// decode_grouped: group-wise INT4 / INT8 rows (src/format/grouped.rs, and with ZP
// src/format/zero_point.rs): code_words words of codes, GROUP · BITS / 32 words per group and a
// row's short last group only the words its values reach (element 8k+j at bits 4j of word k for
// BITS = 4, in byte j of word k for BITS = 8 — the row-wise formats' order), then one word per
// group holding its fp16 scale (low half) and fp16 bias (high half). Value = code · scale + bias;
// a code of at most 8 bits times an fp16 scale is exact in f32, so fused or not the result is the
// CPU oracle's. With ZP the high half is an integer zero point instead (ONNX Runtime's
// GatherBlockQuantized): value = (code − zp) · scale, exact.
// Helpers for a driver, whose helpers define word(p), the shard's u32 word p.

override BITS: u32 = 4u;
override GROUP: u32 = 64u;
override ZP: bool = false;

// The word where the row's group parameters start.
alias RowParams = u32;

fn row_params(base: u32, code_words: u32) -> RowParams {
    return base + code_words;
}

// (scale, bias), or with ZP (scale, zero point), of the group holding value c.
fn group_params(p: RowParams, c: u32) -> vec2<f32> {
    let w = word(p + c / GROUP);
    if (ZP) {
        return vec2<f32>(unpack2x16float(w).x, f32(w >> 16u));
    }
    return unpack2x16float(w);
}

fn decode1(base: u32, c: u32, p: RowParams) -> f32 {
    let sb = group_params(p, c);
    let per_word = 32u / BITS;
    let q = f32(extractBits(word(base + c / per_word), BITS * (c % per_word), BITS));
    if (ZP) {
        return (q - sb.y) * sb.x;
    }
    return q * sb.x + sb.y;
}

fn decode4(base: u32, c: u32, p: RowParams) -> vec4<f32> {
    let sb = group_params(p, c);
    var q: vec4<f32>;
    if (BITS == 8u) {
        q = vec4<f32>(unpack4xU8(word(base + c / 4u)));
    } else {
        let w = word(base + c / 8u) >> (4u * (c & 7u));
        q = vec4<f32>(vec4<u32>(w, w >> 4u, w >> 8u, w >> 12u) & vec4<u32>(15u));
    }
    if (ZP) {
        return (q - sb.y) * sb.x;
    }
    return q * sb.x + sb.y;
}
