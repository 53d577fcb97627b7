//! FP8 with an f32 scale per row: `fp8_e4m3` and `fp8_e5m2`, the OCP 8-bit floats (ml_dtypes'
//! `float8_e4m3fn` and `float8_e5m2`).
//!
//! | format | bits (sign, exponent, mantissa) | bias | largest | smallest subnormal | special |
//! |--------|------|------|---------|--------------------|---------|
//! | `fp8_e4m3` | 1, 4, 3 | 7 | 448 | 2⁻⁹ | `S.1111.111` is NaN; no infinities |
//! | `fp8_e5m2` | 1, 5, 2 | 15 | 57344 | 2⁻¹⁶ | exponent 31: ±inf and NaN, as IEEE |
//!
//! Per row: `scale = max|x| / largest`, rounded to 20 significant bits (1 when the row is all
//! zeros), and `code = fp8(clamp(x / scale, −largest, largest))`: round to nearest, ties to even,
//! saturating — the codes equal ml_dtypes' casts of the clamped scaled values bit for bit
//! (`core/tests/fp8.rs`, with a fixture made by `scripts/fixtures/make_fp8_fixtures.py`). A negative value that
//! rounds to zero keeps its sign (code `0x80`), as ml_dtypes does. The codes are stored one per
//! byte (element `4k + j` in byte `j` of word `k`), then the f32 scale. Decoding is
//! `fp8_value(code) · scale`: a code has at most 4 significant bits and the scale 20, so the product
//! is exact in f32 and GPU and CPU agree bit for bit (for rows whose decoded values are f32
//! normals: a row whose largest magnitude is below about 10⁻³⁵ decodes to f32 subnormals, which
//! some GPUs flush to zero).
//!
//! Error bound: `|x − x̂| ≤ 2⁻⁴·|x| + 2⁻¹⁰·scale + 2⁻¹⁰·max|x|` for e4m3 (half a 3-bit mantissa's
//! step, half the smallest subnormal step, and what the scale's rounding to 20 bits can saturate),
//! and `2⁻³·|x| + 2⁻¹⁷·scale + 2⁻¹⁰·max|x|` for e5m2. Rows whose scale would overflow f32 cannot
//! exist (the scale is smaller than `max|x|`).

use super::{check_finite, Codec, EncodeError, Format};
use crate::simd::Lanes;

/// An OCP FP8 format with an f32 scale per row: e5m2 when `E5M2`, else e4m3 (`e4m3fn`).
pub struct Fp8<const E5M2: bool>;

/// OCP FP8 E4M3 (ml_dtypes `float8_e4m3fn`) with an f32 scale per row.
pub type Fp8E4M3 = Fp8<false>;
/// OCP FP8 E5M2 (ml_dtypes `float8_e5m2`) with an f32 scale per row.
pub type Fp8E5M2 = Fp8<true>;

impl<const E5M2: bool> Fp8<E5M2> {
    /// Mantissa bits.
    const MANTISSA: u32 = if E5M2 { 2 } else { 3 };
    /// Exponent bias.
    const BIAS: i32 = if E5M2 { 15 } else { 7 };
    /// The largest finite value.
    pub const MAX: f32 = if E5M2 { 57344.0 } else { 448.0 };
    /// The largest finite code (positive).
    const MAX_CODE: u8 = if E5M2 { 0x7B } else { 0x7E };

    /// The value of a code (NaN for e4m3's `0x7F`/`0xFF`; ±inf and NaN for e5m2's exponent 31).
    pub fn to_f32(code: u8) -> f32 {
        let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
        let e = ((code & 0x7F) >> Self::MANTISSA) as i32;
        let m = (code & ((1 << Self::MANTISSA) - 1)) as f32;
        let top = (1 << (7 - Self::MANTISSA)) - 1;
        if e == top && (E5M2 || m == 7.0) {
            return if E5M2 && m == 0.0 { sign * f32::INFINITY } else { f32::NAN };
        }
        let frac = 2f32.powi(Self::MANTISSA as i32);
        let v = if e == 0 { m / frac * 2f32.powi(1 - Self::BIAS) } else { (1.0 + m / frac) * 2f32.powi(e - Self::BIAS) };
        sign * v
    }

