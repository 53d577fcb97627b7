//! The CPU path: the same lookups as the GPU kernels, in plain Rust.
//!
//! It is the oracle the GPU is tested against and the fallback when there is no adapter, so it is
//! written to be fast as well as obviously right: one contiguous block of output rows per core,
//! and the format's scalar decoder inlined into loops compiled twice on x86-64 (baseline SSE2,
//! and AVX2 picked at run time), so they vectorise eight values wide where the CPU allows.

pub(crate) mod bag;
mod gather;

pub use bag::{embedding_bag, embedding_bags};
pub use gather::{gather, gather_into};

/// Runs `f` compiled for AVX2 and POPCNT when the CPU has them (x86-64), else as is. `f` is inlined into one
/// of two instantiations, so its loops are vectorised for the instruction set that runs them.
#[inline(always)]
pub(crate) fn simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU supports AVX2 and POPCNT, checked just above.
            return unsafe { simd_avx2(f) };
        }
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn simd_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}
