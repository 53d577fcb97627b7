//! INT4 row-wise: FBGEMM's fused 4-bit convention (`embedding_bag_4bit_prepack`).
//!
//! Per row, as FBGEMM computes it: `bias = fp16(min)`; `scale = fp16((max − bias) / 15)`, replaced
//! by 1 when it is 0 (a constant row) or its inverse overflows; `code = clamp(round_ties_even((x −
//! bias) / scale), 0, 15)`. Element `2k` is the low nibble of byte `k`, `2k+1` the high nibble;
//! the code bytes are padded to a word and followed by one word holding the fp16 scale (low half)
//! and the fp16 bias (high half). Decoding is `code * scale + bias` in f32, where the product of a
//! 4-bit code and an 11-bit fp16 scale is exact, so fused or not the result is the same bits.
//!
//! Error bound: `|x − x̂| ≤ scale/2 + 8·ulp₁₆(scale) + ulp₁₆(min) + ε` — half a step, plus the
//! clamp of the top code when the fp16 scale rounded down (≤ 15 half-ulps of the scale), plus the
//! rounding of the bias to fp16. A constant row decodes to `fp16(min)`. Values whose minimum or
//! maximum is beyond ±65504 are [`EncodeError::OutOfRange`], since the bias could not be stored.

use half::f16;

use super::unpack::Affine;
use super::{finite_min_max, round_ties_even_small, Codec, EncodeError, Format};
use crate::simd::Lanes;

/// 4-bit row-wise quantised rows.
pub struct Int4;

impl Codec for Int4 {
    const FORMAT: Format = Format::Int4;
    const NAME: &'static str = "int4";
    const ALIASES: &'static [&'static str] = &["i4"];
    const CODE_BITS: usize = 4;
    const PARAM_BITS: usize = 32;

    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        let (min, max) = finite_min_max(row)?;
        let (scale_h, bias_h) = fp16_scale_bias(row, min, max, 15.0)?;
        let (scale, bias) = (scale_h.to_f32(), bias_h.to_f32());
        let inverse_scale = 1.0 / scale;
        let code_words = out.len() - 1;
        let code = |x: f32| round_ties_even_small((x - bias) * inverse_scale).clamp(0.0, 15.0) as u32;
        let nibbles = |values: &[f32]| values.iter().enumerate().fold(0u32, |word, (j, &x)| word | code(x) << (4 * j));
        // Whole words of eight values (a loop the compiler vectorises), then the tail.
        let mut chunks = row.chunks_exact(8);
        for (o, eight) in out[..code_words].iter_mut().zip(&mut chunks) {
            *o = nibbles(eight);
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            out[code_words - 1] = nibbles(tail);
        }
        out[code_words] = scale_h.to_bits() as u32 | (bias_h.to_bits() as u32) << 16;
        Ok(())
    }

    fn decode_row_reference(words: &[u32], out: &mut [f32]) {
        let params = words[words.len() - 1];
        let scale = f16::from_bits(params as u16).to_f32();
        let bias = f16::from_bits((params >> 16) as u16).to_f32();
        for (i, o) in out.iter_mut().enumerate() {
            *o = ((words[i / 8] >> (4 * (i % 8))) & 0xF) as f32 * scale + bias;
        }
    }

    #[inline(always)]
    fn decode<L: Lanes>(l: L, words: &[u32], out: &mut [f32]) {
        let code_words = words.len() - 1;
        let params = words[code_words];
        let (scale, bias) = (l.half(params as u16), l.half((params >> 16) as u16));
        super::unpack::nibbles(l, &words[..code_words], out, Affine::ScaleBias(scale, bias));
    }

    fn error_bounds(row: &[f32]) -> Vec<f32> {
        let (min, max) = super::min_max(row);
        vec![int4_error_bound(min, max); row.len()]
    }

    const OCTETS: bool = true;

    #[inline(always)]
    fn octet<L: Lanes>(l: L, words: &[u32], k: usize, _dim: usize) -> L::F {
        let params = words[words.len() - 1];
        let (scale, bias) = (l.half(params as u16), l.half((params >> 16) as u16));
        Affine::ScaleBias(scale, bias).lanes(l, l.fields::<4>(words[k]))
    }
}

/// FBGEMM's fp16 scale and bias of values `values` with this minimum and maximum, for codes
/// `0 ..= levels`: `bias = fp16(min)`, `scale = fp16((max − bias) / levels)`, 1 for constant values
/// or a scale whose inverse overflows. [`EncodeError::OutOfRange`] (with its column in `values`)
/// when the minimum or maximum is beyond fp16.
pub(crate) fn fp16_scale_bias(values: &[f32], min: f32, max: f32, levels: f32) -> Result<(f16, f16), EncodeError> {
    for v in [min, max] {
        if f16::from_f32(v).is_infinite() {
            let col = values.iter().position(|&x| x == v).unwrap_or(0);
            return Err(EncodeError::OutOfRange { col, value: v });
        }
    }
    let bias = f16::from_f32(min);
    let range = max - bias.to_f32();
    let scale = f16::from_f32(if range == 0.0 { 1.0 } else { range / levels });
    let s = scale.to_f32();
    if s == 0.0 || (1.0 / s).is_infinite() {
        return Ok((f16::ONE, bias));
    }
    Ok((scale, bias))
}

/// The documented error bound of [`Int4`] for a row with this minimum and maximum.
pub fn int4_error_bound(min: f32, max: f32) -> f32 {
    fp16_scale_bias_bound(min, max, 15.0)
}

/// The bound on `|x − x̂|` of values between `min` and `max` coded as `0 ..= levels` with
/// [`fp16_scale_bias`]'s scale and bias: half a step, plus the clamp of the top code when the
/// fp16 scale rounded down (`levels` half-ulps of the scale), plus the rounding of the bias.
pub(crate) fn fp16_scale_bias_bound(min: f32, max: f32, levels: f32) -> f32 {
    let ulp16 = |x: f32| -> f32 {
        let h = f16::from_f32(x.abs());
        (f16::from_bits(h.to_bits() + 1).to_f32() - h.to_f32()).abs()
    };
    let scale = ((max - min) / levels).max(f32::MIN_POSITIVE);
    scale / 2.0 + (levels / 2.0 + 1.0).floor() * ulp16(scale) + ulp16(min) + min.abs().max(max.abs()) * (2f32).powi(-20)
}
