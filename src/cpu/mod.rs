//! The CPU path: the same lookups as the GPU kernels, in plain Rust.
//!
//! It is the oracle the GPU is tested against and the fallback when there is no adapter, so it is
//! written to be fast as well as obviously right: one contiguous block of output rows per core, the
//! format's scalar decoder inlined into a loop compiled twice on x86-64 (baseline SSE2, and AVX2
//! picked at run time), so the decode loops vectorise eight values wide where the CPU allows.

use crate::format::{dispatch, Codec, PackedTable};
use crate::{Bounds, Error};

/// Output rows per thread below which the CPU path stays on one thread.
const MIN_ROWS_PER_THREAD: usize = 256;

/// Gathers `ids` from `table` into a new `ids.len() × dim` f32 buffer.
pub fn gather(table: &PackedTable, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
    let mut out = vec![0f32; ids.len() * table.dim()];
    gather_into(table, ids, bounds, &mut out)?;
    Ok(out)
}

/// Gathers `ids` from `table` into `out` (`ids.len() × dim` values).
///
/// With [`Bounds::Error`] the ids are checked before anything is written.
pub fn gather_into(table: &PackedTable, ids: &[u32], bounds: Bounds, out: &mut [f32]) -> Result<(), Error> {
    let dim = table.dim();
    if out.len() != ids.len() * dim {
        return Err(Error::ShapeMismatch { what: "gather output (ids × dim)", expected: ids.len() * dim, actual: out.len() });
    }
    bounds.check(ids, table.rows())?;
    if table.rows() == 0 && !ids.is_empty() && bounds == Bounds::Clamp {
        // Clamping into an empty table has no row to clamp to.
        return Err(Error::IdOutOfRange { index: 0, id: ids[0], rows: 0 });
    }
    crate::par::for_each_chunk_mut(out, dim, MIN_ROWS_PER_THREAD, |first, block| {
        let ids = &ids[first..first + block.len() / dim];
        dispatch!(table.format(), C => gather_block::<C>(table, ids, bounds, block));
        None::<()>
    });
    Ok(())
}

fn gather_block<C: Codec>(table: &PackedTable, ids: &[u32], bounds: Bounds, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            unsafe { gather_block_avx2::<C>(table, ids, bounds, out) };
            return;
        }
    }
    gather_block_generic::<C>(table, ids, bounds, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gather_block_avx2<C: Codec>(table: &PackedTable, ids: &[u32], bounds: Bounds, out: &mut [f32]) {
    gather_block_generic::<C>(table, ids, bounds, out)
}

#[inline(always)]
fn gather_block_generic<C: Codec>(table: &PackedTable, ids: &[u32], bounds: Bounds, out: &mut [f32]) {
    let rows = table.rows();
    let dim = table.dim();
    let row_words = table.row_words();
    let words = table.words();
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(dim)) {
        match bounds.resolve(id, rows) {
            Some(r) => C::decode_row(&words[r * row_words..(r + 1) * row_words], dst),
            None => dst.fill(0.0),
        }
    }
}
