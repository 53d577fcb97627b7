//! aarch64's level: NEON on two 128-bit halves.
//!
//! NEON is part of every aarch64 CPU (the target's baseline), so the level needs no detection.
//! Half-precision values convert with `fcvtl`/`fcvtl2`, which ARMv8.0 has: FEAT_FP16 (ARMv8.2)
//! adds half-precision arithmetic, not the conversions (the `half` crate gates them on it all the
//! same). The tests run on a CPU model with FEAT_FP16 and one without (qemu's `max` and
//! `cortex-a53`). Every method is `#[inline(always)]`; the `unsafe` blocks are loads and stores
//! through references of exactly the bytes they touch, or instructions every aarch64 CPU has.

use std::arch::aarch64::*;

use super::{Lanes, Sealed};

/// NEON, which every aarch64 CPU has.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Neon;

impl Sealed for Neon {}

/// The shifts that bring field `j` of a word to lane `j`'s low bits: `vshlq_u32` shifts right by
/// a negative count.
#[inline(always)]
fn field_shifts<const W: u32>(first: u32) -> [int32x4_t; 2] {
    let w = W as i32;
    let f = -(first as i32);
    let lo = [f, f - w, f - 2 * w, f - 3 * w];
    let hi = [f - 4 * w, f - 5 * w, f - 6 * w, f - 7 * w];
    // SAFETY: loads of the arrays' own four lanes.
    unsafe { [vld1q_s32(lo.as_ptr()), vld1q_s32(hi.as_ptr())] }
}

impl Lanes for Neon {
    type F = [float32x4_t; 2];
    type I = [uint32x4_t; 2];

