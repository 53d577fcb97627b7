//! The CPU path's instruction sets: which one runs, and eight-lane arithmetic written once for
//! all of them.
//!
//! A CPU kernel ([`Kernel`]) is generic over [`Lanes`], a zero-sized token for an instruction set
//! whose methods are eight-lane operations (`u8` codes widened to `i32`, nibbles spread over
//! lanes, `f32` multiply and add, fp16 conversion). [`run`] picks the best level the CPU has
//! ([`Simd::active`]) and calls the kernel with that level's token inside a function compiled for
//! it, so every operation inlines to one or two instructions of that set: AVX2 (with F16C) or
//! SSE4.1 on x86-64, NEON on aarch64, SIMD128 in the WASM build, and plain eight-element arrays
//! everywhere (`Scalar`: the portable level, auto-vectorised where the compiler manages, and the
//! one that runs where no other does).
//!
//! Why tokens and not `cfg`: x86-64 binaries are built for the baseline (SSE2) and learn at run
//! time what the CPU has. A token can only be made where its instruction set was detected
//! (`Avx2::new`), so holding one is the proof that its intrinsics may run.
//!
//! Why explicit lanes and not the auto-vectoriser alone: the decoders' loops vectorised or not
//! depending on the group width, the closure they went through and the unroller's order (Q8_0,
//! FP8 and the K-quants decoded one value at a time while INT8 ran eight wide). Written in lanes,
//! every format's decoder is eight values an operation on every level.
//!
//! Every level computes the same bits: each operation is exact or one IEEE rounding (`mul`,
//! `add`, `sub` are never fused), and the tests compare every level against the formats'
//! one-value-at-a-time references.

/// An operation on each half of a pair of 128-bit registers (the SSE4.1, SIMD128 and NEON levels).
#[allow(unused_macros)]
macro_rules! each_half {
    ($a:expr, |$x:ident| $body:expr) => {{
        let [lo, hi] = $a;
        [
            {
                let $x = lo;
                $body
            },
            {
                let $x = hi;
                $body
            },
        ]
    }};
    ($a:expr, $b:expr, |$x:ident, $y:ident| $body:expr) => {{
        let ([al, ah], [bl, bh]) = ($a, $b);
        [
            {
                let ($x, $y) = (al, bl);
                $body
            },
            {
                let ($x, $y) = (ah, bh);
                $body
            },
        ]
    }};
}

#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(target_arch = "aarch64")]
pub(crate) use neon::Neon;

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) use wasm::Wasm128;
#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2, Sse41};

/// The instruction sets the CPU path's kernels are compiled for: each kernel exists once per
/// level, and a lookup runs the best the CPU has ([`Simd::active`]). Every level gives the same
/// bits, which the tests check on every level the machine has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Simd {
    /// Portable eight-element arrays, compiled for the target's baseline (SSE2 on x86-64, NEON
    /// on aarch64) and vectorised as far as the compiler manages: every target has it.
    Scalar,
    /// x86-64 with SSE4.1: two 128-bit halves.
    Sse41,
    /// x86-64 with AVX2 and F16C: one 256-bit register.
    Avx2,
    /// WASM SIMD128 (the browser build enables it: `.cargo/config.toml`): two 128-bit halves.
    Simd128,
    /// aarch64 NEON, every aarch64 CPU's: two 128-bit halves, fp16 converted by `fcvtl`.
    Neon,
}

impl Simd {
    /// Every level, in order.
    pub const ALL: [Simd; 5] = [Simd::Scalar, Simd::Sse41, Simd::Avx2, Simd::Simd128, Simd::Neon];

