//! x86-64's levels: AVX2 (with F16C) on one 256-bit register, SSE4.1 on two 128-bit halves.
//!
//! Every method is `#[inline(always)]` and is only ever inlined into a kernel compiled for its
//! instruction set (`with_avx2`, `with_sse41`), where each intrinsic is one or two instructions.
//! The `unsafe` blocks call intrinsics of the token's own set: a token exists only after its
//! `new` found the set on this CPU.

use std::arch::x86_64::*;

use super::{Lanes, Sealed};

/// AVX2 and F16C (and POPCNT, which the Hamming scan uses). Made only by [`Avx2::new`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// The token, where the CPU has AVX2, F16C and POPCNT.
    pub(crate) fn new() -> Option<Self> {
        (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c") && is_x86_feature_detected!("popcnt")).then_some(Avx2(()))
    }
}

impl Sealed for Avx2 {}

impl Lanes for Avx2 {
    type F = __m256;
    type I = __m256i;

    #[inline(always)]
    fn splat(self, x: f32) -> __m256 {
        // SAFETY (here and below): the token proves AVX2 and F16C (see the module docs); loads and
        // stores go through references of exactly the bytes they touch.
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    fn splat_i(self, x: u32) -> __m256i {
        unsafe { _mm256_set1_epi32(x as i32) }
    }
    #[inline(always)]
    fn load(self, x: &[f32; 8]) -> __m256 {
        unsafe { _mm256_loadu_ps(x.as_ptr()) }
    }
    #[inline(always)]
    fn store(self, x: __m256, out: &mut [f32; 8]) {
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), x) }
    }
    #[inline(always)]
    fn bytes(self, b: &[u8; 8]) -> __m256i {
        unsafe { _mm256_cvtepu8_epi32(_mm_loadl_epi64(b.as_ptr().cast())) }
    }
    #[inline(always)]
    fn signed_bytes(self, b: &[u8; 8]) -> __m256i {
        unsafe { _mm256_cvtepi8_epi32(_mm_loadl_epi64(b.as_ptr().cast())) }
    }
    #[inline(always)]
    fn u16s(self, h: &[u16; 8]) -> __m256i {
        unsafe { _mm256_cvtepu16_epi32(_mm_loadu_si128(h.as_ptr().cast())) }
    }
    #[inline(always)]
    fn fields<const W: u32>(self, x: u32) -> __m256i {
        let w = W as i32;
        unsafe {
            let shifts = _mm256_setr_epi32(0, w, 2 * w, 3 * w, 4 * w, 5 * w, 6 * w, 7 * w);
            _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(x as i32), shifts), _mm256_set1_epi32((1 << W) - 1))
        }
    }
    #[inline(always)]
    fn fields_up<const W: u32, const FIRST: u32, const UP: u32>(self, x: u32) -> __m256i {
        // One per-lane shift right lands every field at UP; where FIRST is below UP the word is
        // first moved up by the difference (no field needed is lost: UP + 8·W ≤ 32).
        let (x, first) = if FIRST >= UP { (x, (FIRST - UP) as i32) } else { (x << (UP - FIRST), 0) };
        let w = W as i32;
        unsafe {
            let shifts = _mm256_setr_epi32(first, first + w, first + 2 * w, first + 3 * w, first + 4 * w, first + 5 * w, first + 6 * w, first + 7 * w);
            _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(x as i32), shifts), _mm256_set1_epi32((((1u32 << W) - 1) << UP) as i32))
        }
    }
    #[inline(always)]
    fn to_f32(self, x: __m256i) -> __m256 {
        unsafe { _mm256_cvtepi32_ps(x) }
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn and(self, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_and_si256(a, b) }
    }
    #[inline(always)]
    fn or(self, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_or_si256(a, b) }
    }
    #[inline(always)]
    fn shl(self, a: __m256i, n: u32) -> __m256i {
        unsafe { _mm256_sll_epi32(a, _mm_cvtsi32_si128(n as i32)) }
    }
    #[inline(always)]
    fn eq(self, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_cmpeq_epi32(a, b) }
    }
    #[inline(always)]
    fn gt(self, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_cmpgt_epi32(a, b) }
    }
    #[inline(always)]
    fn select(self, mask: __m256i, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_blendv_epi8(b, a, mask) }
    }
    #[inline(always)]
    fn bitcast_f(self, x: __m256i) -> __m256 {
        unsafe { _mm256_castsi256_ps(x) }
    }
    #[inline(always)]
    fn bitcast_i(self, x: __m256) -> __m256i {
        unsafe { _mm256_castps_si256(x) }
    }
    #[inline(always)]
    fn halves(self, h: &[u16; 8]) -> __m256 {
        // F16C: exact, NaNs quieted with their payload, as the portable conversion.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr().cast())) }
    }
    #[inline(always)]
    fn half(self, h: u16) -> f32 {
        unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32))) }
    }
}

/// SSE4.1. Made only by [`Sse41::new`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sse41(());

impl Sse41 {
    /// The token, where the CPU has SSE4.1.
    pub(crate) fn new() -> Option<Self> {
        is_x86_feature_detected!("sse4.1").then_some(Sse41(()))
    }
}

impl Sealed for Sse41 {}

impl Lanes for Sse41 {
    type F = [__m128; 2];
    type I = [__m128i; 2];

