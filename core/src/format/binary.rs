//! Binary: one bit per value, `bit = x > 0`, packed exactly as `numpy.packbits` does (the
//! sentence-transformers `ubinary` convention): element `i` is bit `7 − i mod 8` (MSB-first) of
//! byte `i / 8`, bytes in little-endian order within each word, the last byte zero-padded.
//!
//! [`Binary`] decodes to `+1` / `−1`. [`BinaryScaled`] stores one more word, the row's mean |x|
//! as f32, and decodes to `±scale`, the least-squares best multiple of the signs.
//!
//! Error bound: the sign is kept (`x > 0 ⇒ x̂ > 0`, `x ≤ 0 ⇒ x̂ < 0`) and `|x̂|` is 1 (or the scale),
//! so `|x − x̂| = ||x| − |x̂||` for `x ≠ 0` and `|x̂|` for `x = 0`.

use super::{check_finite, Codec, EncodeError, Format};
use crate::simd::Lanes;

/// Sign bits only; decodes to ±1.
pub struct Binary;

/// Sign bits plus an f32 per-row scale (mean |x|); decodes to ±scale.
pub struct BinaryScaled;

/// Bit position of element `i` (within its word) in packbits order.
#[inline(always)]
pub(crate) fn bit_shift(i: usize) -> u32 {
    let byte = (i / 8) % 4;
    (8 * byte + 7 - i % 8) as u32
}

fn encode_bits(row: &[f32], out: &mut [u32]) {
    let word = |values: &[f32]| values.iter().enumerate().fold(0u32, |w, (j, &x)| w | ((x > 0.0) as u32) << bit_shift(j));
    // Whole words of 32 values, each a loop of known length the compiler unrolls and vectorises.
    let (whole, tail) = row.as_chunks::<32>();
    for (o, values) in out.iter_mut().zip(whole) {
        *o = word(values);
    }
    if let Some(o) = out.get_mut(whole.len()) {
        *o = word(tail);
    }
}

/// Value `i` is `scale` where bit `i` is set, else `−scale`.
fn decode_bits_reference(words: &[u32], scale: f32, out: &mut [f32]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = if (words[i / 32] >> bit_shift(i % 32)) & 1 == 1 { scale } else { -scale };
    }
}

/// [`decode_bits_reference`], in whole words of 32 values (a loop the compiler vectorises on
/// every level as it is: no [`Lanes`] needed).
#[inline(always)]
fn decode_bits(words: &[u32], scale: f32, out: &mut [f32]) {
    // Branch-free: a clear bit flips the sign bit of `scale`.
    let s = scale.to_bits();
    let value = |w: u32, j: usize| f32::from_bits(s ^ ((!(w >> bit_shift(j)) & 1) << 31));
    let full = out.len() / 32;
    let mut chunks = out.chunks_exact_mut(32);
    for (dst, &w) in (&mut chunks).zip(words) {
        for (j, o) in dst.iter_mut().enumerate() {
            *o = value(w, j);
        }
    }
    for (j, o) in chunks.into_remainder().iter_mut().enumerate() {
        *o = value(words[full], j);
    }
}

/// Values `8k .. 8k + 8` of a row's sign bits (`codes`): byte `k`, its bits MSB first, each
/// `scale` where set and `scale` with its sign bit flipped where clear — [`decode_bits`]' bits.
#[inline(always)]
fn octet_bits<L: Lanes>(l: L, codes: &[u32], k: usize, scale: f32) -> L::F {
    let byte = (codes[k / 4] >> (8 * (k % 4))) & 0xff;
    let set = l.and(l.splat_i(byte), l.bytes(&[128, 64, 32, 16, 8, 4, 2, 1]));
    let clear = l.eq(set, l.splat_i(0));
    let s = scale.to_bits();
    l.bitcast_f(l.select(clear, l.splat_i(s ^ 0x8000_0000), l.splat_i(s)))
}

