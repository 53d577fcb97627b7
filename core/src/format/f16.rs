//! FP16: IEEE binary16, two values per word, element `2k` in the low half. Encoding rounds to
//! nearest even; the GPU decodes with `unpack2x16float`, so the optional `shader-f16` feature is
//! not needed.
//!
//! Error bound: `|x − x̂| ≤ max(2⁻¹¹·|x|, 2⁻²⁵)` (half an ulp of a normal half, or of the
//! subnormal spacing 2⁻²⁴). Finite values that round beyond ±65504 are [`EncodeError::OutOfRange`].

use half::f16;

use super::{Codec, EncodeError, Format};
pub(super) use crate::simd::half_to_f32;
use crate::simd::Lanes;

/// Half-precision rows.
pub struct F16;

impl Codec for F16 {
    const FORMAT: Format = Format::F16;
    const NAME: &'static str = "fp16";
    const ALIASES: &'static [&'static str] = &["f16"];
    const CODE_BITS: usize = 16;
    const PARAM_BITS: usize = 0;
    const GGML_TYPE: Option<u32> = Some(1);

    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        super::check_finite(row)?;
        for (k, o) in out.iter_mut().enumerate() {
            let mut word = 0u32;
            for j in 0..2 {
                let col = 2 * k + j;
                if let Some(&x) = row.get(col) {
                    let h = f16::from_f32(x);
                    if h.is_infinite() {
                        return Err(EncodeError::OutOfRange { col, value: x });
                    }
                    word |= (h.to_bits() as u32) << (16 * j);
                }
            }
            *o = word;
        }
        Ok(())
    }

    fn decode_row_reference(words: &[u32], out: &mut [f32]) {
        // Little-endian words: half k of the row is the k-th u16 of the word slice.
        let halves: &[u16] = bytemuck::cast_slice(words);
        for (o, &h) in out.iter_mut().zip(halves) {
            *o = f16::from_bits(h).to_f32();
        }
    }

    const OCTETS: bool = true;

    #[inline(always)]
    fn octet<L: Lanes>(l: L, words: &[u32], k: usize, _dim: usize) -> L::F {
        let halves: &[u16] = bytemuck::cast_slice(&words[4 * k..4 * k + 4]);
        l.halves(halves.try_into().expect("8 halves"))
    }

    #[inline(always)]
    fn decode<L: Lanes>(l: L, words: &[u32], out: &mut [f32]) {
        let halves: &[u16] = bytemuck::cast_slice(words);
        let (octets, tail) = out.as_chunks_mut::<8>();
        let (codes, _) = halves.as_chunks::<8>();
        for (o, h) in octets.iter_mut().zip(codes) {
            l.store(l.halves(h), o);
        }
        for (o, &h) in tail.iter_mut().zip(&halves[8 * octets.len()..]) {
            *o = l.half(h);
        }
    }

    fn error_bounds(row: &[f32]) -> Vec<f32> {
        row.iter().map(|&x| f16_half_ulp(x)).collect()
    }
}

/// Half an ulp of `x` in FP16: the bound of [`F16`] rounding at `x`.
pub fn f16_half_ulp(x: f32) -> f32 {
    (x.abs() * (2f32).powi(-11)).max((2f32).powi(-25))
}
