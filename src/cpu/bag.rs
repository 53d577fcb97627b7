//! EmbeddingBag and table-batched EmbeddingBag on the CPU: the oracle of the GPU bag kernel.
//!
//! Rows are pooled in index order: `acc += w·row` (Sum), then `/ n` (Mean), or `max` (Max), from
//! a zero (Sum, Mean) or −∞ (Max) start; an empty bag is a zero row. Under [`Bounds::Zero`] a bad
//! index reads as a zero row, which still counts for Mean and takes part in Max.

use std::marker::PhantomData;

use super::{prefetch, Kernel, PREFETCH_DISTANCE};
use crate::bags::{Bags, Layout, Pooling};
use crate::format::{dispatch, Codec, PackedTable};
use crate::{Bounds, Error};

/// Pools `bags` of rows of one table into `bags.len() × dim` values (`indices.len() × dim` for
/// [`Pooling::None`]).
pub fn embedding_bag(table: &PackedTable, bags: &Bags, pooling: Pooling, bounds: Bounds) -> Result<Vec<f32>, Error> {
    embedding_bags(&[table], bags.len(), bags, pooling, bounds, Layout::Concat)
}

/// Table-batched EmbeddingBag: `tables.len() = T` tables, `batch = B` samples, bags
/// feature-major (`offsets` describe `B·T` bags). Output `[B, Σ dims]` ([`Layout::Concat`]) or
/// table after table ([`Layout::PerTable`]). [`Pooling::None`] needs a single table.
pub fn embedding_bags(tables: &[&PackedTable], batch: usize, bags: &Bags, pooling: Pooling, bounds: Bounds, layout: Layout) -> Result<Vec<f32>, Error> {
    let plan = Plan::new(tables, batch, bags, pooling, bounds)?;
    let mut out = vec![0f32; plan.out_len];
    let weights = bags.per_sample_weights;
    if pooling == Pooling::None {
        let t = tables[0];
        let dim = t.dim();
        crate::par::for_each_chunk_mut(&mut out, dim, 256, |first, block| {
            let ids = &bags.indices[first..first + block.len() / dim];
            let mut ahead = Lookahead::new(bounds, ids.iter().map(|&id| (t, id)));
            for (k, dst) in block.chunks_exact_mut(dim).enumerate() {
                let j = first + k;
                let w = weights.map(|w| std::slice::from_ref(&w[j]));
                dispatch!(t.format(), C => super::simd(Pool::<C, _>(PhantomData, (t, &bags.indices[j..j + 1], w, Pooling::Sum, bounds, dst, &mut ahead))));
            }
            None::<()>
        });
        return Ok(out);
    }
    let offsets = &plan.offsets;
    let bag_of = |t: usize, b: usize| {
        let g = t * batch + b;
        let (s, e) = (offsets[g] as usize, offsets[g + 1] as usize);
        (&bags.indices[s..e], weights.map(|w| &w[s..e]))
    };
    // The rows of bag (t, b), with their table, for the prefetcher.
    let rows_of = |t: usize, b: usize| bag_of(t, b).0.iter().map(move |&id| (tables[t], id));
    match layout {
        Layout::Concat => {
            let row_len = plan.total_dim;
            crate::par::for_each_chunk_mut(&mut out, row_len.max(1), 64, |first, block| {
                let samples = first..first + block.len() / row_len.max(1);
                let mut ahead = Lookahead::new(bounds, samples.flat_map(|b| (0..tables.len()).flat_map(move |t| rows_of(t, b))));
                for (k, sample) in block.chunks_exact_mut(row_len).enumerate() {
                    let b = first + k;
                    let mut col = 0;
                    for (t, table) in tables.iter().enumerate() {
                        let (idx, w) = bag_of(t, b);
                        let dst = &mut sample[col..col + table.dim()];
                        dispatch!(table.format(), C => super::simd(Pool::<C, _>(PhantomData, (table, idx, w, pooling, bounds, dst, &mut ahead))));
                        col += table.dim();
                    }
                }
                None::<()>
            });
        }
        Layout::PerTable => {
            let mut rest = &mut out[..];
            for (t, table) in tables.iter().enumerate() {
                let (block, tail) = rest.split_at_mut(batch * table.dim());
                rest = tail;
                crate::par::for_each_chunk_mut(block, table.dim(), 64, |first, part| {
                    let mut ahead = Lookahead::new(bounds, (first..first + part.len() / table.dim()).flat_map(|b| rows_of(t, b)));
                    for (k, dst) in part.chunks_exact_mut(table.dim()).enumerate() {
                        let (idx, w) = bag_of(t, first + k);
                        dispatch!(table.format(), C => super::simd(Pool::<C, _>(PhantomData, (table, idx, w, pooling, bounds, dst, &mut ahead))));
                    }
                    None::<()>
                });
            }
        }
    }
    Ok(out)
}

/// Walks the rows a block of bags will read, [`PREFETCH_DISTANCE`] rows ahead of the pooling,
/// across bag and table boundaries: bags are short (often under the distance), so prefetching
/// within a bag alone would leave most rows' cache misses to come one after another.
struct Lookahead<'a, I: Iterator<Item = (&'a PackedTable, u32)>> {
    bounds: Bounds,
    rows: I,
}