    #[inline(always)]
    fn splat(self, x: f32) -> [__m128; 2] {
        // SAFETY (here and below): the token proves SSE4.1 (see the module docs); loads and stores
        // go through references of exactly the bytes they touch.
        unsafe { [_mm_set1_ps(x); 2] }
    }
    #[inline(always)]
    fn splat_i(self, x: u32) -> [__m128i; 2] {
        unsafe { [_mm_set1_epi32(x as i32); 2] }
    }
    #[inline(always)]
    fn load(self, x: &[f32; 8]) -> [__m128; 2] {
        unsafe { [_mm_loadu_ps(x.as_ptr()), _mm_loadu_ps(x[4..].as_ptr())] }
    }
    #[inline(always)]
    fn store(self, x: [__m128; 2], out: &mut [f32; 8]) {
        unsafe {
            _mm_storeu_ps(out.as_mut_ptr(), x[0]);
            _mm_storeu_ps(out[4..].as_mut_ptr(), x[1]);
        }
    }
    #[inline(always)]
    fn bytes(self, b: &[u8; 8]) -> [__m128i; 2] {
        unsafe {
            let v = _mm_loadl_epi64(b.as_ptr().cast());
            [_mm_cvtepu8_epi32(v), _mm_cvtepu8_epi32(_mm_srli_si128::<4>(v))]
        }
    }
    #[inline(always)]
    fn signed_bytes(self, b: &[u8; 8]) -> [__m128i; 2] {
        unsafe {
            let v = _mm_loadl_epi64(b.as_ptr().cast());
            [_mm_cvtepi8_epi32(v), _mm_cvtepi8_epi32(_mm_srli_si128::<4>(v))]
        }
    }
    #[inline(always)]
    fn u16s(self, h: &[u16; 8]) -> [__m128i; 2] {
        unsafe {
            let v = _mm_loadu_si128(h.as_ptr().cast());
            [_mm_cvtepu16_epi32(v), _mm_cvtepu16_epi32(_mm_srli_si128::<8>(v))]
        }
    }
    #[inline(always)]
    fn fields<const W: u32>(self, x: u32) -> [__m128i; 2] {
        // SSE has no per-lane shift: lane j is shifted left by 32 − W·(j + 1) with a multiply
        // (its field now at the top, the bits above it gone), then right by 32 − W.
        let up = |j: u32| (1u32 << (32 - W * (j + 1))) as i32;
        unsafe {
            let v = _mm_set1_epi32(x as i32);
            let lo = _mm_mullo_epi32(v, _mm_setr_epi32(up(0), up(1), up(2), up(3)));
            let hi = _mm_mullo_epi32(v, _mm_setr_epi32(up(4), up(5), up(6), up(7)));
            let right = _mm_cvtsi32_si128(32 - W as i32);
            [_mm_srl_epi32(lo, right), _mm_srl_epi32(hi, right)]
        }
    }
    #[inline(always)]
    fn to_f32(self, x: [__m128i; 2]) -> [__m128; 2] {
        unsafe { each_half!(x, |v| _mm_cvtepi32_ps(v)) }
    }
    #[inline(always)]
    fn add(self, a: [__m128; 2], b: [__m128; 2]) -> [__m128; 2] {
        unsafe { each_half!(a, b, |x, y| _mm_add_ps(x, y)) }
    }
    #[inline(always)]
    fn sub(self, a: [__m128; 2], b: [__m128; 2]) -> [__m128; 2] {
        unsafe { each_half!(a, b, |x, y| _mm_sub_ps(x, y)) }
    }
    #[inline(always)]
    fn mul(self, a: [__m128; 2], b: [__m128; 2]) -> [__m128; 2] {
        unsafe { each_half!(a, b, |x, y| _mm_mul_ps(x, y)) }
    }
    #[inline(always)]
    fn and(self, a: [__m128i; 2], b: [__m128i; 2]) -> [__m128i; 2] {
        unsafe { each_half!(a, b, |x, y| _mm_and_si128(x, y)) }
    }
    #[inline(always)]
    fn or(self, a: [__m128i; 2], b: [__m128i; 2]) -> [__m128i; 2] {
        unsafe { each_half!(a, b, |x, y| _mm_or_si128(x, y)) }
    }
    #[inline(always)]
    fn shl(self, a: [__m128i; 2], n: u32) -> [__m128i; 2] {
        unsafe {
            let n = _mm_cvtsi32_si128(n as i32);
            each_half!(a, |x| _mm_sll_epi32(x, n))
        }
    }
    #[inline(always)]
    fn eq(self, a: [__m128i; 2], b: [__m128i; 2]) -> [__m128i; 2] {
        unsafe { each_half!(a, b, |x, y| _mm_cmpeq_epi32(x, y)) }
    }
    #[inline(always)]
    fn gt(self, a: [__m128i; 2], b: [__m128i; 2]) -> [__m128i; 2] {
        unsafe { each_half!(a, b, |x, y| _mm_cmpgt_epi32(x, y)) }
    }
    #[inline(always)]
    fn select(self, mask: [__m128i; 2], a: [__m128i; 2], b: [__m128i; 2]) -> [__m128i; 2] {
        unsafe { [_mm_blendv_epi8(b[0], a[0], mask[0]), _mm_blendv_epi8(b[1], a[1], mask[1])] }
    }
    #[inline(always)]
    fn bitcast_f(self, x: [__m128i; 2]) -> [__m128; 2] {
        unsafe { each_half!(x, |v| _mm_castsi128_ps(v)) }
    }
    #[inline(always)]
    fn bitcast_i(self, x: [__m128; 2]) -> [__m128i; 2] {
        unsafe { each_half!(x, |v| _mm_castps_si128(v)) }
    }
}