    /// The level's name, as `EDO_CPU_SIMD` takes it and reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Simd::Scalar => "scalar",
            Simd::Sse41 => "sse4.1",
            Simd::Avx2 => "avx2",
            Simd::Simd128 => "simd128",
            Simd::Neon => "neon",
        }
    }

    /// Whether this CPU (and this build) can run the level.
    pub fn is_supported(self) -> bool {
        match self {
            Simd::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Simd::Sse41 => Sse41::new().is_some(),
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => Avx2::new().is_some(),
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128 => true,
            #[cfg(target_arch = "aarch64")]
            Simd::Neon => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The levels this CPU can run, lowest first.
    pub fn supported() -> Vec<Simd> {
        Simd::ALL.into_iter().filter(|l| l.is_supported()).collect()
    }

    /// The level lookups run at: the best this CPU has, or at most the one named by the
    /// environment variable `EDO_CPU_SIMD` (`scalar`; `sse4.1`, `avx2` on x86-64; `neon` on
    /// aarch64), read once — to measure
    /// what a level gains, or to rule out a miscompiled one. An unknown name is ignored, with a
    /// warning on standard error.
    pub fn active() -> Simd {
        static ACTIVE: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
        *ACTIVE.get_or_init(|| {
            let best = Simd::supported().into_iter().max().unwrap_or(Simd::Scalar);
            #[cfg(not(target_arch = "wasm32"))]
            if let Ok(name) = std::env::var("EDO_CPU_SIMD") {
                return match Simd::ALL.into_iter().find(|l| l.name() == name.trim()) {
                    Some(cap) => Simd::supported().into_iter().filter(|&l| l <= cap).max().unwrap_or(Simd::Scalar),
                    None => {
                        let names: Vec<&str> = Simd::ALL.iter().map(|l| l.name()).collect();
                        eprintln!("edo: EDO_CPU_SIMD={name:?} is none of {}; using {}", names.join(", "), best.name());
                        best
                    }
                };
            }
            best
        })
    }
}

impl std::fmt::Display for Simd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A CPU kernel: its arguments, and a body generic over the instruction set, which [`run`]
/// instantiates for the CPU's. Implementations mark `run` `#[inline(always)]` and call the
/// kernel's function directly.
///
/// Why a trait and not a closure: a closure (or a function item passed as a value) is called
/// through a shim that is compiled once, for the baseline, and merely called from the AVX2
/// instantiation. The disassembly showed exactly that: every CPU kernel ran as SSE2 code. A
/// direct call from an `#[inline(always)]` method is inlined into the AVX2 instantiation.
pub trait Kernel {
    /// What the kernel returns.
    type Output;
    /// Runs the kernel with the level's lanes.
    fn run<L: Lanes>(self, lanes: L) -> Self::Output;
}

/// Runs `kernel` at [`Simd::active`].
///
/// The browser build has one level the page can use, SIMD128 (nothing can cap it there), and
/// compiles only that instantiation here: each kernel's portable one, which only [`run_at`]
/// reaches (the tests), would add its size to every page's `.wasm` for nothing.
#[inline(always)]
pub fn run<K: Kernel>(kernel: K) -> K::Output {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return kernel.run(Wasm128);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    run_at(Simd::active(), kernel)
}

/// Runs `kernel` at `level`, or at the best level below it this CPU has.
#[inline(always)]
pub fn run_at<K: Kernel>(level: Simd, kernel: K) -> K::Output {
    #[cfg(target_arch = "x86_64")]
    {
        if level >= Simd::Avx2 {
            if let Some(lanes) = Avx2::new() {
                // SAFETY: `lanes` exists, so the CPU has what `with_avx2` is compiled for.
                return unsafe { with_avx2(kernel, lanes) };
            }
        }
        if level >= Simd::Sse41 {
            if let Some(lanes) = Sse41::new() {
                // SAFETY: as above, for SSE4.1.
                return unsafe { with_sse41(kernel, lanes) };
            }
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if level >= Simd::Simd128 {
        return kernel.run(Wasm128);
    }
    #[cfg(target_arch = "aarch64")]
    if level >= Simd::Neon {
        return kernel.run(Neon);
    }
    let _ = level;
    kernel.run(Scalar)
}

/// `kernel` compiled for AVX2, F16C and POPCNT (the Hamming scan's counts).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,popcnt")]
unsafe fn with_avx2<K: Kernel>(kernel: K, lanes: Avx2) -> K::Output {
    kernel.run(lanes)
}

/// `kernel` compiled for SSE4.1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.1")]
unsafe fn with_sse41<K: Kernel>(kernel: K, lanes: Sse41) -> K::Output {
    kernel.run(lanes)
}

/// Eight lanes of arithmetic on one instruction set: a token that exists only where the set
/// does. `F` holds eight `f32`, `I` eight 32-bit integers. Sealed: the crate's levels are the
/// only implementations.
///
/// Comparisons and conversions read integer lanes as signed (`i32`): every level the same way, so
/// a lane from [`Lanes::signed_bytes`] converts to its negative value.
#[allow(private_bounds)]
pub trait Lanes: Copy + Sealed {
    /// Eight `f32`.
    type F: Copy;
    /// Eight 32-bit integers.
    type I: Copy;

    /// Every lane `x`.
    fn splat(self, x: f32) -> Self::F;
    /// Every lane `x`.
    fn splat_i(self, x: u32) -> Self::I;
    /// Lane `j` is `x[j]`.
    fn load(self, x: &[f32; 8]) -> Self::F;
    /// `out[j]` is lane `j`.
    fn store(self, x: Self::F, out: &mut [f32; 8]);
    /// Lane `j` is `b[j]`, zero-extended.
    fn bytes(self, b: &[u8; 8]) -> Self::I;
    /// Lane `j` is `b[j]` read as an `i8`, sign-extended: the byte's top bit copied into bits
    /// 8 to 31.
    fn signed_bytes(self, b: &[u8; 8]) -> Self::I;
    /// Lane `j` is `h[j]`, zero-extended.
    fn u16s(self, h: &[u16; 8]) -> Self::I;
    /// Lane `j` is bits `W·j .. W·j + W` of `x` (`W` of 1, 2 or 4).
    fn fields<const W: u32>(self, x: u32) -> Self::I;
    /// Each lane's integer, read as an `i32` (below 2²⁴ in magnitude: exact), as `f32`.
    fn to_f32(self, x: Self::I) -> Self::F;
    /// `a + b`, one rounding.
    fn add(self, a: Self::F, b: Self::F) -> Self::F;
    /// `a − b`, one rounding.
    fn sub(self, a: Self::F, b: Self::F) -> Self::F;
    /// `a · b`, one rounding (never fused with an addition).
    fn mul(self, a: Self::F, b: Self::F) -> Self::F;
    /// Bitwise and.
    fn and(self, a: Self::I, b: Self::I) -> Self::I;
    /// Bitwise or.
    fn or(self, a: Self::I, b: Self::I) -> Self::I;
    /// Each lane shifted left by `n` (below 32).
    fn shl(self, a: Self::I, n: u32) -> Self::I;
    /// All ones where `a == b`, else zero.
    fn eq(self, a: Self::I, b: Self::I) -> Self::I;
    /// All ones where `a > b` (signed), else zero.
    fn gt(self, a: Self::I, b: Self::I) -> Self::I;
    /// `a` where `mask` is all ones, `b` where it is zero.
    fn select(self, mask: Self::I, a: Self::I, b: Self::I) -> Self::I;
    /// The lanes' bits as `f32`.
    fn bitcast_f(self, x: Self::I) -> Self::F;
    /// The lanes' `f32` bits.
    fn bitcast_i(self, x: Self::F) -> Self::I;

    /// Lane `j` is bits `FIRST + W·j .. FIRST + W·j + W` of `x` shifted left by `UP`
    /// (`FIRST + 8·W` at most 32, `UP + 8·W` at most 32): `fields::<W>(x >> FIRST) << UP`, which
    /// a level with per-lane shifts does in three operations.
    #[inline(always)]
    fn fields_up<const W: u32, const FIRST: u32, const UP: u32>(self, x: u32) -> Self::I {
        self.shl(self.fields::<W>(x.checked_shr(FIRST).unwrap_or(0)), UP)
    }

    /// An IEEE binary16 value as `f32`, exactly (as the portable `half_to_f32`).
    #[inline(always)]
    fn half(self, h: u16) -> f32 {
        half_to_f32(h)
    }

    /// IEEE binary16 values as `f32`, exactly, NaNs quieted with their payload kept (as `half`'s
    /// conversion and x86's F16C, which AVX2 uses, do), from integer lanes without a branch.
    #[inline(always)]
    fn halves(self, h: &[u16; 8]) -> Self::F {
        let h = self.u16s(h);
        let c = |x: u32| self.splat_i(x);
        let sign = self.shl(self.and(h, c(0x8000)), 16);
        let em = self.and(h, c(0x7fff));
        // × 2¹¹²: exponent and mantissa into f32's places, half subnormals made exact normals.
        // (Rebasing normal halves in integers and scaling subnormal ones from their integer
        // mantissa, so that no product has a subnormal operand, cost more operations a lane than
        // it saved: FP16 gathers took 0.96 → 1.27 ms on SSE4.1 and 1.72 → 2.15 ms on the portable
        // level with it, 10 000 × 64 in cache, 65 536 ids, on 2026-12-05's machine.)
        let scaled = self.bitcast_i(self.mul(self.bitcast_f(self.shl(em, 13)), self.splat(f32::from_bits(0x7780_0000))));
        let quiet = self.and(self.gt(em, c(0x7c00)), c(0x0040_0000));
        let special = self.or(self.or(self.shl(em, 13), c(0x7f80_0000)), quiet);
        self.bitcast_f(self.or(sign, self.select(self.gt(em, c(0x7bff)), special, scaled)))
    }
}

/// An IEEE binary16 value as f32, exactly (as `half::f16::to_f32`, quieting NaNs as it does),
/// without branches, so a loop of them runs on vector registers: exponent and mantissa are moved
/// into f32's places and rescaled by 2¹¹² (which also makes half subnormals exact normals);
/// infinities and NaNs get f32's all-ones exponent instead. A call per value would otherwise go
/// through `half`'s run-time CPU dispatch, which made FP16 rows slower to decode than FP32 ones.
#[inline(always)]
pub(crate) fn half_to_f32(h: u16) -> f32 {
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7fff;
    let scaled = (f32::from_bits(em << 13) * f32::from_bits(0x7780_0000)).to_bits(); // × 2¹¹²
    let special = (em << 13) | 0x7f80_0000 | if em > 0x7c00 { 0x0040_0000 } else { 0 };
    f32::from_bits(sign | if em >= 0x7c00 { special } else { scaled })
}

/// Keeps [`Lanes`] to the levels defined here.
pub(crate) trait Sealed {}

/// The portable level: eight-element arrays, each operation a loop the compiler may vectorise.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scalar;

impl Sealed for Scalar {}

impl Lanes for Scalar {
    type F = [f32; 8];
    type I = [u32; 8];

    #[inline(always)]
    fn splat(self, x: f32) -> [f32; 8] {
        [x; 8]
    }
    #[inline(always)]
    fn splat_i(self, x: u32) -> [u32; 8] {
        [x; 8]
    }
    #[inline(always)]
    fn load(self, x: &[f32; 8]) -> [f32; 8] {
        *x
    }
    #[inline(always)]
    fn store(self, x: [f32; 8], out: &mut [f32; 8]) {
        *out = x;
    }
    #[inline(always)]
    fn bytes(self, b: &[u8; 8]) -> [u32; 8] {
        b.map(u32::from)
    }
    #[inline(always)]
    fn signed_bytes(self, b: &[u8; 8]) -> [u32; 8] {
        b.map(|x| x as i8 as u32)
    }
    #[inline(always)]
    fn u16s(self, h: &[u16; 8]) -> [u32; 8] {
        h.map(u32::from)
    }
    #[inline(always)]
    fn fields<const W: u32>(self, x: u32) -> [u32; 8] {
        std::array::from_fn(|j| (x >> (W * j as u32)) & ((1 << W) - 1))
    }
    #[inline(always)]
    fn to_f32(self, x: [u32; 8]) -> [f32; 8] {
        x.map(|v| v as i32 as f32)
    }
    #[inline(always)]
    fn add(self, a: [f32; 8], b: [f32; 8]) -> [f32; 8] {
        std::array::from_fn(|j| a[j] + b[j])
    }
    #[inline(always)]
    fn sub(self, a: [f32; 8], b: [f32; 8]) -> [f32; 8] {
        std::array::from_fn(|j| a[j] - b[j])
    }
    #[inline(always)]
    fn mul(self, a: [f32; 8], b: [f32; 8]) -> [f32; 8] {
        std::array::from_fn(|j| a[j] * b[j])
    }
    #[inline(always)]
    fn and(self, a: [u32; 8], b: [u32; 8]) -> [u32; 8] {
        std::array::from_fn(|j| a[j] & b[j])
    }
    #[inline(always)]
    fn or(self, a: [u32; 8], b: [u32; 8]) -> [u32; 8] {
        std::array::from_fn(|j| a[j] | b[j])
    }
    #[inline(always)]
    fn shl(self, a: [u32; 8], n: u32) -> [u32; 8] {
        a.map(|v| v << n)
    }
    #[inline(always)]
    fn eq(self, a: [u32; 8], b: [u32; 8]) -> [u32; 8] {
        std::array::from_fn(|j| if a[j] == b[j] { u32::MAX } else { 0 })
    }
    #[inline(always)]
    fn gt(self, a: [u32; 8], b: [u32; 8]) -> [u32; 8] {
        std::array::from_fn(|j| if a[j] as i32 > b[j] as i32 { u32::MAX } else { 0 })
    }
    #[inline(always)]
    fn select(self, mask: [u32; 8], a: [u32; 8], b: [u32; 8]) -> [u32; 8] {
        std::array::from_fn(|j| (a[j] & mask[j]) | (b[j] & !mask[j]))
    }
    #[inline(always)]
    fn bitcast_f(self, x: [u32; 8]) -> [f32; 8] {
        x.map(f32::from_bits)
    }
    #[inline(always)]
    fn bitcast_i(self, x: [f32; 8]) -> [u32; 8] {
        x.map(f32::to_bits)
    }
}

#[cfg(test)]
mod tests {
    use super::{run_at, Kernel, Lanes, Simd};

    /// Every operation of every level this machine has, on values chosen to reach their edges
    /// (every half, every byte, fields of random words, comparisons of signed neighbours), equals
    /// the portable level's.
    struct Ops<'a>(&'a mut Vec<u32>);

    impl Kernel for Ops<'_> {
        type Output = ();
        #[inline(always)]
        fn run<L: Lanes>(self, l: L) {
            let out = self.0;
            let mut push = |f: L::F| {
                let mut o = [0f32; 8];
                l.store(f, &mut o);
                out.extend(o.map(f32::to_bits));
            };
            let mut rng = crate::synth::Rng::new(5);
            for h in (0..=u16::MAX as u32).step_by(8) {
                let halves: [u16; 8] = std::array::from_fn(|j| (h + j as u32) as u16);
                push(l.halves(&halves));
                push(l.load(&halves.map(|h| l.half(h))));
            }
            for _ in 0..512 {
                let w = rng.next_u32();
                let b = w.to_le_bytes();
                let bytes = [b[0], b[1], b[2], b[3], b[3], b[2], b[1], b[0]];
                let [x, y] = [l.bytes(&bytes), l.fields::<4>(w)];
                let up =
                    [l.fields_up::<2, 0, 4>(w), l.fields_up::<2, 16, 4>(w), l.fields_up::<4, 0, 0>(w), l.fields_up::<1, 24, 3>(w), l.fields_up::<2, 8, 16>(w)];
                for i in
                    [x, y, l.signed_bytes(&bytes), l.fields::<2>(w), l.fields::<1>(w), l.u16s(&std::array::from_fn(|j| (w >> j) as u16))].into_iter().chain(up)
                {
                    push(l.bitcast_f(i));
                    push(l.to_f32(i));
                }
                let (fx, fy) = (l.bitcast_f(l.shl(x, 20)), l.mul(l.to_f32(y), l.splat(f32::from_bits(rng.next_u32() & 0x7f7f_ffff))));
                for f in [l.add(fx, fy), l.sub(fx, fy), l.mul(fx, fy), l.load(&[1.5, -0.0, f32::INFINITY, 3.0, 5.0, -7.25, 1e-40, 9.0])] {
                    push(f);
                }
                for i in [l.and(x, y), l.or(x, y), l.eq(x, y), l.gt(x, y), l.gt(y, x), l.select(l.gt(x, y), x, y), l.bitcast_i(fy), l.splat_i(w)] {
                    push(l.bitcast_f(i));
                }
            }
        }
    }

    #[test]
    fn every_level_computes_the_portable_bits() {
        let mut want = Vec::new();
        run_at(Simd::Scalar, Ops(&mut want));
        for level in Simd::supported() {
            let mut got = Vec::new();
            run_at(level, Ops(&mut got));
            assert_eq!(got.len(), want.len());
            if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                panic!("{level}: value {i}: {:#010x} vs the portable {:#010x}", got[i], want[i]);
            }
        }
    }

    /// `EDO_EXPECT_SIMD=<level>` (the test script sets it for each emulated CPU) asserts which
    /// level is the best this CPU runs, so a run meant for a level cannot pass on another.
    #[test]
    fn the_expected_level_is_the_best_supported() {
        let best = Simd::supported().into_iter().max().unwrap_or(Simd::Scalar);
        println!("levels supported: {:?}", Simd::supported());
        if let Ok(want) = std::env::var("EDO_EXPECT_SIMD") {
            assert_eq!(best.name(), want.trim(), "the best level this CPU runs");
        }
    }

    #[test]
    fn half_to_f32_is_exact_for_every_half() {
        for h in 0..=u16::MAX {
            let (got, want) = (super::half_to_f32(h), half::f16::from_bits(h).to_f32());
            assert_eq!(got.to_bits(), want.to_bits(), "{h:#06x}: {got} vs {want}");
        }
    }

    #[test]
    fn halves_equal_the_half_crates_conversion() {
        for h in (0..=u16::MAX as u32).step_by(8) {
            let halves: [u16; 8] = std::array::from_fn(|j| (h + j as u32) as u16);
            let got = super::Scalar.halves(&halves);
            for (g, h) in got.iter().zip(halves) {
                assert_eq!(g.to_bits(), half::f16::from_bits(h).to_f32().to_bits(), "{h:#06x}");
                assert_eq!(super::Scalar.half(h).to_bits(), g.to_bits(), "{h:#06x}");
            }
        }
    }
}
