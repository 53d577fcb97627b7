//! ggml's k-quant super-blocks (llama.cpp, GGUF files): `q4_k` and `q6_k`.
//!
//! A row is cut into super-blocks of 256 values with one fp16 scale `d` (and, for `q4_k`, one fp16
//! `dmin`), and smaller sub-blocks whose own scales are integers multiplying them:
//!
//! | format | sub-block | sub-block parameters | code `q` | value | bytes per 256 in GGUF |
//! |--------|-----------|----------------------|----------|-------|-----------------------|
//! | `q4_k` | 32 values | 6-bit `sc`, 6-bit `m` | `0 ..= 15` | `(d·sc)·q − dmin·m` | 144: `d`, `dmin`, 12 bytes of `sc`/`m`, 128 of nibbles |
//! | `q6_k` | 16 values | signed 8-bit `sc` | `0 ..= 63` | `(d·sc)·(q − 32)` | 210: 128 bytes of low nibbles, 64 of high bits, 16 of `sc`, `d` |
//!
//! edo keeps each super-block's parameter bytes exactly as GGUF holds them (for `q4_k` its first
//! 16 bytes, for `q6_k` its last 18), one super-block after another after all the codes, and
//! repacks the codes to whole words in element order: value `8k + j` of a super-block in nibble
//! `j` of its word `k` and, for `q6_k`, the top two bits of value `16k + j` at bits `2j` of word
//! `32 + k`. [`Codec::write_external`] and [`Codec::read_external`] convert to and from GGUF's
//! blocks byte for byte.
//!
//! A row whose width is not a multiple of 256 (GGUF files hold none) is quantised as if its last
//! super-block were zero-padded, but stores only the sub-blocks its values reach: for `q4_k` the
//! first ⌈n/32⌉ · 4 words of the super-block's nibbles, for `q6_k` ⌈n/16⌉ · 2 words of nibbles and
//! then ⌈n/16⌉ words of top bits (value `16k + j`'s at bits `2j` of word `2⌈n/16⌉ + k`), and the
//! whole parameter bytes. At dim 128 a row is then 80 bytes of `q4_k` and 116 of `q6_k`, not the
//! padded super-block's 144 and 212 (INT8's is 136). Table files that earlier builds wrote with the
//! padded layout are refused with a typed error that says so (their rows have another width).
//!
//! Decoding is exact but for one rounding: `d · sc` has at most 11 + 7 significant bits and
//! `(d · sc) · q` at most 23, so both products are exact in f32 and `q6_k` values have no rounding
//! at all, while `q4_k`'s one rounding is the subtraction of `dmin · m` (exact too). GPU and CPU
//! agree bit for bit, fused multiply-add or not, and both equal the `gguf` package's
//! `quants.dequantize` (0.19.0).
//!
//! Encoding is a port of ggml's reference quantisers (`quantize_row_q4_K_ref`,
//! `quantize_row_q6_K_ref` in `ggml-quants.c`) in f32 arithmetic step for step: per sub-block a
//! search for the scale (and minimum) of least weighted squared error (`make_qkx2_quants`,
//! `make_qx_quants`), the sub-block scales quantised against the super-block's largest, then every
//! value requantised with the scales as stored. The `gguf` package has no k-quant quantiser to
//! compare bytes with, and a C compiler that fuses multiply-adds can round ggml's own search
//! differently; what the tests check is the error bound below and that GGUF's blocks round-trip.
//!
//! Error bound: k-quants can clip (the search trades an outlier's error for everyone else's), so
//! the bound is per super-block, not per value's step: `|x − x̂| ≤ R / 8` for `q4_k` and
//! `|x − x̂| ≤ A / 16` for `q6_k`, with `R` the super-block's range `max(max, 0) − min(min, 0)`
//! and `A` its largest magnitude (about two of the largest sub-block's steps), plus what the fp16
//! scale's rounding adds (`1008 · ½ulp₁₆(R / 945)`, `4064 · ½ulp₁₆(A / 4096)`: tiny super-blocks
//! round it to zero); checked on rows of many shapes by the tests. Values whose super-block scale would overflow fp16 are
//! [`EncodeError::OutOfRange`].

