//! The decoders' shared loops: codes to values eight at a time on a [`Lanes`] instruction set.
//!
//! Each format's [`Codec::decode`](super::Codec::decode) is built from these; its per-value
//! [`Codec::decode_row_reference`](super::Codec::decode_row_reference) is the oracle they are
//! tested against bit for bit. The arithmetic in lanes is the reference's, term for term (a
//! product, then a sum or a difference, never fused), so the values are the same bits on every
//! instruction set. A row's last values that do not fill eight lanes are decoded one at a time
//! with the same arithmetic ([`Affine::value`]).

use crate::simd::Lanes;

/// What a code means: `q · scale + bias`, or `(q − offset) · scale` — the two shapes of every
/// integer format's decode. (`q · d − m` is `ScaleBias(d, −m)`: IEEE defines `a − b` as
/// `a + (−b)`.)
#[derive(Clone, Copy, Debug)]
pub(crate) enum Affine {
    /// `q · scale + bias`.
    ScaleBias(f32, f32),
    /// `(q − offset) · scale`.
    OffsetScale(f32, f32),
}

impl Affine {
    /// The value of one code.
    #[inline(always)]
    pub(crate) fn value(self, q: u32) -> f32 {
        match self {
            Affine::ScaleBias(scale, bias) => q as f32 * scale + bias,
            Affine::OffsetScale(offset, scale) => (q as f32 - offset) * scale,
        }
    }

    /// The values of eight codes.
    #[inline(always)]
    pub(crate) fn lanes<L: Lanes>(self, l: L, q: L::I) -> L::F {
        match self {
            Affine::ScaleBias(scale, bias) => l.add(l.mul(l.to_f32(q), l.splat(scale)), l.splat(bias)),
            Affine::OffsetScale(offset, scale) => l.mul(l.sub(l.to_f32(q), l.splat(offset)), l.splat(scale)),
        }
    }
}

/// Values `8k .. 8k + 8` of a row of `BITS`-bit codes (4 or 8) laid out as the row-wise formats
/// lay them (element `8k + j` at bits `4j` of word `k`, or byte `j` of words `2k`, `2k + 1`),
/// decoded by `a`: the bits [`bytes`] and [`nibbles`] give the same values.
#[inline(always)]
pub(crate) fn octet<const BITS: usize, L: Lanes>(l: L, codes: &[u32], k: usize, a: Affine) -> L::F {
    if BITS == 8 {
        let b: &[u8] = bytemuck::cast_slice(&codes[2 * k..2 * k + 2]);
        a.lanes(l, l.bytes(b.try_into().expect("8 bytes")))
    } else {
        a.lanes(l, l.fields::<4>(codes[k]))
    }
}

/// `out[i]` is the value of `bytes[i]`, for every `i` of `out` (`bytes` has at least as many).
#[inline(always)]
pub(crate) fn bytes<L: Lanes>(l: L, bytes: &[u8], out: &mut [f32], a: Affine) {
    let (octets, tail) = out.as_chunks_mut::<8>();
    let (codes, _) = bytes.as_chunks::<8>();
    for (o, c) in octets.iter_mut().zip(codes) {
        l.store(a.lanes(l, l.bytes(c)), o);
    }
    let done = 8 * octets.len();
    for (o, &q) in tail.iter_mut().zip(&bytes[done..]) {
        *o = a.value(q as u32);
    }
}

/// `out[8k + j]` is the value of nibble `j` of `words[k]` (bits `4j .. 4j + 4`), for every value
/// of `out` (`words` has at least `out.len() / 8` rounded up).
#[inline(always)]
pub(crate) fn nibbles<L: Lanes>(l: L, words: &[u32], out: &mut [f32], a: Affine) {
    let (octets, tail) = out.as_chunks_mut::<8>();
    for (o, &w) in octets.iter_mut().zip(words) {
        l.store(a.lanes(l, l.fields::<4>(w)), o);
    }
    if let Some(&w) = words.get(octets.len()) {
        for (j, o) in tail.iter_mut().enumerate() {
            *o = a.value((w >> (4 * j)) & 0xF);
        }
    }
}

/// A format whose rows are groups of `G` values (a multiple of 8), each decoded from its own
/// code words and parameters.
///
/// A trait and not a closure: a closure's body is a function of its own, which the compiler did
/// not always inline into the kernel compiled for AVX2 — and then every [`Lanes`] operation in it
/// was a call (the nibble formats ran 20× slower). An `#[inline(always)]` method always is.
pub(crate) trait Groups<const G: usize> {
    /// Code words per group.
    const GROUP_WORDS: usize;
    /// Decodes the first `out.len()` values (a multiple of 8, at most `G`) of group `g` of a row
    /// from the group's code words `codes` (for a row's last group, the rest of the row's code
    /// words, or a zero-padded copy of them a whole group long) and the row's parameter words
    /// `params`.
    fn group<L: Lanes>(l: L, g: usize, codes: &[u32], params: &[u32], out: &mut [f32]);
}

/// At least as many code words as a group of any format takes (Q6_K's 48 are the most).
const MAX_GROUP_WORDS: usize = 64;

/// Decodes a row of groups: [`Groups::group`] for every group of `G` values. A last group cut
/// short by the row's width is decoded as far as the next multiple of 8 — into a scratch group
/// when that passes the row's end, from its words copied into zeroed scratch words (a short group
/// stores only the words its values reach, which may end inside an octet's) — so a decoder only
/// ever sees whole octets.
#[inline(always)]
pub(crate) fn groups<const G: usize, D: Groups<G>, L: Lanes>(l: L, codes: &[u32], params: &[u32], out: &mut [f32]) {
    const { assert!(D::GROUP_WORDS <= MAX_GROUP_WORDS) };
    let (whole, tail) = out.as_chunks_mut::<G>();
    let mut words = codes.chunks_exact(D::GROUP_WORDS);
    for (g, (dst, w)) in whole.iter_mut().zip(&mut words).enumerate() {
        D::group(l, g, w, params, dst);
    }
    if !tail.is_empty() {
        let g = whole.len();
        // The last group's own words: all of a group's, or fewer where a format stores only what
        // a short last group's values reach (the group-wise formats' and ggml blocks' words, the
        // k-quants' sub-blocks).
        let w = &codes[g * D::GROUP_WORDS..];
        let n = tail.len().next_multiple_of(8);
        if n == tail.len() {
            D::group(l, g, w, params, tail);
        } else {
            let mut scratch = [0f32; G];
            let mut words = [0u32; MAX_GROUP_WORDS];
            let stored = w.len().min(D::GROUP_WORDS);
            words[..stored].copy_from_slice(&w[..stored]);
            D::group(l, g, &words[..D::GROUP_WORDS], params, &mut scratch[..n]);
            tail.copy_from_slice(&scratch[..tail.len()]);
        }
    }
}
