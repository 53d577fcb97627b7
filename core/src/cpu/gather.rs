//! Gather: ids → dense f32 rows.

use std::marker::PhantomData;

use super::prefetch;
#[cfg(not(target_arch = "wasm32"))]
use super::prefetch_distance;
use crate::format::{dispatch, Codec, PackedTable};
use crate::simd::{Kernel, Lanes};
use crate::{Bounds, Error};

/// Output rows per thread below which the CPU path stays on one thread.
const MIN_ROWS_PER_THREAD: usize = 256;
/// Output values per thread below which it stays on one thread: starting a thread costs tens of
/// microseconds, a gather of 1024 rows of 64 values a few (the benchmark suite's latency cases
/// ran 1024 ids 12× slower on two threads than on one with the row count alone).
const MIN_VALUES_PER_THREAD: usize = 1 << 16;

/// Gathers `ids` from `table` into a new `ids.len() × dim` f32 buffer.
pub fn gather(table: &PackedTable, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
    let mut out = super::zeroed(ids.len(), table.dim(), "gather output")?;
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
    let min_rows = MIN_ROWS_PER_THREAD.max(MIN_VALUES_PER_THREAD / dim.max(1));
    crate::par::for_each_chunk_mut(out, dim, min_rows, |first, block| {
        let ids = &ids[first..first + block.len() / dim];
        dispatch!(table.format(), C => crate::simd::run(GatherBlock::<C>(PhantomData, (table, ids, bounds, block))));
        None::<()>
    });
    Ok(())
}

/// [`gather_block`] as a [`Kernel`].
struct GatherBlock<'a, C>(PhantomData<C>, (&'a PackedTable, &'a [u32], Bounds, &'a mut [f32]));

impl<C: Codec> Kernel for GatherBlock<'_, C> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lanes>(self, lanes: L) {
        gather_block::<C, L>(lanes, self.1)
    }
}

/// The rows a gather reads: a table's packed words, ids resolved through the bounds policy.
#[derive(Clone, Copy)]
struct Rows<'a> {
    words: &'a [u32],
    row_words: usize,
    rows: usize,
    bounds: Bounds,
}

impl<'a> Rows<'a> {
    fn new(table: &'a PackedTable, bounds: Bounds) -> Rows<'a> {
        Rows { words: table.words(), row_words: table.row_words(), rows: table.rows(), bounds }
    }

    /// The packed words of `id`'s row; `None` where the policy reads zeros.
    #[inline(always)]
    fn of(self, id: u32) -> Option<&'a [u32]> {
        let r = self.bounds.resolve(id, self.rows)?;
        Some(&self.words[r * self.row_words..(r + 1) * self.row_words])
    }

    /// `id`'s row decoded into `dst`, or zeros.
    #[inline(always)]
    fn decode<C: Codec, L: Lanes>(self, lanes: L, id: u32, dst: &mut [f32]) {
        match self.of(id) {
            Some(row) => crate::format::decode_in_kernel::<C, L>(lanes, row, dst),
            None => dst.fill(0.0),
        }
    }
}

/// Each row decoded into its place, the lines of the row [`prefetch_distance`] ids ahead
/// prefetched.
#[cfg(not(target_arch = "wasm32"))]
#[inline(always)]
fn gather_block<C: Codec, L: Lanes>(lanes: L, (table, ids, bounds, out): (&PackedTable, &[u32], Bounds, &mut [f32])) {
    let rows = Rows::new(table, bounds);
    let ahead = prefetch_distance(rows.row_words);
    for (j, (&id, dst)) in ids.iter().zip(out.chunks_exact_mut(table.dim())).enumerate() {
        if let Some(row) = ids.get(j + ahead).and_then(|&next| rows.of(next)) {
            prefetch(row);
        }
        rows.decode::<C, L>(lanes, id, dst);
    }
}

/// Ids a WASM gather touches together.
#[cfg(target_arch = "wasm32")]
const TOUCH_BLOCK: usize = 16;

/// Tables below this many bytes are gathered in WASM without touching rows ahead: in the caches
/// it only costs (Node's in-cache INT8 gathers took 1.3× longer with it).
#[cfg(target_arch = "wasm32")]
const TOUCH_MIN_BYTES: usize = 8 << 20;

/// In WASM (browsers, WASI): the rows of [`TOUCH_BLOCK`] ids at a time, each block's lines
/// touched (a byte of each read, [`prefetch`]) while the block before it is decoded. WASM has no
/// prefetch, and a read ahead of each row, one at a time, kept few misses in flight: the reads of
/// a block in one tight loop put them all in flight together. Out of the caches an INT8 gather of
/// 65 536 ids took 4.3–4.9 ms instead of 6.9–7.2 under wasmtime and was 1.6× faster in Node
/// (docs/edge.md, docs/browser.md). Not for FP32 rows, which are copies that the CPU's own
/// prefetcher follows (touching them made Node's FP32 gathers 1.5× slower), nor for tables in
/// the caches ([`TOUCH_MIN_BYTES`]).
#[cfg(target_arch = "wasm32")]
#[inline(always)]
fn gather_block<C: Codec, L: Lanes>(lanes: L, (table, ids, bounds, out): (&PackedTable, &[u32], Bounds, &mut [f32])) {
    let dim = table.dim();
    let rows = Rows::new(table, bounds);
    let decode = |ids: &[u32], out: &mut [f32]| {
        for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(dim)) {
            rows.decode::<C, L>(lanes, id, dst);
        }
    };
    if table.format() == crate::format::Format::F32 || 4 * rows.words.len() < TOUCH_MIN_BYTES {
        return decode(ids, out);
    }
    let touch = |ids: &[u32]| ids.iter().filter_map(|&id| rows.of(id)).for_each(prefetch);
    let mut blocks = ids.chunks(TOUCH_BLOCK).zip(out.chunks_mut(TOUCH_BLOCK * dim)).peekable();
    if let Some((first, _)) = blocks.peek() {
        touch(first);
    }
    while let Some((ids, out)) = blocks.next() {
        if let Some((next, _)) = blocks.peek() {
            touch(next);
        }
        decode(ids, out);
    }
}
