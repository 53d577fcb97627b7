//! ggml's block formats (llama.cpp, GGUF files): `q8_0`, `q4_0`, `q4_1`, `q5_0` and `q5_1`.
//!
//! A row is cut into blocks of 32 values, each with an fp16 scale `d` (and, for `q4_1` and `q5_1`,
//! an fp16 minimum `m`):
//!
//! | format | code `q` | value | bytes per block in GGUF |
//! |--------|----------|-------|-------------------------|
//! | `q8_0` | `−127 ..= 127` | `q · d` | 34: `d`, 32 × i8 |
//! | `q4_0` | `0 ..= 15` | `(q − 8) · d` | 18: `d`, 16 bytes of nibbles |
//! | `q4_1` | `0 ..= 15` | `q · d + m` | 20: `d`, `m`, 16 bytes of nibbles |
//! | `q5_0` | `0 ..= 31` | `(q − 16) · d` | 22: `d`, 4 bytes of high bits, 16 bytes of nibbles |
//! | `q5_1` | `0 ..= 31` | `q · d + m` | 24: `d`, `m`, 4 bytes of high bits, 16 bytes of nibbles |
//!
//! In GGUF, byte `j` of a block's nibbles holds value `j` (low nibble) and value `j + 16` (high
//! nibble), and bit `i` of the high bits (a little-endian u32) is bit 4 of value `i`. edo keeps the
//! same codes and parameters repacked to whole words, so that the GPU reads them without byte
//! shuffling: a row's blocks' codes first — `BITS` words per block, value `i` of a block in byte
//! `i` (`q8_0`, stored as `q + 128`) or in nibble `i` (element `8k + j` at bits `4j` of word `k`),
//! the high bits (`q5_*`) in the block's fifth word — then the parameters: two blocks' `d` to a
//! word (`q*_0`), or one word of `d` (low half) and `m` (high half) per block (`q*_1`).
//! [`Codec::write_external`] and [`Codec::read_external`] convert to and from GGUF's blocks byte
//! for byte. A row whose width is not a multiple of 32 (GGUF files hold none) stores only the words
//! its last block's values reach — for `q5_*` the nibbles' words, then the fifth bits' word — and
//! is exported as GGUF's whole block, the missing values' codes zero.
//!
//! Encoding is the `gguf` Python package's `quants.quantize` (0.19.0, the same as ggml's reference
//! quantisers), in f32 arithmetic step for step, so the bytes are equal:
//! - `q8_0`: `d = max|x| / 127`, `q = round_half_away(x / d)` (as `x · (1/d)`);
//! - `q4_0`, `q5_0`: `d = x* / −8` (−16), where `x*` is the first value of greatest magnitude,
//!   `q = min(trunc(x · (1/d) + 8.5), 15)` (`16.5`, `31`);
//! - `q4_1`, `q5_1`: `d = (max − min) / 15` (31), `m = min`,
//!   `q = min(trunc((x − min) · (1/d) + 0.5), 15)` (31);
//! - `1/d` is 0 when `d` is 0; `d` and `m` are stored rounded to fp16 (to nearest even).
//!
//! Decoding multiplies a code of at most 8 bits by an 11-bit fp16 scale, which is exact in f32, so
//! the one rounding (the addition of `m`) is the same fused or not: GPU and CPU agree bit for bit,
//! and both equal `quants.dequantize`. Values whose `d` or `m` would overflow fp16 (for `q8_0`,
//! `max|x| > 65504 · 127`) are [`EncodeError::OutOfRange`].
//!
//! Error bound, per block: `|x − x̂| ≤ s · (½ + 2⁻¹⁰) + L · ½ulp₁₆(d) (+ ½ulp₁₆(m) + 2⁻²³ · max|x|)`
//! for `q*_1` and `q8_0`, where `s` is the step (`|d|`), `L` the largest code magnitude; for
//! `q4_0` and `q5_0` the step is not halved: the code range `−8 ..= 7` cannot hold `−x*`, which
//! decodes one step short.

use half::f16;

use super::f16::{f16_half_ulp, half_to_f32};
use super::unpack::{Affine, Groups};
use super::{block_code_words, check_finite, Codec, EncodeError, Format};
use crate::simd::Lanes;

/// Values per ggml block.
pub const QK: usize = 32;

/// A ggml block format of `BITS`-bit codes (8, 5 or 4), with a per-block minimum when `MIN`.
pub struct Block<const BITS: usize, const MIN: bool>;

