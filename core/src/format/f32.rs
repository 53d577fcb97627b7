//! FP32: the values themselves, one per word. Exact; NaN and infinities are rejected so that a
//! table never carries a value the other formats could not encode.

use super::{check_finite, Codec, EncodeError, Format};
use crate::simd::Lanes;

/// Plain `f32` rows.
pub struct F32;

impl Codec for F32 {
    const FORMAT: Format = Format::F32;
    const NAME: &'static str = "fp32";
    const ALIASES: &'static [&'static str] = &["f32"];
    const CODE_BITS: usize = 32;
    const PARAM_BITS: usize = 0;
    const GGML_TYPE: Option<u32> = Some(0);

    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        check_finite(row)?;
        for (o, x) in out.iter_mut().zip(row) {
            *o = x.to_bits();
        }
        Ok(())
    }

    fn decode_row_reference(words: &[u32], out: &mut [f32]) {
        for (o, w) in out.iter_mut().zip(words) {
            *o = f32::from_bits(*w);
        }
    }

    const OCTETS: bool = true;

    #[inline(always)]
    fn octet<L: Lanes>(l: L, words: &[u32], k: usize, _dim: usize) -> L::F {
        let values: &[u32; 8] = words[8 * k..8 * k + 8].try_into().expect("8 words");
        l.load(bytemuck::cast_ref(values))
    }

    #[inline(always)]
    fn decode<L: Lanes>(_: L, words: &[u32], out: &mut [f32]) {
        out.copy_from_slice(bytemuck::cast_slice(&words[..out.len()]));
    }

    fn error_bounds(row: &[f32]) -> Vec<f32> {
        vec![0.0; row.len()]
    }

    #[inline(always)]
    fn pool_row<L: Lanes>(_: L, words: &[u32], w: f32, max: bool, acc: &mut [f32], _scratch: &mut [f32]) {
        super::pool_values(acc, words.iter().map(|&x| f32::from_bits(x)), w, max);
    }
}