use half::f16;

use super::f16::{f16_half_ulp, half_to_f32};
use super::unpack::{Affine, Groups};
use super::{block_code_words, check_finite, min_max, Codec, EncodeError, Format};
use crate::simd::Lanes;

/// Values per k-quant super-block.
pub const QK_K: usize = 256;

/// A ggml k-quant format of `BITS`-bit codes: 4 (`q4_k`) or 6 (`q6_k`).
pub struct KBlock<const BITS: usize>;

/// ggml `Q4_K`: 4-bit codes; per 256 values an fp16 scale and minimum, and per 32 a 6-bit scale
/// and minimum multiplying them (4.5 bits per value).
pub type Q4K = KBlock<4>;
/// ggml `Q6_K`: 6-bit codes; per 256 values an fp16 scale, per 16 a signed 8-bit scale
/// multiplying it (6.5625 bits per value).
pub type Q6K = KBlock<6>;

/// ggml's `nearest_int`: rounds half to even through the float's mantissa. ggml asserts
/// `|x| ≤ 4194303`; beyond it (never for the finite rows edo quantises) this clamps first.
#[inline(always)]
fn nearest_int(x: f32) -> i32 {
    let v = x.clamp(-4_194_303.0, 4_194_303.0) + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// ggml's `make_qkx2_quants` with `use_mad = false`: the scale and (negated) minimum of least
/// weighted squared error for codes `0 ..= nmax` over `x`, trying `nstep + 1` inverse scales from
/// `(nmax + rmin) / range` in steps of `rdelta / range`; the codes go to `l`.
#[allow(clippy::too_many_arguments)]
fn make_qkx2_quants(x: &[f32], weights: &[f32], nmax: i32, rmin: f32, rdelta: f32, nstep: i32, l: &mut [u8]) -> (f32, f32) {
    let n = x.len();
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        min = if x[i] < min { x[i] } else { min };
        max = if x[i] > max { x[i] } else { max };
        sum_w += weights[i];
        sum_x += weights[i] * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0f32;
    for i in 0..n {
        let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l[i] = q as u8;
        let diff = scale * q as f32 + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    let mut aux = [0u8; 32];
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            aux[i] = q as u8;
            let (w, q) = (weights[i], q as f32);
            sum_l += w * q;
            sum_l2 += w * q * q;
            sum_xl += w * q * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut error = 0f32;
            for i in 0..n {
                let diff = this_scale * aux[i] as f32 + this_min - x[i];
                error += weights[i] * (diff * diff);
            }
            if error < best_error {
                l[..n].copy_from_slice(&aux[..n]);
                best_error = error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// ggml's `make_qx_quants` with `rmse_type = 1` and no importance weights (weights `x²`): the
/// scale of least weighted squared error for signed codes `−nmax ..= nmax − 1` over `x`; the codes
/// plus `nmax` go to `l`.
fn make_qx_quants(x: &[f32], nmax: i32, l: &mut [u8]) -> f32 {
    let (mut max, mut amax) = (0f32, 0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < 1e-15 {
        l.fill(0);
        return 0.0;
    }
    let code = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let sums = |iscale: f32| {
        x.iter().fold((0f32, 0f32), |(sumlx, suml2), &v| {
            let (w, q) = (v * v, code(iscale, v) as f32);
            (sumlx + w * v * q, suml2 + w * q * q)
        })
    };
    let mut iscale = -(nmax as f32) / max;
    let (sumlx, suml2) = sums(iscale);
    for (o, &v) in l.iter_mut().zip(x) {
        *o = (code(iscale, v) + nmax) as u8;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&is| is != 0) {
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (o, &v) in l.iter_mut().zip(x) {
                *o = (code(iscale, v) + nmax) as u8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

impl<const BITS: usize> KBlock<BITS> {
    /// Code words per super-block.
    const BLOCK_WORDS: usize = QK_K * BITS / 32;
    /// Values per sub-block: the unit a row's last super-block stores whole.
    const SUB: usize = if BITS == 4 { 32 } else { 16 };
    /// Code words per sub-block: four words of nibbles for `q4_k`; two of nibbles and one of top
    /// bits for `q6_k`.
    const SUB_WORDS: usize = Self::SUB * BITS / 32;
    /// Parameter bytes per super-block (as in GGUF).
    const PARAM_BYTES: usize = if BITS == 4 { 16 } else { 18 };

    /// `q4_k`'s 6-bit scale and minimum of sub-block `j` from the 12 packed bytes (ggml's
    /// `get_scale_min_k4`).
    #[inline(always)]
    fn scale_min(q: &[u8], j: usize) -> (u8, u8) {
        if j < 4 {
            (q[j] & 63, q[j + 4] & 63)
        } else {
            ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
        }
    }

    /// Sub-blocks stored for a super-block of `n` values (16 or 8 for a whole one).
    #[inline(always)]
    fn subs(n: usize) -> usize {
        n.div_ceil(Self::SUB)
    }

    /// Code words of a super-block of `n` values: whole sub-blocks, so a row's last super-block
    /// stores only those its values reach.
    fn block_words(n: usize) -> usize {
        Self::subs(n) * Self::SUB_WORDS
    }

    /// The code words of each super-block of a row of `dim` values, in order.
    fn blocks(codes: &[u32], dim: usize) -> impl Iterator<Item = &[u32]> {
        (0..dim.div_ceil(QK_K)).map(move |g| &codes[g * Self::BLOCK_WORDS..][..Self::block_words((dim - g * QK_K).min(QK_K))])
    }

    /// The codes of a super-block's words (of [`Self::block_words`] for its values); values past
    /// its stored sub-blocks are 0.
    fn codes(words: &[u32]) -> [u8; QK_K] {
        let stored = words.len() / Self::SUB_WORDS * Self::SUB;
        std::array::from_fn(|i| {
            if i >= stored {
                return 0;
            }
            let low = (words[i / 8] >> (4 * (i % 8))) & 0xF;
            let high = if BITS == 6 { ((words[2 * stored / 16 + i / 16] >> (2 * (i % 16))) & 3) << 4 } else { 0 };
            (low | high) as u8
        })
    }

    /// Writes a super-block's codes into its (zeroed) words, as many as they store.
    fn put_codes(codes: &[u8; QK_K], words: &mut [u32]) {
        let stored = words.len() / Self::SUB_WORDS * Self::SUB;
        for (i, &q) in codes[..stored].iter().enumerate() {
            words[i / 8] |= (q as u32 & 0xF) << (4 * (i % 8));
            if BITS == 6 {
                words[2 * stored / 16 + i / 16] |= (q as u32 >> 4) << (2 * (i % 16));
            }
        }
    }

    /// Decodes one super-block (`out` up to 256 values) from its codes and parameter bytes.
    #[inline(always)]
    fn decode_block(codes: &[u8; QK_K], params: &[u8], out: &mut [f32]) {
        if BITS == 4 {
            let d = half_to_f32(u16::from_le_bytes([params[0], params[1]]));
            let dmin = half_to_f32(u16::from_le_bytes([params[2], params[3]]));
            for (j, sub) in out.chunks_mut(32).enumerate() {
                let (sc, m) = Self::scale_min(&params[4..], j);
                let (d1, m1) = (d * sc as f32, dmin * m as f32);
                for (o, &q) in sub.iter_mut().zip(&codes[32 * j..]) {
                    *o = d1 * q as f32 - m1;
                }
            }
        } else {
            let d = half_to_f32(u16::from_le_bytes([params[16], params[17]]));
            for (j, sub) in out.chunks_mut(16).enumerate() {
                let dl = d * params[j] as i8 as f32;
                for (o, &q) in sub.iter_mut().zip(&codes[16 * j..]) {
                    *o = dl * (q as i32 - 32) as f32;
                }
            }
        }
    }

    /// ggml's `quantize_row_q4_K_ref` for one super-block: codes into `l`, parameters into
    /// `params`; `Err` with the column of a value whose scale would overflow fp16.
    fn quantize_q4(x: &[f32; QK_K], l: &mut [u8; QK_K], params: &mut [u8]) -> Result<(), usize> {
        let (mut scales, mut mins) = ([0f32; 8], [0f32; 8]);
        let (mut max_scale, mut max_min) = (0f32, 0f32);
        for j in 0..8 {
            let x = &x[32 * j..32 * j + 32];
            let sum_x2 = x.iter().fold(0f32, |s, v| s + v * v);
            let av_x = (sum_x2 / 32.0).sqrt();
            let weights: [f32; 32] = std::array::from_fn(|i| av_x + x[i].abs());
            (scales[j], mins[j]) = make_qkx2_quants(x, &weights, 15, -1.0, 0.1, 20, &mut l[32 * j..32 * j + 32]);
            if scales[j] > max_scale {
                max_scale = scales[j];
            }
            if mins[j] > max_min {
                max_min = mins[j];
            }
        }
        let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
        let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
        let sc = &mut params[4..16];
        sc.fill(0);
        for j in 0..8 {
            // uint8_t ls = nearest_int(…): the conversion wraps, then MIN(63, ls).
            let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
            let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
            if j < 4 {
                sc[j] = ls;
                sc[j + 4] = lm;
            } else {
                sc[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
                sc[j - 4] |= (ls >> 4) << 6;
                sc[j] |= (lm >> 4) << 6;
            }
        }
        let (d, dmin) = (f16::from_f32(max_scale / 63.0), f16::from_f32(max_min / 63.0));
        if !d.is_finite() || !dmin.is_finite() {
            return Err(Self::max_abs_at(x));
        }
        params[..2].copy_from_slice(&d.to_le_bytes());
        params[2..4].copy_from_slice(&dmin.to_le_bytes());
        let (d, dmin) = (d.to_f32(), dmin.to_f32());
        for j in 0..8 {
            let (sc, m) = Self::scale_min(&params[4..16], j);
            let dj = d * sc as f32;
            if dj == 0.0 {
                continue;
            }
            let dm = dmin * m as f32;
            for i in 32 * j..32 * j + 32 {
                l[i] = nearest_int((x[i] + dm) / dj).clamp(0, 15) as u8;
            }
        }
        Ok(())
    }

    /// ggml's `quantize_row_q6_K_ref` for one super-block, as [`Self::quantize_q4`].
    fn quantize_q6(x: &[f32; QK_K], l: &mut [u8; QK_K], params: &mut [u8]) -> Result<(), usize> {
        let mut scales = [0f32; 16];
        let (mut max_scale, mut max_abs_scale) = (0f32, 0f32);
        for (ib, scale) in scales.iter_mut().enumerate() {
            *scale = make_qx_quants(&x[16 * ib..16 * ib + 16], 32, &mut l[16 * ib..16 * ib + 16]);
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = *scale;
            }
        }
        params.fill(0);
        if max_abs_scale < 1e-15 {
            l.fill(0);
            return Ok(());
        }
        let iscale = -128.0 / max_scale;
        let d = f16::from_f32(1.0 / iscale);
        if !d.is_finite() {
            return Err(Self::max_abs_at(x));
        }
        params[16..18].copy_from_slice(&d.to_le_bytes());
        for (ib, &scale) in scales.iter().enumerate() {
            params[ib] = nearest_int(iscale * scale).min(127) as i8 as u8;
        }
        let d = d.to_f32();
        for ((&sc, x), l) in params[..16].iter().zip(x.chunks_exact(16)).zip(l.chunks_exact_mut(16)) {
            let dj = d * sc as i8 as f32;
            if dj == 0.0 {
                continue;
            }
            for (l, &x) in l.iter_mut().zip(x) {
                *l = (nearest_int(x / dj).clamp(-32, 31) + 32) as u8;
            }
        }
        Ok(())
    }

    fn max_abs_at(x: &[f32]) -> usize {
        x.iter().enumerate().fold(0, |best, (i, v)| if v.abs() > x[best].abs() { i } else { best })
    }
}

impl<const BITS: usize> Groups<QK_K> for KBlock<BITS> {
    const GROUP_WORDS: usize = Self::BLOCK_WORDS;

    #[inline(always)]
    fn group<L: Lanes>(l: L, g: usize, words: &[u32], params: &[u32], dst: &mut [f32]) {
        let params: &[u8] = bytemuck::cast_slice(params);
        let p = &params[g * Self::PARAM_BYTES..][..Self::PARAM_BYTES];
        if BITS == 4 {
            // Eight sub-blocks of 32 values: `d·sc · q − dmin·m`.
            let d = l.half(u16::from_le_bytes([p[0], p[1]]));
            let dmin = l.half(u16::from_le_bytes([p[2], p[3]]));
            // The sub-blocks' scales `d·sc` and minimums `dmin·m`, eight at a time.
            let (mut sc, mut m) = ([0u8; 8], [0u8; 8]);
            for j in 0..8 {
                (sc[j], m[j]) = Self::scale_min(&p[4..], j);
            }
            let (mut scales, mut mins) = ([0f32; 8], [0f32; 8]);
            l.store(l.mul(l.to_f32(l.bytes(&sc)), l.splat(d)), &mut scales);
            l.store(l.mul(l.to_f32(l.bytes(&m)), l.splat(dmin)), &mut mins);
            let affine = |j: usize| Affine::ScaleBias(scales[j], -mins[j]);
            let (subs, rest) = dst.as_chunks_mut::<32>();
            let (quads, _) = words.as_chunks::<4>();
            for (j, (sub, w)) in subs.iter_mut().zip(quads).enumerate() {
                let a = affine(j);
                let (octets, _) = sub.as_chunks_mut::<8>();
                for (o, &w) in octets.iter_mut().zip(w) {
                    l.store(a.lanes(l, l.fields::<4>(w)), o);
                }
            }
            if !rest.is_empty() {
                let j = subs.len();
                super::unpack::nibbles(l, &words[4 * j..], rest, affine(j));
            }
        } else {
            // Sixteen sub-blocks of 16 values: `d·sc · (q − 32)`, the low four bits of `q` in
            // nibbles, the top two of sub-block j's value 8k + i at bits 16k + 2i of the word
            // after the stored sub-blocks' nibbles: 32 + j in a whole super-block, 2·⌈n/16⌉ + j
            // in a row's last one of n values.
            let top = 2 * dst.len().div_ceil(16);
            let d = l.half(u16::from_le_bytes([p[16], p[17]]));
            // The sub-blocks' scales `d·sc`, eight at a time.
            let mut scales = [0f32; 16];
            for (s, sc) in scales.as_chunks_mut::<8>().0.iter_mut().zip(p[..16].as_chunks::<8>().0) {
                l.store(l.mul(l.to_f32(l.signed_bytes(sc)), l.splat(d)), s);
            }
            let affine = |j: usize| Affine::OffsetScale(32.0, scales[j]);
            let (nibbles, high) = words[..top + top / 2].split_at(top);
            let (subs, rest) = dst.as_chunks_mut::<16>();
            let (pairs, _) = nibbles.as_chunks::<2>();
            for (j, ((sub, w), &high)) in subs.iter_mut().zip(pairs).zip(high).enumerate() {
                let a = affine(j);
                let codes = [l.or(l.fields::<4>(w[0]), l.fields_up::<2, 0, 4>(high)), l.or(l.fields::<4>(w[1]), l.fields_up::<2, 16, 4>(high))];
                for (o, q) in sub.as_chunks_mut::<8>().0.iter_mut().zip(codes) {
                    l.store(a.lanes(l, q), o);
                }
            }
            // The row's last octet, where it ends in the first half of a sub-block (`groups`
            // gives whole octets: a width 1 to 7 past one comes through its scratch group).
            if let Ok(o) = <&mut [f32; 8]>::try_from(rest) {
                let j = subs.len();
                l.store(affine(j).lanes(l, l.or(l.fields::<4>(nibbles[2 * j]), l.fields_up::<2, 0, 4>(high[j]))), o);
            }
        }
    }
}

impl<const BITS: usize> Codec for KBlock<BITS> {
    const FORMAT: Format = match BITS {
        4 => Format::Q4K,
        6 => Format::Q6K,
        _ => panic!("no such k-quant format"),
    };
    const NAME: &'static str = match BITS {
        4 => "q4_k",
        6 => "q6_k",
        _ => panic!("no such k-quant format"),
    };
    const CODE_BITS: usize = BITS;
    const GROUP: usize = QK_K;
    const PARAM_BITS: usize = 8 * Self::PARAM_BYTES;
    const GGML_TYPE: Option<u32> = Some(if BITS == 4 { 12 } else { 14 });

    /// Whole super-blocks, then the last one's sub-blocks only (see the module docs).
    fn code_words(dim: usize) -> usize {
        block_code_words(dim, QK_K, Self::BLOCK_WORDS, Self::block_words)
    }

    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        check_finite(row)?;
        out.fill(0);
        let (codes, params) = out.split_at_mut(Self::code_words(row.len()));
        let params: &mut [u8] = bytemuck::cast_slice_mut(params);
        for (g, block) in row.chunks(QK_K).enumerate() {
            let words = &mut codes[g * Self::BLOCK_WORDS..][..Self::block_words(block.len())];
            let mut x = [0f32; QK_K];
            x[..block.len()].copy_from_slice(block);
            let mut l = [0u8; QK_K];
            let p = &mut params[g * Self::PARAM_BYTES..][..Self::PARAM_BYTES];
            let quantized = if BITS == 4 { Self::quantize_q4(&x, &mut l, p) } else { Self::quantize_q6(&x, &mut l, p) };
            quantized.map_err(|i| EncodeError::OutOfRange { col: g * QK_K + i, value: x[i] })?;
            Self::put_codes(&l, words);
        }
        Ok(())
    }

    #[inline(always)]
    fn decode<L: Lanes>(l: L, words: &[u32], out: &mut [f32]) {
        let (codes, params) = words.split_at(Self::code_words(out.len()));
        super::unpack::groups::<QK_K, Self, L>(l, codes, params, out);
    }

    fn decode_row_reference(words: &[u32], out: &mut [f32]) {
        let (codes, params) = words.split_at(Self::code_words(out.len()));
        let params: &[u8] = bytemuck::cast_slice(params);
        let dim = out.len();
        for (g, (dst, words)) in out.chunks_mut(QK_K).zip(Self::blocks(codes, dim)).enumerate() {
            Self::decode_block(&Self::codes(words), &params[g * Self::PARAM_BYTES..][..Self::PARAM_BYTES], dst);
        }
    }

    fn error_bounds(row: &[f32]) -> Vec<f32> {
        let mut bounds = Vec::with_capacity(row.len());
        for block in row.chunks(QK_K) {
            let (min, max) = min_max(block);
            // The fp16 super-block scales round too (to 0 for tiny blocks): at most 63 · 15 + 63
            // (q4_k) or 127 · 32 (q6_k) halves of an ulp of the scale reach a value.
            let bound = if BITS == 4 {
                let range = max.max(0.0) - min.min(0.0);
                range / 8.0 + 1008.0 * f16_half_ulp(range / 945.0)
            } else {
                let max_abs = min.abs().max(max.abs());
                max_abs / 16.0 + 4064.0 * f16_half_ulp(max_abs / 4096.0)
            };
            bounds.extend(std::iter::repeat_n(bound, block.len()));
        }
        bounds
    }

    fn write_external(words: &[u32], dim: usize, out: &mut [u8]) {
        let (codes, params) = words.split_at(Self::code_words(dim));
        let params: &[u8] = bytemuck::cast_slice(params);
        let block_bytes = out.len() / Self::groups(dim);
        for (g, (dst, words)) in out.chunks_exact_mut(block_bytes).zip(Self::blocks(codes, dim)).enumerate() {
            let l = Self::codes(words);
            let p = &params[g * Self::PARAM_BYTES..][..Self::PARAM_BYTES];
            if BITS == 4 {
                dst[..16].copy_from_slice(p);
                for (c, qs) in dst[16..].chunks_exact_mut(32).enumerate() {
                    for (i, o) in qs.iter_mut().enumerate() {
                        *o = l[64 * c + i] | l[64 * c + i + 32] << 4;
                    }
                }
            } else {
                let (ql, rest) = dst.split_at_mut(128);
                let (qh, tail) = rest.split_at_mut(64);
                tail.copy_from_slice(p);
                for h in 0..2 {
                    let l = &l[128 * h..];
                    for i in 0..32 {
                        ql[64 * h + i] = (l[i] & 0xF) | (l[i + 64] & 0xF) << 4;
                        ql[64 * h + i + 32] = (l[i + 32] & 0xF) | (l[i + 96] & 0xF) << 4;
                        qh[32 * h + i] = l[i] >> 4 | (l[i + 32] >> 4) << 2 | (l[i + 64] >> 4) << 4 | (l[i + 96] >> 4) << 6;
                    }
                }
            }
        }
    }

    fn read_external(src: &[u8], dim: usize, out: &mut [u32]) {
        let (codes, params) = out.split_at_mut(Self::code_words(dim));
        let params: &mut [u8] = bytemuck::cast_slice_mut(params);
        let block_bytes = src.len() / Self::groups(dim);
        for (g, block) in src.chunks_exact(block_bytes).enumerate() {
            let words = &mut codes[g * Self::BLOCK_WORDS..][..Self::block_words((dim - g * QK_K).min(QK_K))];
            let p = &mut params[g * Self::PARAM_BYTES..][..Self::PARAM_BYTES];
            let mut l = [0u8; QK_K];
            if BITS == 4 {
                p.copy_from_slice(&block[..16]);
                for (c, qs) in block[16..].chunks_exact(32).enumerate() {
                    for (i, &b) in qs.iter().enumerate() {
                        l[64 * c + i] = b & 0xF;
                        l[64 * c + i + 32] = b >> 4;
                    }
                }
            } else {
                let (ql, qh, tail) = (&block[..128], &block[128..192], &block[192..]);
                p.copy_from_slice(tail);
                for h in 0..2 {
                    let l = &mut l[128 * h..];
                    for i in 0..32 {
                        let (lo, hi, bits) = (ql[64 * h + i], ql[64 * h + i + 32], qh[32 * h + i]);
                        l[i] = (lo & 0xF) | (bits & 3) << 4;
                        l[i + 32] = (hi & 0xF) | ((bits >> 2) & 3) << 4;
                        l[i + 64] = (lo >> 4) | ((bits >> 4) & 3) << 4;
                        l[i + 96] = (hi >> 4) | ((bits >> 6) & 3) << 4;
                    }
                }
            }
            Self::put_codes(&l, words);
        }
    }
}