/// ggml `Q8_0`: 8-bit codes and an fp16 scale per 32 values.
pub type Q8_0 = Block<8, false>;
/// ggml `Q4_0`: 4-bit codes and an fp16 scale per 32 values.
pub type Q4_0 = Block<4, false>;
/// ggml `Q4_1`: 4-bit codes, an fp16 scale and an fp16 minimum per 32 values.
pub type Q4_1 = Block<4, true>;
/// ggml `Q5_0`: 5-bit codes and an fp16 scale per 32 values.
pub type Q5_0 = Block<5, false>;
/// ggml `Q5_1`: 5-bit codes, an fp16 scale and an fp16 minimum per 32 values.
pub type Q5_1 = Block<5, true>;

impl<const BITS: usize, const MIN: bool> Block<BITS, MIN> {
    /// The largest code.
    const MAX_CODE: u32 = (1 << BITS) - 1;
    /// What a code is stored above the signed value it means (formats without `MIN`).
    const OFFSET: u32 = 1 << (BITS - 1);
    /// Code words per block.
    const BLOCK_WORDS: usize = BITS;
    /// Bytes of the block's nibble or byte codes in GGUF.
    const QS_BYTES: usize = if BITS == 8 { QK } else { QK / 2 };

    /// Code words of a block of `n` values (1 to 32): the nibble or byte words its values reach,
    /// and for 5 bits the word of fifth bits after them (the fifth word of a whole block).
    fn block_words(n: usize) -> usize {
        if BITS == 5 {
            n.div_ceil(8) + 1
        } else {
            (n * BITS).div_ceil(32)
        }
    }

    /// Code `i` of a block's words (all of them, so that the last is a 5-bit block's fifth bits).
    #[inline(always)]
    fn code(codes: &[u32], i: usize) -> u32 {
        if BITS == 8 {
            return (codes[i / 4] >> (8 * (i % 4))) & 0xFF;
        }
        let low = (codes[i / 8] >> (4 * (i % 8))) & 0xF;
        if BITS == 5 {
            low | ((codes[codes.len() - 1] >> i) & 1) << 4
        } else {
            low
        }
    }

    /// A block's words as GGUF's whole block holds them: a short last block's zero-padded, its
    /// fifth bits (5 bits) moved to the fifth word.
    fn whole_block(words: &[u32]) -> [u32; 8] {
        let mut block = [0u32; 8];
        if BITS == 5 {
            let (high, low) = words.split_last().expect("a block has words");
            block[..low.len()].copy_from_slice(low);
            block[4] = *high;
        } else {
            block[..words.len()].copy_from_slice(words);
        }
        block
    }

    /// Sets code `i` of a block's (zeroed) words.
    #[inline(always)]
    fn put_code(codes: &mut [u32], i: usize, q: u32) {
        if BITS == 8 {
            codes[i / 4] |= q << (8 * (i % 4));
            return;
        }
        codes[i / 8] |= (q & 0xF) << (4 * (i % 8));
        if BITS == 5 {
            let high = codes.len() - 1;
            codes[high] |= (q >> 4) << i;
        }
    }

    /// The fp16 bits of block `g`'s `d` and `m` (0 without `MIN`).
    #[inline(always)]
    fn params(params: &[u32], g: usize) -> (u16, u16) {
        if MIN {
            (params[g] as u16, (params[g] >> 16) as u16)
        } else {
            ((params[g / 2] >> (16 * (g % 2))) as u16, 0)
        }
    }

    #[inline(always)]
    fn put_params(params: &mut [u32], g: usize, d: u16, m: u16) {
        if MIN {
            params[g] = d as u32 | (m as u32) << 16;
        } else {
            params[g / 2] |= (d as u32) << (16 * (g % 2));
        }
    }

    /// The value of code `q` in a block of scale `d` and minimum `m`, as `quants.dequantize`.
    #[inline(always)]
    fn value(q: u32, d: f32, m: f32) -> f32 {
        if MIN {
            q as f32 * d + m
        } else {
            (q as f32 - Self::OFFSET as f32) * d
        }
    }

