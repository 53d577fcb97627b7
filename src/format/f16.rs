//! FP16: IEEE binary16, two values per word, element `2k` in the low half. Encoding rounds to
//! nearest even; the GPU decodes with `unpack2x16float`, so the optional `shader-f16` feature is
//! not needed.
//!
//! Error bound: `|x − x̂| ≤ max(2⁻¹¹·|x|, 2⁻²⁵)` (half an ulp of a normal half, or of the
//! subnormal spacing 2⁻²⁴). Finite values that round beyond ±65504 are [`EncodeError::OutOfRange`].

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::{Codec, EncodeError, Format};

/// Half-precision rows.
pub struct F16;

impl Codec for F16 {
    const FORMAT: Format = Format::F16;
    const VALUES_PER_WORD: usize = 2;
    const PARAM_WORDS: usize = 0;

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

    #[inline(always)]
    fn decode_row(words: &[u32], out: &mut [f32]) {
        // Little-endian words: half k of the row is the k-th f16 of the word slice. half's slice
        // conversion uses F16C when the CPU has it (exact, like the scalar path).
        let halves: &[f16] = bytemuck::cast_slice(words);
        halves[..out.len()].convert_to_f32_slice(out);
    }
}

/// Half an ulp of `x` in FP16: the bound of [`F16`] rounding at `x`.
pub fn f16_half_ulp(x: f32) -> f32 {
    (x.abs() * (2f32).powi(-11)).max((2f32).powi(-25))
}
