//! WASM SIMD128: two 128-bit halves. The browser build enables `simd128` for the whole module
//! (`.cargo/config.toml`), so this level is chosen at compile time: there is nothing to detect
//! (a browser without SIMD128 refuses the module at load).

use std::arch::wasm32::*;

use super::{Lanes, Sealed};

/// SIMD128, compiled in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wasm128;

impl Sealed for Wasm128 {}

impl Lanes for Wasm128 {
    type F = [v128; 2];
    type I = [v128; 2];

    #[inline(always)]
    fn splat(self, x: f32) -> [v128; 2] {
        [f32x4_splat(x); 2]
    }
    #[inline(always)]
    fn splat_i(self, x: u32) -> [v128; 2] {
        [u32x4_splat(x); 2]
    }
    #[inline(always)]
    fn load(self, x: &[f32; 8]) -> [v128; 2] {
        // SAFETY (here and below): loads and stores go through references of exactly the bytes
        // they touch; v128 loads and stores need no alignment.
        unsafe { [v128_load(x.as_ptr().cast()), v128_load(x[4..].as_ptr().cast())] }
    }
    #[inline(always)]
    fn store(self, x: [v128; 2], out: &mut [f32; 8]) {
        unsafe {
            v128_store(out.as_mut_ptr().cast(), x[0]);
            v128_store(out[4..].as_mut_ptr().cast(), x[1]);
        }
    }
    #[inline(always)]
    fn bytes(self, b: &[u8; 8]) -> [v128; 2] {
        let v = unsafe { u16x8_load_extend_u8x8(b.as_ptr()) };
        [u32x4_extend_low_u16x8(v), u32x4_extend_high_u16x8(v)]
    }
    #[inline(always)]
    fn signed_bytes(self, b: &[u8; 8]) -> [v128; 2] {
        let v = unsafe { i16x8_load_extend_i8x8(b.as_ptr().cast()) };
        [i32x4_extend_low_i16x8(v), i32x4_extend_high_i16x8(v)]
    }
    #[inline(always)]
    fn u16s(self, h: &[u16; 8]) -> [v128; 2] {
        let v = unsafe { v128_load(h.as_ptr().cast()) };
        [u32x4_extend_low_u16x8(v), u32x4_extend_high_u16x8(v)]
    }
    #[inline(always)]
    fn fields<const W: u32>(self, x: u32) -> [v128; 2] {
        // No per-lane shift: lane j is shifted left by 32 − W·(j + 1) with a multiply (its field
        // now at the top, the bits above it gone), then right by 32 − W.
        let up = |j: u32| 1u32 << (32 - W * (j + 1));
        let v = u32x4_splat(x);
        let lo = i32x4_mul(v, u32x4(up(0), up(1), up(2), up(3)));
        let hi = i32x4_mul(v, u32x4(up(4), up(5), up(6), up(7)));
        [u32x4_shr(lo, 32 - W), u32x4_shr(hi, 32 - W)]
    }
    #[inline(always)]
    fn to_f32(self, x: [v128; 2]) -> [v128; 2] {
        each_half!(x, |v| f32x4_convert_i32x4(v))
    }
    #[inline(always)]
    fn add(self, a: [v128; 2], b: [v128; 2]) -> [v128; 2] {
        each_half!(a, b, |x, y| f32x4_add(x, y))
    }
    #[inline(always)]
    fn sub(self, a: [v128; 2], b: [v128; 2]) -> [v128; 2] {
        each_half!(a, b, |x, y| f32x4_sub(x, y))
    }
    #[inline(always)]
    fn mul(self, a: [v128; 2], b: [v128; 2]) -> [v128; 2] {
        each_half!(a, b, |x, y| f32x4_mul(x, y))
    }
    #[inline(always)]
    fn and(self, a: [v128; 2], b: [v128; 2]) -> [v128; 2] {
        each_half!(a, b, |x, y| v128_and(x, y))
    }
    #[inline(always)]
    fn or(self, a: [v128; 2], b: [v128; 2]) -> [v128; 2] {
        each_half!(a, b, |x, y| v128_or(x, y))
    }
    #[inline(always)]
    fn shl(self, a: [v128; 2], n: u32) -> [v128; 2] {
        each_half!(a, |x| i32x4_shl(x, n))
    }
    #[inline(always)]
    fn eq(self, a: [v128; 2], b: [v128; 2]) -> [v128; 2] {
        each_half!(a, b, |x, y| i32x4_eq(x, y))
    }
    #[inline(always)]
    fn gt(self, a: [v128; 2], b: [v128; 2]) -> [v128; 2] {
        each_half!(a, b, |x, y| i32x4_gt(x, y))
    }
    #[inline(always)]
    fn select(self, mask: [v128; 2], a: [v128; 2], b: [v128; 2]) -> [v128; 2] {
        [v128_bitselect(a[0], b[0], mask[0]), v128_bitselect(a[1], b[1], mask[1])]
    }
    #[inline(always)]
    fn bitcast_f(self, x: [v128; 2]) -> [v128; 2] {
        x
    }
    #[inline(always)]
    fn bitcast_i(self, x: [v128; 2]) -> [v128; 2] {
        x
    }
}
