//! EmbeddingBag and table-batched EmbeddingBag on the CPU: the oracle of the GPU bag kernel.
//!
//! Rows are pooled in index order: `acc += w·row` (Sum), then `/ n` (Mean), or `max` (Max), from
//! a zero (Sum, Mean) or −∞ (Max) start; an empty bag is a zero row. Under [`Bounds::Zero`] a bad
//! index reads as a zero row, which still counts for Mean and takes part in Max.

use std::marker::PhantomData;
use std::ops::Range;

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
    let rows: Vec<Rows> = tables.iter().map(|t| Rows::of(t)).collect();
    let walk = Walk { tables: &rows, indices: bags.indices, offsets: &plan.offsets, weights: bags.per_sample_weights, batch, bounds };
    if pooling == Pooling::None {
        // One bag per index: the walk's single "bag" is the block's run of indices.
        let dim = tables[0].dim();
        crate::par::for_each_chunk_mut(&mut out, dim, 256, |first, block| {
            let run = [first as u32, (first + block.len() / dim) as u32];
            let walk = Walk { offsets: &run, batch: 1, ..walk };
            let mut ahead = Lookahead::new(walk, 0..1, 0..1);
            let mut scratch = vec![0f32; dim];
            for (j, dst) in (first..).zip(block.chunks_exact_mut(dim)) {
                dispatch!(tables[0].format(), C => super::simd(Pool::<C>(PhantomData, (walk.bag(0, j..j + 1), Pooling::Sum, dst, &mut ahead, &mut scratch))));
            }
            None::<()>
        });
        return Ok(out);
    }
    let max_dim = tables.iter().map(|t| t.dim()).max().unwrap_or(0);
    match layout {
        Layout::Concat => {
            let row_len = plan.total_dim;
            crate::par::for_each_chunk_mut(&mut out, row_len.max(1), 64, |first, block| {
                let samples = first..first + block.len() / row_len.max(1);
                let mut ahead = Lookahead::new(walk, samples.clone(), 0..tables.len());
                let mut scratch = vec![0f32; max_dim];
                for (b, sample) in samples.zip(block.chunks_exact_mut(row_len)) {
                    let mut col = 0;
                    for (t, table) in tables.iter().enumerate() {
                        let dst = &mut sample[col..col + table.dim()];
                        let bag = walk.bag(t, walk.range(t, b));
                        dispatch!(table.format(), C => super::simd(Pool::<C>(PhantomData, (bag, pooling, dst, &mut ahead, &mut scratch))));
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
                    let samples = first..first + part.len() / table.dim();
                    let mut ahead = Lookahead::new(walk, samples.clone(), t..t + 1);
                    let mut scratch = vec![0f32; table.dim()];
                    for (b, dst) in samples.zip(part.chunks_exact_mut(table.dim())) {
                        let bag = walk.bag(t, walk.range(t, b));
                        dispatch!(table.format(), C => super::simd(Pool::<C>(PhantomData, (bag, pooling, dst, &mut ahead, &mut scratch))));
                    }
                    None::<()>
                });
            }
        }
    }
    Ok(out)
}

/// One table's packed rows, as the pooling loops read them.
#[derive(Clone, Copy)]
struct Rows<'a> {
    words: &'a [u32],
    rows: usize,
    row_words: usize,
}

impl<'a> Rows<'a> {
    fn of(table: &'a PackedTable) -> Self {
        Rows { words: table.words(), rows: table.rows(), row_words: table.row_words() }
    }

    /// The packed words of the row `id` reads under `bounds`, or `None` for a zero row.
    #[inline(always)]
    fn get(&self, id: u32, bounds: Bounds) -> Option<&'a [u32]> {
        let r = bounds.resolve(id, self.rows)?;
        Some(&self.words[r * self.row_words..(r + 1) * self.row_words])
    }
}

/// The bags of a call: bag `g = t·batch + b` (table `t`, sample `b`) holds
/// `indices[offsets[g]..offsets[g + 1]]`.
#[derive(Clone, Copy)]
struct Walk<'a> {
    tables: &'a [Rows<'a>],
    indices: &'a [u32],
    offsets: &'a [u32],
    weights: Option<&'a [f32]>,
    batch: usize,
    bounds: Bounds,
}

impl<'a> Walk<'a> {
    /// The positions in `indices` of bag (`t`, `b`).
    #[inline(always)]
    fn range(&self, t: usize, b: usize) -> Range<usize> {
        let g = t * self.batch + b;
        self.offsets[g] as usize..self.offsets[g + 1] as usize
    }

    /// The indices at `range` of table `t`, with their weights.
    #[inline(always)]
    fn bag(&self, t: usize, range: Range<usize>) -> Bag<'a> {
        Bag { table: self.tables[t], bounds: self.bounds, indices: &self.indices[range.clone()], weights: self.weights.map(|w| &w[range]) }
    }
}

/// The indices one output row pools.
struct Bag<'a> {
    table: Rows<'a>,
    bounds: Bounds,
    indices: &'a [u32],
    weights: Option<&'a [f32]>,
}

