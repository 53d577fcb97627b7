//! INT8 row-wise: FBGEMM's fused 8-bit convention (`embedding_bag_byte_prepack`).
//!
//! Per row: `bias = min`, `code = round_ties_even((x − min) · 255 / (max − min + 1e-8))` — FBGEMM's
//! codes exactly — and `scale = (max − min) / 255` rounded to 16 significant bits. The codes are
//! stored as `dim` bytes (element `i` in byte `i`, padded to a word), then the `f32` scale and the
//! `f32` bias. Decoding is `code * scale + bias`.
//!
//! Why the 16-bit scale: an 8-bit code times a 16-bit scale is exact in f32, so the only rounding
//! in the decode is the addition, and the result is the same bits whether a compiler fuses the
//! multiply-add or not (lavapipe does not, most GPU compilers do, WGSL allows both). Without it
//! the GPU and the CPU oracle could differ in the last bit. The price is a scale off by at most
//! 2⁻¹⁶ of itself.
//!
//! Error bound: `|x − x̂| ≤ scale/2 + 2⁻⁸·scale + 1e-8 + 2⁻²⁰·max(|min|, |max|)`: half a step, plus
//! 255 codes times the scale's rounding, plus what FBGEMM's `1e-8` in the inverse scale can shift a
//! code by (at most `min(range, 1e-8)` in value), plus f32 rounding. A constant row (`max == min`) gets
//! `scale = 0`, all codes 0, and decodes exactly to the constant. A row whose `max − min`
//! overflows f32 is [`EncodeError::OutOfRange`].

use super::unpack::Affine;
use super::{finite_min_max, round_ties_even_small, Codec, EncodeError, Format};
use crate::simd::Lanes;

/// 8-bit row-wise quantised rows.
pub struct Int8;

/// FBGEMM's guard against division by zero for constant rows.
const EPSILON: f32 = 1e-8;

impl Codec for Int8 {
    const FORMAT: Format = Format::Int8;
    const NAME: &'static str = "int8";
    const ALIASES: &'static [&'static str] = &["i8"];
    const CODE_BITS: usize = 8;
    const PARAM_BITS: usize = 64;

    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        let (min, max) = finite_min_max(row)?;
        let range = max - min;
        if !range.is_finite() {
            // max − min overflows f32: the scale could not be stored.
            let col = row.iter().position(|&x| x == max).unwrap_or(0);
            return Err(EncodeError::OutOfRange { col, value: max });
        }
        let scale = round_to_16_bits(range / 255.0);
        let inverse_scale = 255.0 / (range + EPSILON);
        let code_words = out.len() - 2;
        // Byte `i` of the little-endian words is element `i`; padding bytes stay 0.
        let codes: &mut [u8] = bytemuck::cast_slice_mut(&mut out[..code_words]);
        codes.fill(0);
        for (q, &x) in codes.iter_mut().zip(row) {
            *q = round_ties_even_small((x - min) * inverse_scale).clamp(0.0, 255.0) as u8;
        }
        out[code_words] = scale.to_bits();
        out[code_words + 1] = min.to_bits();
        Ok(())
    }

    fn decode_row_reference(words: &[u32], out: &mut [f32]) {
        let code_words = words.len() - 2;
        let scale = f32::from_bits(words[code_words]);
        let bias = f32::from_bits(words[code_words + 1]);
        let bytes: &[u8] = bytemuck::cast_slice(&words[..code_words]);
        // Little-endian word order: byte `i` of the row is element `i` on every host edo targets.
        for (o, &q) in out.iter_mut().zip(bytes) {
            // Exact product (see the module docs), one rounding in the addition.
            *o = q as f32 * scale + bias;
        }
    }

    #[inline(always)]
    fn decode<L: Lanes>(l: L, words: &[u32], out: &mut [f32]) {
        let code_words = words.len() - 2;
        let (scale, bias) = (f32::from_bits(words[code_words]), f32::from_bits(words[code_words + 1]));
        super::unpack::bytes(l, bytemuck::cast_slice(&words[..code_words]), out, Affine::ScaleBias(scale, bias));
    }

    fn error_bounds(row: &[f32]) -> Vec<f32> {
        let (min, max) = super::min_max(row);
        vec![int8_error_bound(min, max); row.len()]
    }

    const OCTETS: bool = true;

    #[inline(always)]
    fn octet<L: Lanes>(l: L, words: &[u32], k: usize, _dim: usize) -> L::F {
        let code_words = words.len() - 2;
        let (scale, bias) = (f32::from_bits(words[code_words]), f32::from_bits(words[code_words + 1]));
        let codes: &[u8] = bytemuck::cast_slice(&words[2 * k..2 * k + 2]);
        Affine::ScaleBias(scale, bias).lanes(l, l.bytes(codes.try_into().expect("8 bytes")))
    }

    #[inline(always)]
    fn pool_row<L: Lanes>(_: L, words: &[u32], w: f32, max: bool, acc: &mut [f32], _scratch: &mut [f32]) {
        let code_words = words.len() - 2;
        let scale = f32::from_bits(words[code_words]);
        let bias = f32::from_bits(words[code_words + 1]);
        let bytes: &[u8] = bytemuck::cast_slice(&words[..code_words]);
        super::pool_values(acc, bytes.iter().map(|&q| q as f32 * scale + bias), w, max);
    }
}

/// Rounds a finite, non-negative f32 to 16 significant bits (half-up on the dropped 8 bits), so
/// that its product with any 8-bit integer is exact.
#[inline]
pub fn round_to_16_bits(x: f32) -> f32 {
    f32::from_bits((x.to_bits() + 0x80) & !0xFF)
}

#[cfg(target_endian = "big")]
compile_error!("edo's packed layouts assume a little-endian host");

/// The documented error bound of [`Int8`] for a row with this minimum and maximum.
pub fn int8_error_bound(min: f32, max: f32) -> f32 {
    let scale = (max - min) / 255.0;
    scale / 2.0 + scale * (2f32).powi(-8) + EPSILON + min.abs().max(max.abs()) * (2f32).powi(-20)
}
