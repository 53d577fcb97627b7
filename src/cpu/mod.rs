//! The CPU path: the same lookups as the GPU kernels, in plain Rust.
//!
//! It is the oracle the GPU is tested against and the fallback when there is no adapter, so it is
//! written to be fast as well as obviously right: one contiguous block of output rows per core,
//! and the format's scalar decoder inlined into loops compiled twice on x86-64 (baseline SSE2,
//! and AVX2 picked at run time), so they vectorise eight values wide where the CPU allows.

pub(crate) mod bag;
mod gather;

pub(crate) use bag::pool_rows;
pub use bag::{embedding_bag, embedding_bags, embedding_bags_into};
pub use gather::{gather, gather_into};

/// f32 values rounded to f16, to nearest even (`half`'s conversion; beyond f16's range ±inf):
/// how edo's f16 outputs round, on the CPU path and in `f16_common.wgsl` alike.
pub fn to_f16(values: &[f32]) -> Vec<half::f16> {
    values.iter().map(|&v| half::f16::from_f32(v)).collect()
}

/// `rows × dim` zeros for a lookup's output, allocated fallibly: an output beyond memory (a
/// page's ids times a large dim, say) is [`crate::Error::HostOutOfMemory`] naming `what`.
pub(crate) fn zeroed(rows: usize, dim: usize, what: &'static str) -> Result<Vec<f32>, crate::Error> {
    let bytes = (rows as u128 * dim as u128 * 4).min(u64::MAX as u128) as u64;
    let len = rows.checked_mul(dim).ok_or(crate::Error::HostOutOfMemory { what, bytes })?;
    crate::alloc::zeroed(len, what)
}

/// Rows to look ahead when prefetching: rows are scattered over tables much larger than the
/// caches, so a lookup asks for the row this many ids ahead, and the cache misses of several rows
/// overlap instead of coming one after another.
pub(crate) const PREFETCH_DISTANCE: usize = 16;

/// Hints the CPU to fetch the cache lines of `row` (a no-op where there is no prefetch hint).
#[inline(always)]
pub(crate) fn prefetch(row: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..row.len()).step_by(16) {
        // SAFETY: a prefetch is a hint with no memory effect; the address is inside `row`.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(row[line..].as_ptr() as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// A CPU kernel: its arguments, and a body that [`simd`] compiles for the CPU's instruction set.
/// Implementations mark `run` `#[inline(always)]` and call the kernel's function directly.
///
/// Why a trait and not a closure: a closure (or a function item passed as a value) is called
/// through a shim that is compiled once, for the baseline, and merely called from the AVX2
/// instantiation. The disassembly showed exactly that: every CPU kernel ran as SSE2 code. A
/// direct call from an `#[inline(always)]` method is inlined into the AVX2 instantiation.
pub(crate) trait Kernel {
    type Output;
    fn run(self) -> Self::Output;
}

/// Runs `kernel` compiled for AVX2 and POPCNT when the CPU has them (x86-64), else as is, so its
/// loops are vectorised for the instruction set that runs them.
#[inline(always)]
pub(crate) fn simd<K: Kernel>(kernel: K) -> K::Output {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU supports AVX2 and POPCNT, checked just above.
            return unsafe { simd_avx2(kernel) };
        }
    }
    kernel.run()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn simd_avx2<K: Kernel>(kernel: K) -> K::Output {
    kernel.run()
}

#[cfg(test)]
mod tests {
    #[test]
    fn outputs_past_usize_are_errors() {
        assert_eq!(super::zeroed(3, 5, "x").unwrap(), vec![0.0; 15]);
        assert!(matches!(super::zeroed(usize::MAX, 2, "x"), Err(crate::Error::HostOutOfMemory { what: "x", .. })));
    }
}