    /// `x` (not NaN) as the nearest code, ties to even, saturating at ±[`Self::MAX`]; a value that
    /// rounds to zero keeps its sign.
    pub fn from_f32(x: f32) -> u8 {
        let sign = if x.is_sign_negative() { 0x80 } else { 0 };
        let a = x.abs();
        if a >= Self::MAX {
            return sign | Self::MAX_CODE;
        }
        // The step of the binade holding a (the subnormal step below the smallest normal).
        let min_normal_exp = 1 - Self::BIAS;
        let exp = if a == 0.0 { min_normal_exp } else { ((a.to_bits() >> 23) as i32 - 127).max(min_normal_exp) };
        let step = 2f32.powi(exp - Self::MANTISSA as i32);
        // a / step < 2^(MANTISSA+1): exact, and round_ties_even of it is the code's significand.
        let n = (a / step).round_ties_even();
        let r = n * step;
        if r >= Self::MAX {
            return sign | Self::MAX_CODE;
        }
        if r < 2f32.powi(min_normal_exp) {
            // Subnormal (or zero): the significand is the code.
            return sign | n as u8;
        }
        let bits = r.to_bits();
        let e = ((bits >> 23) as i32 - 127 + Self::BIAS) as u32;
        let m = (bits >> (23 - Self::MANTISSA)) & ((1 << Self::MANTISSA) - 1);
        sign | (e << Self::MANTISSA | m) as u8
    }

    /// [`Self::to_f32`] of eight codes, in lanes, without a table or a branch: the exponent and
    /// mantissa bits are moved into f32's places and rescaled by 2^(127 − bias) — which also makes
    /// the subnormals exact — the sign put back, and the special codes (e4m3's NaN, e5m2's
    /// infinities and NaNs) chosen by a select, with the same bits as the table: ±inf, and
    /// `f32::NAN` whatever the sign.
    #[inline(always)]
    fn values<L: Lanes>(l: L, code: L::I) -> L::F {
        let c = |x: u32| l.splat_i(x);
        let em = l.and(code, c(0x7F));
        let magnitude = l.bitcast_i(l.mul(l.bitcast_f(l.shl(em, 23 - Self::MANTISSA)), l.splat(Self::RESCALE)));
        let sign = l.shl(l.and(code, c(0x80)), 24);
        let signed = l.or(magnitude, sign);
        let nan = c(f32::NAN.to_bits());
        let bits = if E5M2 {
            let inf = l.or(c(0x7F80_0000), sign);
            l.select(l.gt(em, c(0x7C)), nan, l.select(l.eq(em, c(0x7C)), inf, signed))
        } else {
            l.select(l.eq(em, c(0x7F)), nan, signed)
        };
        l.bitcast_f(bits)
    }

    /// 2^(127 − bias): a code's exponent and mantissa bits in f32's places, times this, are its
    /// magnitude.
    const RESCALE: f32 = f32::from_bits(((254 - Self::BIAS) as u32) << 23);

    /// [`Self::values`] times `scale` of eight codes none of which is special, from their bytes
    /// sign-extended ([`Lanes::signed_bytes`]), where `rescale` is [`Self::RESCALE`] times `scale`:
    /// one shift moves the exponent and mantissa bits into f32's places and the sign into bit 31,
    /// one mask clears the sign's copies between them, and one product rescales (its sign is the
    /// code's, as `rescale` is positive). The same bits as `values(code) · scale` wherever
    /// `rescale` is positive, finite and normal: that product is then exact, or the same single
    /// rounding. Three operations on eight lanes where [`Self::values`] and the scale's product take
    /// nine (e4m3) or twelve (e5m2).
    #[inline(always)]
    fn plain_values<L: Lanes>(l: L, signed: L::I, rescale: L::F) -> L::F {
        let mask = 0x8000_0000 | 0x7F << (23 - Self::MANTISSA);
        l.mul(l.bitcast_f(l.and(l.shl(signed, 23 - Self::MANTISSA), l.splat_i(mask))), rescale)
    }

    /// Whether any of `codes` is special (e4m3's NaN, e5m2's infinities and NaNs): a special
    /// code's bits under the sign are all ones from the exponent down (`0x7F`, `0x7C`), and adding
    /// one at the lowest of them carries into bit 7 for it alone. A loop the compiler runs a
    /// vector of bytes at a time.
    #[inline(always)]
    fn any_special(codes: &[u8]) -> bool {
        let (bits, one) = if E5M2 { (0x7C, 0x04) } else { (0x7F, 0x01) };
        codes.iter().fold(0u8, |acc, &b| acc | ((b & bits) + one)) & 0x80 != 0
    }