    #[inline(always)]
    fn splat(self, x: f32) -> Self::F {
        // SAFETY (here and below): NEON is the target's baseline; see the module docs.
        unsafe { [vdupq_n_f32(x); 2] }
    }
    #[inline(always)]
    fn splat_i(self, x: u32) -> Self::I {
        unsafe { [vdupq_n_u32(x); 2] }
    }
    #[inline(always)]
    fn load(self, x: &[f32; 8]) -> Self::F {
        unsafe { [vld1q_f32(x.as_ptr()), vld1q_f32(x[4..].as_ptr())] }
    }
    #[inline(always)]
    fn store(self, x: Self::F, out: &mut [f32; 8]) {
        unsafe {
            vst1q_f32(out.as_mut_ptr(), x[0]);
            vst1q_f32(out[4..].as_mut_ptr(), x[1]);
        }
    }
    #[inline(always)]
    fn bytes(self, b: &[u8; 8]) -> Self::I {
        unsafe {
            let v = vmovl_u8(vld1_u8(b.as_ptr()));
            [vmovl_u16(vget_low_u16(v)), vmovl_high_u16(v)]
        }
    }
    #[inline(always)]
    fn signed_bytes(self, b: &[u8; 8]) -> Self::I {
        unsafe {
            let v = vmovl_s8(vld1_s8(b.as_ptr().cast()));
            [vreinterpretq_u32_s32(vmovl_s16(vget_low_s16(v))), vreinterpretq_u32_s32(vmovl_high_s16(v))]
        }
    }
    #[inline(always)]
    fn u16s(self, h: &[u16; 8]) -> Self::I {
        unsafe {
            let v = vld1q_u16(h.as_ptr());
            [vmovl_u16(vget_low_u16(v)), vmovl_high_u16(v)]
        }
    }
    #[inline(always)]
    fn fields<const W: u32>(self, x: u32) -> Self::I {
        let [lo, hi] = field_shifts::<W>(0);
        unsafe {
            let (v, mask) = (vdupq_n_u32(x), vdupq_n_u32((1 << W) - 1));
            [vandq_u32(vshlq_u32(v, lo), mask), vandq_u32(vshlq_u32(v, hi), mask)]
        }
    }
    #[inline(always)]
    fn fields_up<const W: u32, const FIRST: u32, const UP: u32>(self, x: u32) -> Self::I {
        // One per-lane shift right lands every field at UP (as AVX2's); where FIRST is below UP
        // the word is first moved up by the difference (UP + 8·W ≤ 32: no field needed is lost).
        let (x, first) = if FIRST >= UP { (x, FIRST - UP) } else { (x << (UP - FIRST), 0) };
        let [lo, hi] = field_shifts::<W>(first);
        unsafe {
            let (v, mask) = (vdupq_n_u32(x), vdupq_n_u32(((1u32 << W) - 1) << UP));
            [vandq_u32(vshlq_u32(v, lo), mask), vandq_u32(vshlq_u32(v, hi), mask)]
        }
    }
    #[inline(always)]
    fn to_f32(self, x: Self::I) -> Self::F {
        unsafe { each_half!(x, |v| vcvtq_f32_s32(vreinterpretq_s32_u32(v))) }
    }
    #[inline(always)]
    fn add(self, a: Self::F, b: Self::F) -> Self::F {
        unsafe { each_half!(a, b, |x, y| vaddq_f32(x, y)) }
    }
    #[inline(always)]
    fn sub(self, a: Self::F, b: Self::F) -> Self::F {
        unsafe { each_half!(a, b, |x, y| vsubq_f32(x, y)) }
    }
    #[inline(always)]
    fn mul(self, a: Self::F, b: Self::F) -> Self::F {
        unsafe { each_half!(a, b, |x, y| vmulq_f32(x, y)) }
    }
    #[inline(always)]
    fn and(self, a: Self::I, b: Self::I) -> Self::I {
        unsafe { each_half!(a, b, |x, y| vandq_u32(x, y)) }
    }
    #[inline(always)]
    fn or(self, a: Self::I, b: Self::I) -> Self::I {
        unsafe { each_half!(a, b, |x, y| vorrq_u32(x, y)) }
    }
    #[inline(always)]
    fn shl(self, a: Self::I, n: u32) -> Self::I {
        unsafe {
            let n = vdupq_n_s32(n as i32);
            each_half!(a, |x| vshlq_u32(x, n))
        }
    }
    #[inline(always)]
    fn eq(self, a: Self::I, b: Self::I) -> Self::I {
        unsafe { each_half!(a, b, |x, y| vceqq_u32(x, y)) }
    }
    #[inline(always)]
    fn gt(self, a: Self::I, b: Self::I) -> Self::I {
        unsafe { each_half!(a, b, |x, y| vcgtq_s32(vreinterpretq_s32_u32(x), vreinterpretq_s32_u32(y))) }
    }
    #[inline(always)]
    fn select(self, mask: Self::I, a: Self::I, b: Self::I) -> Self::I {
        unsafe { [vbslq_u32(mask[0], a[0], b[0]), vbslq_u32(mask[1], a[1], b[1])] }
    }
    #[inline(always)]
    fn bitcast_f(self, x: Self::I) -> Self::F {
        unsafe { each_half!(x, |v| vreinterpretq_f32_u32(v)) }
    }
    #[inline(always)]
    fn bitcast_i(self, x: Self::F) -> Self::I {
        unsafe { each_half!(x, |v| vreinterpretq_u32_f32(v)) }
    }
    #[inline(always)]
    fn halves(self, h: &[u16; 8]) -> Self::F {
        // FCVTL and FCVTL2: exact, NaNs quieted with their payload (FPCR.DN is clear on Linux), as
        // the portable conversion.
        unsafe {
            let v = vld1q_u16(h.as_ptr());
            let (lo, hi): (float32x4_t, float32x4_t);
            std::arch::asm!(
                "fcvtl {lo:v}.4s, {v:v}.4h",
                "fcvtl2 {hi:v}.4s, {v:v}.8h",
                v = in(vreg) v,
                lo = out(vreg) lo,
                hi = out(vreg) hi,
                options(pure, nomem, nostack, preserves_flags)
            );
            [lo, hi]
        }
    }
    #[inline(always)]
    fn half(self, h: u16) -> f32 {
        let out: f32;
        unsafe {
            std::arch::asm!("fcvt {out:s}, {h:h}", h = in(vreg) h, out = out(vreg) out, options(pure, nomem, nostack, preserves_flags));
        }
        out
    }
}