    /// Quantises one block (up to 32 values; finite) into `codes` (zeroed) and returns the fp16
    /// bits of `d` and `m`, or the column (within the block) of a value they cannot hold.
    fn quantize_block(block: &[f32], codes: &mut [u32]) -> Result<(u16, u16), usize> {
        let max_abs_at = || block.iter().enumerate().fold(0, |best, (i, x)| if x.abs() > block[best].abs() { i } else { best });
        let id_of = |d: f32| if d == 0.0 { 0.0 } else { 1.0 / d };
        let (d, m) = if BITS == 8 {
            let at = max_abs_at();
            let d = block[at].abs() / 127.0;
            let id = id_of(d);
            for (i, &x) in block.iter().enumerate() {
                // f32::round is C's roundf (half away from zero), as np_roundf.
                let q = (x * id).round() as i32;
                Self::put_code(codes, i, (q + 128) as u32);
            }
            (f16::from_f32(d), f16::ZERO)
        } else if MIN {
            let (min, max) = super::min_max(block);
            let d = (max - min) / Self::MAX_CODE as f32;
            let id = id_of(d);
            for (i, &x) in block.iter().enumerate() {
                let q = ((x - min) * id + 0.5).trunc() as u32;
                Self::put_code(codes, i, q.min(Self::MAX_CODE));
            }
            let m = f16::from_f32(min);
            if m.is_infinite() {
                return Err(block.iter().position(|&x| x == min).unwrap_or(0));
            }
            (f16::from_f32(d), m)
        } else {
            let at = max_abs_at();
            let d = block[at] / -(Self::OFFSET as f32);
            let id = id_of(d);
            let half = Self::OFFSET as f32 + 0.5;
            for (i, &x) in block.iter().enumerate() {
                // Never negative: x · id ≥ −OFFSET (up to rounding), and the cast saturates at 0.
                let q = (x * id + half).trunc() as u32;
                Self::put_code(codes, i, q.min(Self::MAX_CODE));
            }
            (f16::from_f32(d), f16::ZERO)
        };
        if !d.is_finite() {
            return Err(max_abs_at());
        }
        Ok((d.to_bits(), m.to_bits()))
    }
}

impl<const BITS: usize, const MIN: bool> Groups<QK> for Block<BITS, MIN> {
    const GROUP_WORDS: usize = Self::BLOCK_WORDS;

    #[inline(always)]
    fn group<L: Lanes>(l: L, g: usize, words: &[u32], params: &[u32], dst: &mut [f32]) {
        let (d, m) = Self::params(params, g);
        let (d, m) = (l.half(d), l.half(m));
        let a = if MIN { Affine::ScaleBias(d, m) } else { Affine::OffsetScale(Self::OFFSET as f32, d) };
        if BITS == 8 {
            super::unpack::bytes(l, bytemuck::cast_slice(words), dst, a);
        } else if BITS == 4 {
            super::unpack::nibbles(l, words, dst, a);
        } else {
            // Bit i of the word after the nibbles (a whole block's fifth) is bit 4 of code i:
            // word k's eight codes take bits 8k .. 8k + 8 of it.
            let (octets, _) = dst.as_chunks_mut::<8>();
            let (low, high) = (&words[..octets.len()], words[octets.len()]);
            for (k, (o, &w)) in octets.iter_mut().zip(low).enumerate() {
                let q = l.or(l.fields::<4>(w), l.shl(l.fields::<1>(high >> (8 * k)), 4));
                l.store(a.lanes(l, q), o);
            }
        }
    }
}