/// Walks the rows a block of bags will read, [`PREFETCH_DISTANCE`] rows ahead of the pooling,
/// across bag and table boundaries: bags are short (often under the distance), so prefetching
/// within a bag alone would leave most rows' cache misses to come one after another. It visits
/// the bags in the pooling's order, sample by sample and, within a sample, table by table.
struct Lookahead<'a> {
    walk: Walk<'a>,
    tables: Range<usize>,
    samples_end: usize,
    /// The bag being walked, and the walk's position in `indices`.
    b: usize,
    t: usize,
    i: usize,
    end: usize,
}

impl<'a> Lookahead<'a> {
    /// A lookahead over the bags of `tables` for `samples`, its first rows already prefetched.
    fn new(walk: Walk<'a>, samples: Range<usize>, tables: Range<usize>) -> Self {
        let mut ahead = Self::start(walk, samples, tables);
        for _ in 0..PREFETCH_DISTANCE {
            ahead.step();
        }
        ahead
    }

    /// The walk at its first index.
    fn start(walk: Walk<'a>, samples: Range<usize>, tables: Range<usize>) -> Self {
        // An empty walk starts at its end.
        let empty = samples.is_empty() || tables.is_empty();
        let (b, t) = (if empty { samples.end } else { samples.start }, tables.start);
        let Range { start: i, end } = if empty { 0..0 } else { walk.range(t, b) };
        Lookahead { walk, tables, samples_end: samples.end, b, t, i, end }
    }

    /// Prefetches the next row of the walk (called once per row pooled).
    #[inline(always)]
    fn step(&mut self) {
        if let Some((t, id)) = self.next_id() {
            if let Some(row) = self.walk.tables[t].get(id, self.walk.bounds) {
                prefetch(row);
            }
        }
    }

    /// The next index of the walk, with its table.
    #[inline(always)]
    fn next_id(&mut self) -> Option<(usize, u32)> {
        while self.i == self.end {
            if !self.next_bag() {
                return None;
            }
        }
        self.i += 1;
        Some((self.t, self.walk.indices[self.i - 1]))
    }

    /// Moves to the next bag; `false` at the end of the walk.
    #[inline(always)]
    fn next_bag(&mut self) -> bool {
        if self.b >= self.samples_end {
            return false;
        }
        self.t += 1;
        if self.t == self.tables.end {
            self.t = self.tables.start;
            self.b += 1;
            if self.b == self.samples_end {
                return false;
            }
        }
        Range { start: self.i, end: self.end } = self.walk.range(self.t, self.b);
        true
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
type PoolArgs<'a, 'b> = (Bag<'a>, Pooling, &'b mut [f32], &'b mut Lookahead<'a>, &'b mut [f32]);

/// [`pool`] as a [`Kernel`].
struct Pool<'a, 'b, C>(PhantomData<C>, PoolArgs<'a, 'b>);

impl<C: Codec> Kernel for Pool<'_, '_, C> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        pool::<C>(self.1)
    }
}

/// Pools one bag into `out` (`dim` values); `scratch` holds `dim` values for formats that
/// decode a row before pooling it.
#[inline(always)]
fn pool<C: Codec>((bag, pooling, out, ahead, scratch): PoolArgs<'_, '_>) {
    let max = pooling == Pooling::Max;
    out.fill(if max { f32::NEG_INFINITY } else { 0.0 });
    for (j, &id) in bag.indices.iter().enumerate() {
        ahead.step();
        let w = bag.weights.map_or(1.0, |w| w[j]);
        match bag.table.get(id, bag.bounds) {
            Some(row) => C::pool_row(row, w, max, out, scratch),
            None if max => out.iter_mut().for_each(|o| *o = o.max(0.0)),
            None => {}
        }
    }
    if bag.indices.is_empty() {
        out.fill(0.0);
    } else if pooling == Pooling::Mean {
        let n = bag.indices.len() as f32;
        out.iter_mut().for_each(|o| *o /= n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lookahead walks exactly the indices the pooling reads, in its order, from
    /// `PREFETCH_DISTANCE` on: empty bags, blocks of samples that start anywhere, one table or all.
    #[test]
    fn lookahead_walks_the_pooling_order() {
        let (batch, n_tables) = (9, 3);
        let mut rng = crate::synth::Rng::new(3);
        let mut offsets = vec![0u32];
        for _ in 0..batch * n_tables {
            let len = [0, 1, 2, 5, 40][rng.below(5) as usize];
            offsets.push(offsets.last().unwrap() + len);
        }
        let indices: Vec<u32> = (0..*offsets.last().unwrap()).collect();
        let walk = Walk { tables: &[], indices: &indices, offsets: &offsets, weights: None, batch, bounds: Bounds::Zero };
        for (samples, tables) in [(0..batch, 0..n_tables), (3..7, 0..n_tables), (2..9, 1..2), (4..4, 0..n_tables), (0..batch, 2..3)] {
            let mut ahead = Lookahead::start(walk, samples.clone(), tables.clone());
            let walked: Vec<(usize, u32)> = std::iter::from_fn(|| ahead.next_id()).collect();
            let pooled: Vec<(usize, u32)> =
                samples.clone().flat_map(|b| tables.clone().flat_map(move |t| walk.range(t, b).map(move |i| (t, walk.indices[i])))).collect();
            assert_eq!(walked, pooled, "samples {samples:?}, tables {tables:?}");
        }
    }
}
