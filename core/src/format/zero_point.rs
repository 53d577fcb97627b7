//! Group-wise INT4 and INT8 with an fp16 scale and an integer zero point per group: ONNX Runtime's
//! `GatherBlockQuantized` (and `MatMulNBits`) blocks — `int4_zp32`, `int4_zp64`, `int4_zp128`,
//! `int8_zp32`, `int8_zp64`, `int8_zp128`.
//!
//! Value = `(q − zp) · scale`, `q` and `zp` in `0 ..= L` (L = 15 or 255). The codes are laid out as
//! the group-wise formats' (element `8k + j` at bits `4j` of word `k`, or byte `j` of word `k`,
//! which is also ONNX's order: element `2j` in the low nibble of byte `j`; a row's codes are
//! `dim · bits / 32` words rounded up, ONNX's data row padded to a word), and one word per group
//! after all the codes holds the fp16 scale (low half) and the zero point (high half). `q − zp` has
//! at most 9 significant bits and the scale 11, so the product is exact in f32: GPU, CPU and ONNX
//! Runtime's CPU kernel (which computes the same product in f32) agree bit for bit.
//! `edo::file::gbq` converts to and from the operator's (data, scales,
//! zero_points) triplet byte for byte.
//!
//! Encoding (asymmetric, as ONNX Runtime's block quantisers): with `lo = min(min, 0)` and
//! `hi = max(max, 0)`, `scale = fp16((hi − lo) / L)` (1 for an all-zero group),
//! `zp = clamp(round(−lo / scale), 0, L)`, `q = clamp(round(x / scale) + zp, 0, L)`, rounding
//! half to even; zero is always exact. Error bound, per group: `|x − x̂| ≤ s/2 + (L + 1)·½ulp₁₆(s) +
//! 2⁻²⁰·max|x|`, `s = (hi − lo) / L` (half a step, and what the zero point's rounding and the
//! fp16 scale's can clip at the ends). Groups whose `hi − lo` is beyond `65504 · L` are
//! [`EncodeError::OutOfRange`].

use half::f16;

use super::f16::{f16_half_ulp, half_to_f32};
use super::unpack::{Affine, Groups};
use super::{check_finite, min_max, round_ties_even_small, Codec, EncodeError, Format};
use crate::simd::Lanes;

/// `BITS`-bit codes (4 or 8) with an fp16 scale and an integer zero point per `G` values.
pub struct ZeroPoint<const BITS: usize, const G: usize>;

/// 4-bit codes, fp16 scale and zero point per 32 values.
pub type Int4Zp32 = ZeroPoint<4, 32>;
/// 4-bit codes, fp16 scale and zero point per 64 values.
pub type Int4Zp64 = ZeroPoint<4, 64>;
/// 4-bit codes, fp16 scale and zero point per 128 values.
pub type Int4Zp128 = ZeroPoint<4, 128>;
/// 8-bit codes, fp16 scale and zero point per 32 values.
pub type Int8Zp32 = ZeroPoint<8, 32>;
/// 8-bit codes, fp16 scale and zero point per 64 values.
pub type Int8Zp64 = ZeroPoint<8, 64>;
/// 8-bit codes, fp16 scale and zero point per 128 values.
pub type Int8Zp128 = ZeroPoint<8, 128>;

impl<const BITS: usize, const G: usize> ZeroPoint<BITS, G> {
    /// The largest code.
    const MAX_CODE: u32 = (1 << BITS) - 1;
    /// Codes per word.
    const PER_WORD: usize = 32 / BITS;

    /// The fp16 scale and the zero point of a group, or the column of a value beyond them.
    fn params(group: &[f32]) -> Result<(f16, u32), usize> {
        let (min, max) = min_max(group);
        let (lo, hi) = (min.min(0.0), max.max(0.0));
        let l = Self::MAX_CODE as f32;
        if hi == lo {
            return Ok((f16::ONE, Self::MAX_CODE / 2 + 1));
        }
        let scale = f16::from_f32((hi - lo) / l);
        if scale.is_infinite() {
            return Err(group.iter().position(|&x| x == min || x == max).unwrap_or(0));
        }
        if scale.to_f32() == 0.0 {
            // Below fp16's smallest subnormal step: every value decodes to zero.
            return Ok((f16::ONE, Self::MAX_CODE / 2 + 1));
        }
        let zp = round_ties_even_small(-lo / scale.to_f32()).clamp(0.0, l) as u32;
        Ok((scale, zp))
    }
}

impl<const BITS: usize, const G: usize> ZeroPoint<BITS, G> {
    /// A group's decoding from its parameter word (fp16 scale low, zero point high).
    #[inline(always)]
    fn affine<L: Lanes>(l: L, p: u32) -> Affine {
        Affine::OffsetScale((p >> 16) as f32, l.half(p as u16))
    }
}

impl<const BITS: usize, const G: usize> Groups<G> for ZeroPoint<BITS, G> {
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

impl<const BITS: usize, const G: usize> Codec for ZeroPoint<BITS, G> {
    const FORMAT: Format = match (BITS, G) {
        (4, 32) => Format::Int4Zp32,
        (4, 64) => Format::Int4Zp64,
        (4, 128) => Format::Int4Zp128,
        (8, 32) => Format::Int8Zp32,
        (8, 64) => Format::Int8Zp64,
        (8, 128) => Format::Int8Zp128,
        _ => panic!("no such zero-point format"),
    };
    const NAME: &'static str = match (BITS, G) {
        (4, 32) => "int4_zp32",
        (4, 64) => "int4_zp64",
        (4, 128) => "int4_zp128",
        (8, 32) => "int8_zp32",
        (8, 64) => "int8_zp64",
        (8, 128) => "int8_zp128",
        _ => panic!("no such zero-point format"),
    };
    const CODE_BITS: usize = BITS;
    const GROUP: usize = G;
    const PARAM_BITS: usize = 32;

    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        check_finite(row)?;
        out.fill(0);
        let (codes, params) = out.split_at_mut(Self::code_words(row.len()));
        let l = Self::MAX_CODE as f32;
        for (g, (group, words)) in row.chunks(G).zip(codes.chunks_mut(G / Self::PER_WORD)).enumerate() {
            let (scale, zp) = Self::params(group).map_err(|i| EncodeError::OutOfRange { col: g * G + i, value: group[i] })?;
            let inverse = 1.0 / scale.to_f32();
            for (i, &x) in group.iter().enumerate() {
                let q = (round_ties_even_small(x * inverse) + zp as f32).clamp(0.0, l) as u32;
                words[i / Self::PER_WORD] |= q << (BITS * (i % Self::PER_WORD));
            }
            params[g] = scale.to_bits() as u32 | zp << 16;
        }
        Ok(())
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
            let (scale, zp) = (half_to_f32(p as u16), (p >> 16) as f32);
            for (i, o) in dst.iter_mut().enumerate() {
                let q = (words[i / Self::PER_WORD] >> (BITS * (i % Self::PER_WORD))) & Self::MAX_CODE;
                *o = (q as f32 - zp) * scale;
            }
        }
    }

    fn error_bounds(row: &[f32]) -> Vec<f32> {
        let l = Self::MAX_CODE as f32;
        let mut bounds = Vec::with_capacity(row.len());
        for group in row.chunks(G) {
            let (min, max) = min_max(group);
            let s = (max.max(0.0) - min.min(0.0)) / l;
            let bound = s / 2.0 + (l + 1.0) * f16_half_ulp(s) + min.abs().max(max.abs()) * 2f32.powi(-20);
            bounds.extend(std::iter::repeat_n(bound, group.len()));
        }
        bounds
    }
}