impl<const BITS: usize, const MIN: bool> Codec for Block<BITS, MIN> {
    const FORMAT: Format = match (BITS, MIN) {
        (8, false) => Format::Q8_0,
        (4, false) => Format::Q4_0,
        (4, true) => Format::Q4_1,
        (5, false) => Format::Q5_0,
        (5, true) => Format::Q5_1,
        _ => panic!("no such ggml block format"),
    };
    const NAME: &'static str = match (BITS, MIN) {
        (8, false) => "q8_0",
        (4, false) => "q4_0",
        (4, true) => "q4_1",
        (5, false) => "q5_0",
        (5, true) => "q5_1",
        _ => panic!("no such ggml block format"),
    };
    /// q8_0 (8-bit codes, no minimum): sixteen a load.
    const CODE_BITS: usize = BITS;
    const GROUP: usize = QK;
    const PARAM_BITS: usize = if MIN { 32 } else { 16 };
    const GGML_TYPE: Option<u32> = Some(match (BITS, MIN) {
        (8, false) => 8,
        (4, false) => 2,
        (4, true) => 3,
        (5, false) => 6,
        (5, true) => 7,
        _ => panic!("no such ggml block format"),
    });

    /// Whole blocks, then a short last block's words: those its values reach, and for 5 bits a
    /// word of fifth bits after them.
    fn code_words(dim: usize) -> usize {
        block_code_words(dim, QK, Self::BLOCK_WORDS, Self::block_words)
    }

    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        check_finite(row)?;
        out.fill(0);
        let (codes, params) = out.split_at_mut(Self::code_words(row.len()));
        for (g, (block, words)) in row.chunks(QK).zip(codes.chunks_mut(Self::BLOCK_WORDS)).enumerate() {
            let (d, m) = Self::quantize_block(block, words).map_err(|i| EncodeError::OutOfRange { col: g * QK + i, value: block[i] })?;
            Self::put_params(params, g, d, m);
        }
        Ok(())
    }

    #[inline(always)]
    fn decode<L: Lanes>(l: L, words: &[u32], out: &mut [f32]) {
        let (codes, params) = words.split_at(Self::code_words(out.len()));
        super::unpack::groups::<QK, Self, L>(l, codes, params, out);
    }

    fn decode_row_reference(words: &[u32], out: &mut [f32]) {
        let (codes, params) = words.split_at(Self::code_words(out.len()));
        for (g, (dst, words)) in out.chunks_mut(QK).zip(codes.chunks(Self::BLOCK_WORDS)).enumerate() {
            let (d, m) = Self::params(params, g);
            let (d, m) = (half_to_f32(d), half_to_f32(m));
            for (i, o) in dst.iter_mut().enumerate() {
                *o = Self::value(Self::code(words, i), d, m);
            }
        }
    }

    fn error_bounds(row: &[f32]) -> Vec<f32> {
        let mut bounds = Vec::with_capacity(row.len());
        for block in row.chunks(QK) {
            let (min, max) = super::min_max(block);
            let max_abs = min.abs().max(max.abs());
            let bound = if MIN {
                let d = (max - min) / Self::MAX_CODE as f32;
                d * (0.5 + 1.0 / 1024.0) + Self::MAX_CODE as f32 * f16_half_ulp(d) + f16_half_ulp(min) + max_abs * (2f32).powi(-23)
            } else if BITS == 8 {
                let d = max_abs / 127.0;
                d * (0.5 + 1.0 / 1024.0) + 127.0 * f16_half_ulp(d)
            } else {
                let d = max_abs / Self::OFFSET as f32;
                d * (1.0 + 1.0 / 1024.0) + Self::OFFSET as f32 * f16_half_ulp(d)
            };
            bounds.extend(std::iter::repeat_n(bound, block.len()));
        }
        bounds
    }

    fn write_external(words: &[u32], dim: usize, out: &mut [u8]) {
        let (codes, params) = words.split_at(Self::code_words(dim));
        let block_bytes = out.len() / Self::groups(dim);
        for (g, (dst, words)) in out.chunks_exact_mut(block_bytes).zip(codes.chunks(Self::BLOCK_WORDS)).enumerate() {
            let block = Self::whole_block(words);
            let words = &block[..Self::BLOCK_WORDS];
            let (d, m) = Self::params(params, g);
            dst[..2].copy_from_slice(&d.to_le_bytes());
            if MIN {
                dst[2..4].copy_from_slice(&m.to_le_bytes());
            }
            let rest = &mut dst[if MIN { 4 } else { 2 }..];
            if BITS == 8 {
                // i8 codes: q = code − 128, the same byte with its top bit flipped.
                let codes: &[u8] = bytemuck::cast_slice(words);
                for (o, c) in rest.iter_mut().zip(codes) {
                    *o = c ^ 0x80;
                }
                continue;
            }
            let qs = if BITS == 5 {
                rest[..4].copy_from_slice(&words[4].to_le_bytes());
                &mut rest[4..]
            } else {
                rest
            };
            for (j, o) in qs.iter_mut().enumerate() {
                *o = (Self::code(words, j) & 0xF) as u8 | ((Self::code(words, j + 16) & 0xF) as u8) << 4;
            }
        }
    }

    fn read_external(src: &[u8], dim: usize, out: &mut [u32]) {
        let (codes, params) = out.split_at_mut(Self::code_words(dim));
        let block_bytes = src.len() / Self::groups(dim);
        for (g, (block, short)) in src.chunks_exact(block_bytes).zip(codes.chunks_mut(Self::BLOCK_WORDS)).enumerate() {
            // Read into a whole block, whose words a short last block then keeps as far as its
            // values reach (a 5-bit block's fifth bits after them).
            let mut whole = [0u32; 8];
            let words = &mut whole[..Self::BLOCK_WORDS];
            let half = |at: usize| u16::from_le_bytes([block[at], block[at + 1]]);
            let (d, m) = (half(0), if MIN { half(2) } else { 0 });
            Self::put_params(params, g, d, m);
            let rest = &block[if MIN { 4 } else { 2 }..];
            if BITS == 8 {
                for (i, &b) in rest.iter().enumerate() {
                    Self::put_code(words, i, (b ^ 0x80) as u32);
                }
            } else {
                let (high, qs) = if BITS == 5 { (u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]), &rest[4..]) } else { (0, rest) };
                debug_assert_eq!(qs.len(), Self::QS_BYTES);
                for (j, &b) in qs.iter().enumerate() {
                    for (i, nibble) in [(j, b & 0xF), (j + 16, b >> 4)] {
                        Self::put_code(words, i, nibble as u32 | ((high >> i) & 1) << 4);
                    }
                }
            }
            if BITS == 5 {
                let (high, low) = short.split_last_mut().expect("a block has words");
                low.copy_from_slice(&words[..low.len()]);
                *high = words[4];
            } else {
                short.copy_from_slice(&words[..short.len()]);
            }
        }
    }
}