impl<'a, I: Iterator<Item = (&'a PackedTable, u32)>> Lookahead<'a, I> {
    fn new(bounds: Bounds, rows: I) -> Self {
        let mut ahead = Lookahead { bounds, rows };
        for _ in 0..PREFETCH_DISTANCE {
            ahead.step();
        }
        ahead
    }

    /// Prefetches the next row of the walk (called once per row pooled).
    #[inline(always)]
    fn step(&mut self) {
        if let Some((table, id)) = self.rows.next() {
            if let Some(r) = self.bounds.resolve(id, table.rows()) {
                prefetch(table.row(r));
            }
        }
    }
}

/// What a batched call needs, checked once; shared with the GPU path.
pub(crate) struct Plan {
    /// `B·T + 1` offsets.
    pub offsets: Vec<u32>,
    pub total_dim: usize,
    pub out_len: usize,
}

impl Plan {
    pub(crate) fn new<R: TableShape>(tables: &[R], batch: usize, bags: &Bags, pooling: Pooling, bounds: Bounds) -> Result<Plan, Error> {
        if tables.is_empty() {
            return Err(Error::ShapeMismatch { what: "tables", expected: 1, actual: 0 });
        }
        if pooling == Pooling::None && tables.len() != 1 {
            return Err(Error::Unsupported { what: "pooling None over several tables (one output row per index needs one dim)" });
        }
        let offsets = bags.validate(pooling, Some(batch * tables.len()))?;
        // Bounds: the indices of table t are those of its B bags.
        for (t, table) in tables.iter().enumerate() {
            let (s, e) = (offsets[t * batch] as usize, offsets[(t + 1) * batch] as usize);
            let rows = table.shape().0;
            bounds.check(&bags.indices[s..e], rows).map_err(|err| match err {
                Error::IdOutOfRange { index, id, rows } => Error::IdOutOfRange { index: s + index, id, rows },
                other => other,
            })?;
        }
        let total_dim: usize = tables.iter().map(|t| t.shape().1).sum();
        let out_len = if pooling == Pooling::None { bags.indices.len() * total_dim } else { batch * total_dim };
        Ok(Plan { offsets, total_dim, out_len })
    }
}

/// Rows and dim of a table, on the host or on the GPU.
pub(crate) trait TableShape {
    fn shape(&self) -> (usize, usize);
}

impl TableShape for &PackedTable {
    fn shape(&self) -> (usize, usize) {
        (self.rows(), self.dim())
    }
}

impl TableShape for (usize, usize) {
    fn shape(&self) -> (usize, usize) {
        *self
    }
}

/// The arguments of [`pool`].
type PoolArgs<'a, 'b, I> = (&'b PackedTable, &'b [u32], Option<&'b [f32]>, Pooling, Bounds, &'b mut [f32], &'b mut Lookahead<'a, I>);

/// [`pool`] as a [`Kernel`].
struct Pool<'a, 'b, C, I: Iterator<Item = (&'a PackedTable, u32)>>(PhantomData<C>, PoolArgs<'a, 'b, I>);

impl<'a, C: Codec, I: Iterator<Item = (&'a PackedTable, u32)>> Kernel for Pool<'a, '_, C, I> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        pool::<C, I>(self.1)
    }
}

/// Pools one bag into `out` (`dim` values).
#[inline(always)]
fn pool<'a, C: Codec, I: Iterator<Item = (&'a PackedTable, u32)>>((table, indices, weights, pooling, bounds, out, ahead): PoolArgs<'a, '_, I>) {
    let rows = table.rows();
    let row_words = table.row_words();
    let words = table.words();
    let max = pooling == Pooling::Max;
    out.fill(if max { f32::NEG_INFINITY } else { 0.0 });
    // Decoded rows go through a buffer that stays in L1: on the stack up to 256 values, else
    // allocated once per bag (never per index).
    let mut stack = [0f32; 256];
    let mut heap = Vec::new();
    let row: &mut [f32] = if out.len() <= stack.len() {
        &mut stack[..out.len()]
    } else {
        heap.resize(out.len(), 0.0);
        &mut heap
    };
    for (j, &id) in indices.iter().enumerate() {
        ahead.step();
        let w = weights.map_or(1.0, |w| w[j]);
        let Some(r) = bounds.resolve(id, rows) else {
            if max {
                out.iter_mut().for_each(|o| *o = o.max(0.0));
            }
            continue;
        };
        C::decode_row(&words[r * row_words..(r + 1) * row_words], row);
        accumulate(out, row, w, max);
    }
    if indices.is_empty() {
        out.fill(0.0);
    } else if pooling == Pooling::Mean {
        let n = indices.len() as f32;
        out.iter_mut().for_each(|o| *o /= n);
    }
}

#[inline(always)]
fn accumulate(acc: &mut [f32], row: &[f32], w: f32, max: bool) {
    if max {
        for (a, &x) in acc.iter_mut().zip(row) {
            *a = a.max(x);
        }
    } else {
        for (a, &x) in acc.iter_mut().zip(row) {
            *a += w * x;
        }
    }
}
