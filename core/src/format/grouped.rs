//! Group-wise INT4 and INT8: FBGEMM's row-wise quantisation applied to every group of `G` values
//! (32, 64 or 128) instead of the whole row — `int4_g32`, `int4_g64`, `int4_g128`, `int8_g32`,
//! `int8_g64`, `int8_g128`.
//!
//! Per group, as [`Int4`](super::Int4) per row: `bias = fp16(min)`, `scale = fp16((max − bias) /
//! L)` with `L` = 15 or 255 (1 for a constant group, or when its inverse overflows),
//! `code = clamp(round_ties_even((x − bias) / scale), 0, L)`. A group's codes start on a word, in
//! the element order of the row-wise formats (element `8k + j` at bits `4j` of word `k`, or byte
//! `j` of word `k` for INT8); after all the codes, one word per group holds its fp16 scale (low
//! half) and bias (high half). A whole group's codes are whole words; the last group of a row
//! whose width is not a multiple of `G` stores only the words its values reach (a row's codes are
//! `dim · bits / 32` words rounded up). Decoding is `code · scale + bias` in f32 with an exact
//! product, so the GPU equals the CPU bit for bit.
//!
//! An fp16 scale and bias per 64 values cost 0.5625 bytes per value at 4 bits, and keep a smooth
//! row's outliers from widening every other value's step: on WordLlama's token table, `int4_g64`
//! keeps more of the exact ranking than row-wise INT4 (docs/formats.md).
//!
//! Error bound, per group: `|x − x̂| ≤ s/2 + ⌊L/2 + 1⌋·ulp₁₆(s) + ulp₁₆(min) + 2⁻²⁰·max|x|` with
//! `s = (max − min) / L`, as [`Int4`](super::Int4)'s for a row. Groups whose minimum or maximum is
//! beyond ±65504 are [`EncodeError::OutOfRange`].

use half::f16;

use super::f16::half_to_f32;
use super::int4::{fp16_scale_bias, fp16_scale_bias_bound};
use super::unpack::{Affine, Groups};
use super::{round_ties_even_small, Codec, EncodeError, Format};
use crate::simd::Lanes;

/// `BITS`-bit codes (4 or 8) with an fp16 scale and bias per `G` values.
pub struct Grouped<const BITS: usize, const G: usize>;

/// 4-bit codes, fp16 scale and bias per 32 values.
pub type Int4G32 = Grouped<4, 32>;
/// 4-bit codes, fp16 scale and bias per 64 values.
pub type Int4G64 = Grouped<4, 64>;
/// 4-bit codes, fp16 scale and bias per 128 values.
pub type Int4G128 = Grouped<4, 128>;
/// 8-bit codes, fp16 scale and bias per 32 values.
pub type Int8G32 = Grouped<8, 32>;
/// 8-bit codes, fp16 scale and bias per 64 values.
pub type Int8G64 = Grouped<8, 64>;
/// 8-bit codes, fp16 scale and bias per 128 values.
pub type Int8G128 = Grouped<8, 128>;

impl<const BITS: usize, const G: usize> Grouped<BITS, G> {
    /// The largest code.
    const MAX_CODE: u32 = (1 << BITS) - 1;
    /// Codes per word.
    const PER_WORD: usize = 32 / BITS;

    /// The code of `x` for fp16 `scale` and `bias` (`inverse` = 1 / scale, `b` = bias).
    #[inline(always)]
    fn code(x: f32, inverse: f32, b: f32) -> f32 {
        round_ties_even_small((x - b) * inverse).clamp(0.0, Self::MAX_CODE as f32)
    }

    /// Writes a group's codes for fp16 `scale` and `bias` into its (zeroed) words.
    fn put_codes(group: &[f32], scale: f16, bias: f16, words: &mut [u32]) {
        let (inverse, b) = (1.0 / scale.to_f32(), bias.to_f32());
        for (i, &x) in group.iter().enumerate() {
            words[i / Self::PER_WORD] |= (Self::code(x, inverse, b) as u32) << (BITS * (i % Self::PER_WORD));
        }
    }

    /// A group's squared error as decoded with fp16 `scale` and `bias`.
    fn squared_error(group: &[f32], scale: f16, bias: f16) -> f64 {
        let (s, b) = (scale.to_f32(), bias.to_f32());
        let inverse = 1.0 / s;
        group.iter().map(|&x| ((Self::code(x, inverse, b) * s + b) - x) as f64).map(|e| e * e).sum()
    }

    /// The (scale, bias) of least squared error over a group, searched as ggml's `make_qkx2_quants`
    /// searches (weights 1): for 41 inverse scales from `(L − 1) / (max − min)` to
    /// `(L + 1) / (max − min)`, the codes they give, then the scale and bias that fit those codes
    /// best by least squares, rounded to fp16 and scored as decoded. The min/max choice is one of
    /// the candidates, so the result is never worse than it.
    fn min_error_params(group: &[f32], plain: (f16, f16)) -> (f16, f16) {
        let (min, max) = super::min_max(group);
        let mut best = (plain, Self::squared_error(group, plain.0, plain.1));
        if max <= min {
            return best.0;
        }
        let n = group.len() as f64;
        let l = Self::MAX_CODE as f32;
        for step in 0..=40 {
            let iscale = (l - 1.0 + 0.05 * step as f32) / (max - min);
            let (mut sl, mut sl2, mut sx, mut slx) = (0f64, 0f64, 0f64, 0f64);
            for &x in group {
                let q = round_ties_even_small((x - min) * iscale).clamp(0.0, l) as f64;
                sl += q;
                sl2 += q * q;
                sx += x as f64;
                slx += q * x as f64;
            }
            let det = n * sl2 - sl * sl;
            if det <= 0.0 {
                continue;
            }
            let scale = ((n * slx - sl * sx) / det) as f32;
            let bias = ((sx - scale as f64 * sl) / n) as f32;
            let (scale, bias) = (f16::from_f32(scale), f16::from_f32(bias));
            let s = scale.to_f32();
            // A NaN or non-positive scale (a degenerate fit) is no candidate.
            if s.is_nan() || s <= 0.0 || (1.0 / s).is_infinite() || bias.is_infinite() {
                continue;
            }
            let sse = Self::squared_error(group, scale, bias);
            if sse < best.1 {
                best = ((scale, bias), sse);
            }
        }
        best.0
    }

