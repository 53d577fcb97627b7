// decode_blocks: ggml's block formats (q8_0, q4_0, q4_1, q5_0, q5_1; src/format/ggml.rs),
// repacked to whole words: code_words words of codes, BITS words per block of 32 values (value i
// of a block in byte i for BITS = 8, else in nibble i, element 8k+j at bits 4j of word k, with
// bit 4 of each 5-bit code in the block's fifth word) and a row's short last block only the words
// its values reach (5 bits: its fifth bits in the word after them, the row's last code word),
// then the blocks' fp16 parameters: without MIN two blocks' scales d to a word, with MIN one word
// (d low, m high) per block.
// Value = (code − OFFSET) · d without MIN, code · d + m with it. A code of at most 8 bits times an
// fp16 scale is exact in f32, so fused or not the result is the CPU oracle's (and ggml's).
// Helpers for a driver, whose helpers define word(p), the shard's u32 word p.

override BITS: u32 = 8u;
override MIN: bool = false;
override OFFSET: f32 = 128.0;

// The word where the row's block parameters start.
alias RowParams = u32;

fn row_params(base: u32, code_words: u32) -> RowParams {
    return base + code_words;
}

// (d, m) of block g.
fn block_params(p: RowParams, g: u32) -> vec2<f32> {
    if (MIN) {
        return unpack2x16float(word(p + g));
    }
    return vec2<f32>(unpack2x16float(word(p + g / 2u))[g & 1u], 0.0);
}

// The word of fifth bits of the block whose codes start at word w: its fifth word, or in a short
// last block the row's last code word (p - 1).
fn high_word(w: u32, p: RowParams) -> u32 {
    return word(min(w + 4u, p - 1u));
}

// The code of value c of the row that starts at base.
fn code(base: u32, c: u32, p: RowParams) -> u32 {
    let w = base + (c / 32u) * BITS;
    let i = c & 31u;
    if (BITS == 8u) {
        return extractBits(word(w + i / 4u), 8u * (i & 3u), 8u);
    }
    let low = extractBits(word(w + i / 8u), 4u * (i & 7u), 4u);
    if (BITS == 5u) {
        return low | (extractBits(high_word(w, p), i, 1u) << 4u);
    }
    return low;
}

fn decode1(base: u32, c: u32, p: RowParams) -> f32 {
    let dm = block_params(p, c / 32u);
    let q = f32(code(base, c, p));
    if (MIN) {
        return q * dm.x + dm.y;
    }
    return (q - OFFSET) * dm.x;
}

// Values c .. c + 4 (c a multiple of 4: one word of codes, and for 5 bits one of fifth bits).
fn decode4(base: u32, c: u32, p: RowParams) -> vec4<f32> {
    let dm = block_params(p, c / 32u);
    var q: vec4<f32>;
    if (BITS == 8u) {
        q = vec4<f32>(unpack4xU8(word(base + c / 4u)));
    } else {
        let w = base + (c / 32u) * BITS;
        let i = c & 31u;
        let low = word(w + i / 8u) >> (4u * (i & 7u));
        let nibbles = vec4<u32>(low, low >> 4u, low >> 8u, low >> 12u) & vec4<u32>(15u);
        if (BITS == 5u) {
            let high = high_word(w, p) >> i;
            q = vec4<f32>(nibbles | ((vec4<u32>(high, high >> 1u, high >> 2u, high >> 3u) & vec4<u32>(1u)) << vec4<u32>(4u)));
        } else {
            q = vec4<f32>(nibbles);
        }
    }
    if (MIN) {
        return q * dm.x + dm.y;
    }
    return (q - OFFSET) * dm.x;
}