    /// The values of all 256 codes.
    fn table() -> &'static [f32; 256] {
        if E5M2 {
            static T: std::sync::OnceLock<[f32; 256]> = std::sync::OnceLock::new();
            T.get_or_init(|| std::array::from_fn(|c| Fp8::<true>::to_f32(c as u8)))
        } else {
            static T: std::sync::OnceLock<[f32; 256]> = std::sync::OnceLock::new();
            T.get_or_init(|| std::array::from_fn(|c| Fp8::<false>::to_f32(c as u8)))
        }
    }

    /// The scale of a row whose largest magnitude is `max_abs`.
    fn scale(max_abs: f32) -> f32 {
        if max_abs == 0.0 {
            return 1.0;
        }
        // 20 significant bits (half-up on the 4 dropped), so code · scale is exact.
        f32::from_bits(((max_abs / Self::MAX).to_bits() + 0x8) & !0xF)
    }
}

impl<const E5M2: bool> Codec for Fp8<E5M2> {
    const FORMAT: Format = if E5M2 { Format::Fp8E5M2 } else { Format::Fp8E4M3 };
    const NAME: &'static str = if E5M2 { "fp8_e5m2" } else { "fp8_e4m3" };
    const ALIASES: &'static [&'static str] = if E5M2 { &["e5m2"] } else { &["e4m3", "fp8"] };
    const CODE_BITS: usize = 8;
    const PARAM_BITS: usize = 32;

    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        check_finite(row)?;
        let max_abs = row.iter().fold(0f32, |m, x| m.max(x.abs()));
        let scale = Self::scale(max_abs);
        let code_words = out.len() - 1;
        let codes: &mut [u8] = bytemuck::cast_slice_mut(&mut out[..code_words]);
        codes.fill(0);
        for (q, &x) in codes.iter_mut().zip(row) {
            *q = Self::from_f32(x / scale);
        }
        out[code_words] = scale.to_bits();
        Ok(())
    }

    #[inline(always)]
    fn decode<L: Lanes>(l: L, words: &[u32], out: &mut [f32]) {
        let code_words = words.len() - 1;
        let scale = f32::from_bits(words[code_words]);
        let bytes: &[u8] = bytemuck::cast_slice(&words[..code_words]);
        let dim = out.len();
        let (octets, tail) = out.as_chunks_mut::<8>();
        let (codes, _) = bytes.as_chunks::<8>();
        let s = l.splat(scale);
        let rescale = Self::RESCALE * scale;
        if scale > 0.0 && rescale.is_normal() && !Self::any_special(&bytes[..dim]) {
            let r = l.splat(rescale);
            for (o, c) in octets.iter_mut().zip(codes) {
                l.store(Self::plain_values(l, l.signed_bytes(c), r), o);
            }
        } else {
            for (o, c) in octets.iter_mut().zip(codes) {
                l.store(l.mul(Self::values(l, l.bytes(c)), s), o);
            }
        }
        if !tail.is_empty() {
            // The last codes, padded to eight, through the same lanes.
            let (mut codes, mut values) = ([0u8; 8], [0f32; 8]);
            let rest = &bytes[8 * octets.len()..][..tail.len()];
            codes[..rest.len()].copy_from_slice(rest);
            l.store(l.mul(Self::values(l, l.bytes(&codes)), s), &mut values);
            tail.copy_from_slice(&values[..tail.len()]);
        }
    }

    fn decode_row_reference(words: &[u32], out: &mut [f32]) {
        let code_words = words.len() - 1;
        let scale = f32::from_bits(words[code_words]);
        let bytes: &[u8] = bytemuck::cast_slice(&words[..code_words]);
        let table = Self::table();
        for (o, &q) in out.iter_mut().zip(bytes) {
            *o = table[q as usize] * scale;
        }
    }

    fn error_bounds(row: &[f32]) -> Vec<f32> {
        let max_abs = row.iter().fold(0f32, |m, x| m.max(x.abs()));
        let scale = Self::scale(max_abs);
        let (relative, subnormal) = if E5M2 { (2f32.powi(-3), 2f32.powi(-17)) } else { (2f32.powi(-4), 2f32.powi(-10)) };
        row.iter().map(|x| x.abs() * relative + subnormal * scale + max_abs * 2f32.powi(-10)).collect()
    }
}