    fn encode(row: &[f32], out: &mut [u32], min_error: bool) -> Result<(), EncodeError> {
        super::check_finite(row)?;
        out.fill(0);
        let (codes, params) = out.split_at_mut(Self::code_words(row.len()));
        for (g, (group, words)) in row.chunks(G).zip(codes.chunks_mut(G / Self::PER_WORD)).enumerate() {
            let (min, max) = super::min_max(group);
            let plain = fp16_scale_bias(group, min, max, Self::MAX_CODE as f32).map_err(|e| match e {
                EncodeError::OutOfRange { col, value } => EncodeError::OutOfRange { col: g * G + col, value },
                e => e,
            })?;
            let (scale, bias) = if min_error { Self::min_error_params(group, plain) } else { plain };
            Self::put_codes(group, scale, bias, words);
            params[g] = scale.to_bits() as u32 | (bias.to_bits() as u32) << 16;
        }
        Ok(())
    }
}

impl<const BITS: usize, const G: usize> Grouped<BITS, G> {
    /// A group's decoding from its parameter word (fp16 scale low, fp16 bias high).
    #[inline(always)]
    fn affine<L: Lanes>(l: L, p: u32) -> Affine {
        Affine::ScaleBias(l.half(p as u16), l.half((p >> 16) as u16))
    }
}

impl<const BITS: usize, const G: usize> Groups<G> for Grouped<BITS, G> {
    const GROUP_WORDS: usize = G / Self::PER_WORD;

    #[inline(always)]
    fn group<L: Lanes>(l: L, g: usize, words: &[u32], params: &[u32], dst: &mut [f32]) {
        let a = Self::affine(l, params[g]);
        if BITS == 8 {
            super::unpack::bytes(l, bytemuck::cast_slice(words), dst, a);
        } else {
            super::unpack::nibbles(l, words, dst, a);
        }
    }
}

impl<const BITS: usize, const G: usize> Codec for Grouped<BITS, G> {
    const FORMAT: Format = match (BITS, G) {
        (4, 32) => Format::Int4G32,
        (4, 64) => Format::Int4G64,
        (4, 128) => Format::Int4G128,
        (8, 32) => Format::Int8G32,
        (8, 64) => Format::Int8G64,
        (8, 128) => Format::Int8G128,
        _ => panic!("no such grouped format"),
    };
    const NAME: &'static str = match (BITS, G) {
        (4, 32) => "int4_g32",
        (4, 64) => "int4_g64",
        (4, 128) => "int4_g128",
        (8, 32) => "int8_g32",
        (8, 64) => "int8_g64",
        (8, 128) => "int8_g128",
        _ => panic!("no such grouped format"),
    };
    const CODE_BITS: usize = BITS;
    const GROUP: usize = G;
    const PARAM_BITS: usize = 32;
    const MIN_ERROR_SEARCH: bool = true;

    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        Self::encode(row, out, false)
    }

    fn encode_row_min_error(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        Self::encode(row, out, true)
    }

    #[inline(always)]
    fn decode<L: Lanes>(l: L, words: &[u32], out: &mut [f32]) {
        let (codes, params) = words.split_at(Self::code_words(out.len()));
        super::unpack::groups::<G, Self, L>(l, codes, params, out);
    }

    /// Octets for groups of 64 and 128 values; with 32 the group's parameters, decoded again for
    /// each octet, cost more than decoding the row once (bags of 16 on a 262 144-row table ran at
    /// 0.85-0.91x the row-at-a-time pooling, measured 2026-12-07).
    const OCTETS: bool = G >= 64;

    /// An octet lies in one group (`G` is a multiple of 8): its codes, its group's parameters.
    #[inline(always)]
    fn octet<L: Lanes>(l: L, words: &[u32], k: usize, dim: usize) -> L::F {
        let a = Self::affine(l, words[Self::code_words(dim) + 8 * k / G]);
        super::unpack::octet::<BITS, L>(l, words, k, a)
    }

    fn decode_row_reference(words: &[u32], out: &mut [f32]) {
        let (codes, params) = words.split_at(Self::code_words(out.len()));
        for ((dst, words), &p) in out.chunks_mut(G).zip(codes.chunks(G / Self::PER_WORD)).zip(params) {
            let (scale, bias) = (half_to_f32(p as u16), half_to_f32((p >> 16) as u16));
            for (i, o) in dst.iter_mut().enumerate() {
                let q = (words[i / Self::PER_WORD] >> (BITS * (i % Self::PER_WORD))) & Self::MAX_CODE;
                *o = q as f32 * scale + bias;
            }
        }
    }

    fn error_bounds(row: &[f32]) -> Vec<f32> {
        let mut bounds = Vec::with_capacity(row.len());
        for group in row.chunks(G) {
            let (min, max) = super::min_max(group);
            let bound = fp16_scale_bias_bound(min, max, Self::MAX_CODE as f32);
            bounds.extend(std::iter::repeat_n(bound, group.len()));
        }
        bounds
    }
}