/// Reads packbits bytes (then the parameters) as [`Codec::read_external`] does, clearing the bits
/// past `dim` in the last byte so that equal rows have equal words.
fn read_bits_external<C: Codec>(src: &[u8], dim: usize, out: &mut [u32]) {
    let code_words = C::code_words(dim);
    let code_bytes = dim.div_ceil(8);
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
    bytes[..code_bytes].copy_from_slice(&src[..code_bytes]);
    if !dim.is_multiple_of(8) {
        bytes[code_bytes - 1] &= 0xffu8 << (8 - dim % 8);
    }
    bytes[4 * code_words..].copy_from_slice(&src[code_bytes..]);
}

/// Bounds of a row whose values decode to ±`s`: a sign is kept, the magnitude becomes `s`.
fn sign_error_bounds(row: &[f32], s: f32) -> Vec<f32> {
    row.iter().map(|&x| if x == 0.0 { s } else { (x.abs() - s).abs() }).collect()
}

impl Codec for Binary {
    const FORMAT: Format = Format::Binary;
    const NAME: &'static str = "binary";
    const ALIASES: &'static [&'static str] = &["bin"];
    const CODE_BITS: usize = 1;
    const PARAM_BITS: usize = 0;

    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        check_finite(row)?;
        encode_bits(row, out);
        Ok(())
    }

    fn decode_row_reference(words: &[u32], out: &mut [f32]) {
        decode_bits_reference(words, 1.0, out)
    }

    #[inline(always)]
    fn decode<L: Lanes>(_: L, words: &[u32], out: &mut [f32]) {
        decode_bits(words, 1.0, out)
    }

    const OCTETS: bool = true;

    #[inline(always)]
    fn octet<L: Lanes>(l: L, words: &[u32], k: usize, _dim: usize) -> L::F {
        octet_bits(l, words, k, 1.0)
    }

    fn error_bounds(row: &[f32]) -> Vec<f32> {
        sign_error_bounds(row, 1.0)
    }

    fn read_external(src: &[u8], dim: usize, out: &mut [u32]) {
        read_bits_external::<Self>(src, dim, out)
    }
}

impl Codec for BinaryScaled {
    const FORMAT: Format = Format::BinaryScaled;
    const NAME: &'static str = "binary+scale";
    const ALIASES: &'static [&'static str] = &["binary-scaled", "binary_scaled"];
    const CODE_BITS: usize = 1;
    const PARAM_BITS: usize = 32;

    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        check_finite(row)?;
        let code_words = out.len() - 1;
        encode_bits(row, &mut out[..code_words]);
        let sum: f64 = row.iter().map(|x| x.abs() as f64).sum();
        out[code_words] = ((sum / row.len() as f64) as f32).to_bits();
        Ok(())
    }

    fn decode_row_reference(words: &[u32], out: &mut [f32]) {
        let code_words = words.len() - 1;
        decode_bits_reference(&words[..code_words], f32::from_bits(words[code_words]), out)
    }

    #[inline(always)]
    fn decode<L: Lanes>(_: L, words: &[u32], out: &mut [f32]) {
        let code_words = words.len() - 1;
        decode_bits(&words[..code_words], f32::from_bits(words[code_words]), out)
    }

    const OCTETS: bool = true;

    /// The scale is read again for each octet: one load, against decoding the row first.
    #[inline(always)]
    fn octet<L: Lanes>(l: L, words: &[u32], k: usize, dim: usize) -> L::F {
        octet_bits(l, words, k, f32::from_bits(words[Self::code_words(dim)]))
    }

    fn error_bounds(row: &[f32]) -> Vec<f32> {
        // The stored scale, computed as the encoder does.
        sign_error_bounds(row, (row.iter().map(|v| v.abs() as f64).sum::<f64>() / row.len() as f64) as f32)
    }

    fn read_external(src: &[u8], dim: usize, out: &mut [u32]) {
        read_bits_external::<Self>(src, dim, out)
    }
}
