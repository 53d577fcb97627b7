//! EmbeddingBag and table-batched EmbeddingBag on the CPU: the oracle of the GPU bag kernel.
//!
//! Rows are pooled in index order: `acc += w·row` (Sum), then `/ n` (Mean), or `max` (Max), from
//! a zero (Sum, Mean) or −∞ (Max) start; an empty bag is a zero row. Under [`Bounds::Zero`] a bad
//! index reads as a zero row, which still counts for Mean and takes part in Max.

use std::marker::PhantomData;
use std::ops::Range;

use super::{prefetch, prefetch_distance, PREFETCH_DISTANCE};
use crate::bags::{BagPlan, Bags, Layout, Pooling};
use crate::format::{dispatch, Codec, Format, PackedTable};
use crate::simd::{Kernel, Lanes};
use crate::{Bounds, Error};

/// Pools `bags` of rows of one table into `bags.len() × dim` values (`indices.len() × dim` for
/// [`Pooling::None`]).
pub fn embedding_bag(table: &PackedTable, bags: &Bags, pooling: Pooling, bounds: Bounds) -> Result<Vec<f32>, Error> {
    embedding_bags(&[table], bags.len(), bags, pooling, bounds, Layout::Concat)
}

/// Pools rows already gathered, one per index of `bags` in order, as [`embedding_bag`] pools a
/// table (the bags of kinds without a fused bag, and of quotient-remainder tables).
pub fn pool_rows<I>(rows: Vec<f32>, dim: usize, bags: &Bags<'_, I>, pooling: Pooling) -> Result<Vec<f32>, Error> {
    let n = bags.indices.len();
    if n > u32::MAX as usize {
        return Err(Error::LimitExceeded { what: "indices of one bag call", requested: n as u64, max: u32::MAX as u64 });
    }
    // An FP32 table's words are its values' bits: the Vec is reused, not copied.
    let words: Vec<u32> = rows.into_iter().map(f32::to_bits).collect();
    let dense = PackedTable::from_words(crate::Format::F32, n, dim, words)?;
    let iota: Vec<u32> = (0..n as u32).collect();
    embedding_bag(&dense, &bags.with_indices(&iota), pooling, Bounds::Error)
}

/// Table-batched EmbeddingBag: `tables.len() = T` tables, `batch = B` samples, bags
/// feature-major (`offsets` describe `B·T` bags). Output `[B, Σ dims]` ([`Layout::Concat`]) or
/// table after table ([`Layout::PerTable`]). [`Pooling::None`] needs a single table.
pub fn embedding_bags(tables: &[&PackedTable], batch: usize, bags: &Bags, pooling: Pooling, bounds: Bounds, layout: Layout) -> Result<Vec<f32>, Error> {
    let plan = BagPlan::new(tables, batch, bags, pooling, bounds)?;
    let mut out = super::zeroed(plan.out_len, 1, "bag output")?;
    pool_planned(tables, batch, bags, pooling, bounds, layout, &plan, &mut out);
    Ok(out)
}

/// [`embedding_bags`] into `out`, which has exactly the values it returns: a loop that pools
/// batch after batch reuses one buffer instead of having a new one zeroed each time. Nothing is
/// written when the call is refused.
pub fn embedding_bags_into(
    tables: &[&PackedTable],
    batch: usize,
    bags: &Bags,
    pooling: Pooling,
    bounds: Bounds,
    layout: Layout,
    out: &mut [f32],
) -> Result<(), Error> {
    let plan = BagPlan::new(tables, batch, bags, pooling, bounds)?;
    if out.len() != plan.out_len {
        return Err(Error::ShapeMismatch { what: "bag output values", expected: plan.out_len, actual: out.len() });
    }
    pool_planned(tables, batch, bags, pooling, bounds, layout, &plan, out);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn pool_planned(tables: &[&PackedTable], batch: usize, bags: &Bags, pooling: Pooling, bounds: Bounds, layout: Layout, plan: &BagPlan, out: &mut [f32]) {
    let resolve = Indexed(bounds);
    if pooling == Pooling::None {
        // One bag per index: a block's walk is one "bag", its run of indices.
        let dim = tables[0].dim();
        let rows = [Rows::of(tables[0])];
        crate::par::for_each_chunk_mut(out, dim, 256, |first, block| {
            let run = [first as u32, (first + block.len() / dim) as u32];
            let walk = Walk { tables: &rows, ids: bags.indices, offsets: &run, weights: bags.per_sample_weights, batch: 1, resolve: &resolve };
            let mut ahead = Lookahead::new(walk, 0..1, 0..1);
            let mut scratch = vec![0f32; dim];
            for (j, dst) in (first..).zip(block.chunks_exact_mut(dim)) {
                let bag = Bag { table: rows[0], ids: 1, k: 1, weights: bags.per_sample_weights.map(|w| &w[j..j + 1]) };
                pool_one(tables[0].format(), (bag, Pooling::Sum, dst, &mut ahead, &mut scratch));
            }
            None::<()>
        });
        return;
    }
    pool_bags(tables, batch, bags.indices, &plan.offsets, bags.per_sample_weights, &resolve, pooling, layout, out);
}

/// Pools the bags of `tables` (feature-major `offsets` over `ids`, `B·T + 1` of them, checked),
/// each id read as the rows `resolve` gives it, into `out`: `[B, Σ dims]` or table after table.
/// Writes every value of `out` (`B · Σ dims` of them).
#[allow(clippy::too_many_arguments)]
pub fn pool_bags<R: Resolve>(
    tables: &[&PackedTable],
    batch: usize,
    ids: &[R::Id],
    offsets: &[u32],
    weights: Option<&[f32]>,
    resolve: &R,
    pooling: Pooling,
    layout: Layout,
    out: &mut [f32],
) {
    let total_dim: usize = tables.iter().map(|t| t.dim()).sum();
    debug_assert_eq!(out.len(), batch * total_dim);
    let rows: Vec<Rows> = tables.iter().map(|t| Rows::of(t)).collect();
    let walk = Walk { tables: &rows, ids, offsets, weights, batch, resolve };
    let max_dim = tables.iter().map(|t| t.dim()).max().unwrap_or(0);
    match layout {
        Layout::Concat => {
            crate::par::for_each_chunk_mut(out, total_dim.max(1), 64, |first, block| {
                let samples = first..first + block.len() / total_dim.max(1);
                let mut ahead = Lookahead::new(walk, samples.clone(), 0..tables.len());
                let mut scratch = vec![0f32; max_dim];
                // Table by table, each over the block's samples (see [`Lookahead`]).
                let mut col = 0;
                for (t, table) in tables.iter().enumerate() {
                    for (b, sample) in samples.clone().zip(block.chunks_exact_mut(total_dim)) {
                        let dst = &mut sample[col..col + table.dim()];
                        pool_one(table.format(), (walk.bag(t, b), pooling, dst, &mut ahead, &mut scratch));
                    }
                    col += table.dim();
                }
                None::<()>
            });
        }
        Layout::PerTable => {
            let mut rest = out;
            for (t, table) in tables.iter().enumerate() {
                let (block, tail) = rest.split_at_mut(batch * table.dim());
                rest = tail;
                crate::par::for_each_chunk_mut(block, table.dim(), 64, |first, part| {
                    let samples = first..first + part.len() / table.dim();
                    let mut ahead = Lookahead::new(walk, samples.clone(), t..t + 1);
                    let mut scratch = vec![0f32; table.dim()];
                    for (b, dst) in samples.zip(part.chunks_exact_mut(table.dim())) {
                        pool_one(table.format(), (walk.bag(t, b), pooling, dst, &mut ahead, &mut scratch));
                    }
                    None::<()>
                });
            }
        }
    }
}

/// A row that reads as zeros: a bad index under [`Bounds::Zero`], or one of the `k − 1` unused
/// rows of a hot hashed id.
pub const NO_ROW: usize = usize::MAX;

/// How the ids in bags become rows: each id of table `t` reads [`Resolve::k`]`(t)` rows.
pub trait Resolve: Sync {
    type Id: Copy + Sync;
    /// Rows per id of table `t` (1 to [`MAX_K`]).
    fn k(&self, t: usize) -> usize;
    /// Pushes the `k(t)` rows each of `ids` (at most [`RUN`], all of table `t`) reads, id after
    /// id ([`NO_ROW`] for a zero row). A run at a time, so an implementation can compute several
    /// ids' rows side by side.
    fn resolve_run(&self, t: usize, table: &Rows, ids: &[Self::Id], ring: &mut Ring);
}

/// The most ids resolved in one call, so a resolver's loops over them vectorise.
pub const RUN: usize = 8;

/// The most rows one id may read (hashes per id).
pub const MAX_K: usize = 8;

/// Row indices, each one row under a bounds policy.
struct Indexed(Bounds);

impl Resolve for Indexed {
    type Id = u32;
    #[inline(always)]
    fn k(&self, _t: usize) -> usize {
        1
    }
    #[inline(always)]
    fn resolve_run(&self, _t: usize, table: &Rows, ids: &[u32], ring: &mut Ring) {
        for &id in ids {
            ring.push(self.0.resolve(id, table.rows).unwrap_or(NO_ROW));
        }
    }
}

/// One table's packed rows, as the pooling loops read them.
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    words: &'a [u32],
    rows: usize,
    row_words: usize,
}

impl<'a> Rows<'a> {
    fn of(table: &'a PackedTable) -> Self {
        Rows { words: table.words(), rows: table.rows(), row_words: table.row_words() }
    }

    /// The packed words of row `r` (`< rows`).
    #[inline(always)]
    fn row(&self, r: usize) -> &'a [u32] {
        &self.words[r * self.row_words..(r + 1) * self.row_words]
    }
}

/// The rows resolved ahead of the pooling, in the order it reads them: a ring of `RING`
/// entries, enough for the id being pooled, `PREFETCH_DISTANCE` ids after it and a run more,
/// [`MAX_K`] rows each.
pub struct Ring {
    rows: [usize; RING],
    head: usize,
    tail: usize,
}

const RING: usize = ((1 + PREFETCH_DISTANCE + RUN) * MAX_K).next_power_of_two();

impl Ring {
    #[inline(always)]
    pub fn push(&mut self, row: usize) {
        debug_assert!(self.head - self.tail < RING, "the walk resolves at most a ring of rows ahead");
        self.rows[self.head % RING] = row;
        self.head += 1;
    }

    /// [`Ring::push`] of each of `rows`, with the head updated once.
    #[inline(always)]
    pub fn extend(&mut self, rows: &[usize]) {
        debug_assert!(self.head + rows.len() - self.tail <= RING, "the walk resolves at most a ring of rows ahead");
        for (i, &row) in rows.iter().enumerate() {
            self.rows[(self.head + i) % RING] = row;
        }
        self.head += rows.len();
    }

    #[inline(always)]
    fn pop(&mut self) -> usize {
        debug_assert!(self.tail < self.head, "the pooling reads only rows the walk resolved");
        self.tail += 1;
        self.rows[(self.tail - 1) % RING]
    }
}

/// The bags of a call: bag `g = t·batch + b` (table `t`, sample `b`) holds
/// `ids[offsets[g]..offsets[g + 1]]`, each read as the rows `resolve` gives it.
struct Walk<'a, R: Resolve> {
    tables: &'a [Rows<'a>],
    ids: &'a [R::Id],
    offsets: &'a [u32],
    weights: Option<&'a [f32]>,
    batch: usize,
    resolve: &'a R,
}

impl<R: Resolve> Clone for Walk<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R: Resolve> Copy for Walk<'_, R> {}

impl<'a, R: Resolve> Walk<'a, R> {
    /// The positions in `ids` of bag (`t`, `b`).
    #[inline(always)]
    fn range(&self, t: usize, b: usize) -> Range<usize> {
        let g = t * self.batch + b;
        self.offsets[g] as usize..self.offsets[g + 1] as usize
    }

    /// The positions in `ids` of the bags of table `t` for `samples` (consecutive bags).
    #[inline(always)]
    fn span(&self, t: usize, samples: &Range<usize>) -> Range<usize> {
        self.offsets[t * self.batch + samples.start] as usize..self.offsets[t * self.batch + samples.end] as usize
    }

    /// Bag (`t`, `b`) as the pooling reads it.
    #[inline(always)]
    fn bag(&self, t: usize, b: usize) -> Bag<'a> {
        let range = self.range(t, b);
        Bag { table: self.tables[t], ids: range.len(), k: self.resolve.k(t), weights: self.weights.map(|w| &w[range]) }
    }
}

/// What the pooling of one output row needs: its rows come from the walk's ring, `k` per id.
struct Bag<'a> {
    table: Rows<'a>,
    ids: usize,
    k: usize,
    weights: Option<&'a [f32]>,
}

/// Walks the ids a block of bags will read, resolves their rows and prefetches them, as many ids
/// ahead of the pooling as keep the lines [`prefetch_distance`] asks for in flight, across bag and table boundaries: bags are
/// short (often under the distance), so prefetching within a bag alone would leave most rows'
/// cache misses to come one after another. It visits the bags in the pooling's order, table by
/// table and, within a table, sample by sample, and hands the pooling the rows it resolved.
///
/// Table by table, not sample by sample: a block of samples then reads one table at a time, and
/// a table that fits in the caches is read from memory about once, however many of its rows the
/// block's bags repeat. Sample by sample, every table is in play at once (the figures are in
/// docs/benchmarks.md, "Design measurements").
///
/// Within a table, the bags of consecutive samples are consecutive in `ids` (bags are
/// feature-major), so the walk goes over one range of ids per table, in runs of [`RUN`] that may
/// span bags: the pooling takes each bag's rows from the ring in the same order.
struct Lookahead<'a, R: Resolve> {
    walk: Walk<'a, R>,
    tables_end: usize,
    samples: Range<usize>,
    /// The table being walked, and the walk's position in `ids` and the end of the table's range.
    t: usize,
    i: usize,
    end: usize,
    ring: Ring,
    /// Ids resolved whose rows the pooling has not read yet.
    pending: usize,
    /// Ids to keep resolved ahead of the pooling (at most [`PREFETCH_DISTANCE`]).
    distance: usize,
}

impl<'a, R: Resolve> Lookahead<'a, R> {
    /// A lookahead over the bags of `tables` for `samples`, its first rows already prefetched.
    fn new(walk: Walk<'a, R>, samples: Range<usize>, tables: Range<usize>) -> Self {
        // The widest id of the walk: its rows' words, `k` rows each.
        let id_words = tables.clone().map(|t| walk.tables[t].row_words * walk.resolve.k(t)).max().unwrap_or(1);
        let mut ahead = Self::start(walk, samples, tables);
        ahead.distance = prefetch_distance(id_words);
        ahead.top_up();
        ahead
    }

    /// The walk at its first id.
    fn start(walk: Walk<'a, R>, samples: Range<usize>, tables: Range<usize>) -> Self {
        // An empty walk starts at its end.
        let empty = samples.is_empty() || tables.is_empty();
        let t = if empty { tables.end } else { tables.start };
        let Range { start: i, end } = if empty { 0..0 } else { walk.span(t, &samples) };
        let ring = Ring { rows: [NO_ROW; RING], head: 0, tail: 0 };
        Lookahead { walk, tables_end: tables.end, samples, t, i, end, ring, pending: 0, distance: PREFETCH_DISTANCE }
    }

    /// Called as the pooling takes the next id: keeps `distance` ids after it resolved and their
    /// rows prefetched.
    #[inline(always)]
    fn step(&mut self) {
        debug_assert!(self.pending > 0, "the pooling takes only ids the walk resolved");
        self.pending -= 1;
        self.top_up();
    }

    #[inline(always)]
    fn top_up(&mut self) {
        while self.pending < self.distance {
            let Some((t, run)) = self.next_run() else { return };
            let table = &self.walk.tables[t];
            let first = self.ring.head;
            self.walk.resolve.resolve_run(t, table, run, &mut self.ring);
            for h in first..self.ring.head {
                let r = self.ring.rows[h % RING];
                if r != NO_ROW {
                    prefetch(table.row(r));
                }
            }
            self.pending += run.len();
        }
    }

    /// The next run of the walk (up to [`RUN`] ids of one table), with its table.
    #[inline(always)]
    fn next_run(&mut self) -> Option<(usize, &'a [R::Id])> {
        while self.i == self.end {
            if self.t + 1 >= self.tables_end {
                return None;
            }
            self.t += 1;
            Range { start: self.i, end: self.end } = self.walk.span(self.t, &self.samples);
        }
        let n = (self.end - self.i).min(RUN);
        self.i += n;
        Some((self.t, &self.walk.ids[self.i - n..self.i]))
    }
}

/// The arguments of [`pool`].
type PoolArgs<'a, 'b, R> = (Bag<'a>, Pooling, &'b mut [f32], &'b mut Lookahead<'a, R>, &'b mut [f32]);

/// Pools one bag with the kernel of `format` at the machine's SIMD level. Not inlined, so the
/// walks (table by table, table after table, one bag an index) share one copy of every format's
/// kernels per id kind instead of one each: 5 copies were ~270 KB of the browser's `.wasm`.
#[inline(never)]
fn pool_one<R: Resolve>(format: Format, args: PoolArgs<'_, '_, R>) {
    dispatch!(format, C => crate::simd::run(Pool::<C, _>(PhantomData, args)))
}

/// [`pool`] as a [`Kernel`].
struct Pool<'a, 'b, C, R: Resolve>(PhantomData<C>, PoolArgs<'a, 'b, R>);

impl<C: Codec, R: Resolve> Kernel for Pool<'_, '_, C, R> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lanes>(self, lanes: L) {
        pool::<C, R, L>(lanes, self.1)
    }
}

/// Pools one bag into `out` (`dim` values), its rows taken from the lookahead; `scratch` holds
/// `dim` values for formats that decode a row before pooling it.
#[inline(always)]
fn pool<C: Codec, R: Resolve, L: Lanes>(lanes: L, (bag, pooling, out, ahead, scratch): PoolArgs<'_, '_, R>) {
    let max = pooling == Pooling::Max;
    if C::OCTETS && !max && bag.k == 1 && out.len() % 8 == 0 {
        return pool_octets::<C, R, L>(lanes, bag, pooling, out, ahead);
    }
    out.fill(if max { f32::NEG_INFINITY } else { 0.0 });
    for j in 0..bag.ids {
        ahead.step();
        let w = bag.weights.map_or(1.0, |w| w[j]);
        for _ in 0..bag.k {
            match ahead.ring.pop() {
                NO_ROW if max => out.iter_mut().for_each(|o| *o = o.max(0.0)),
                NO_ROW => {}
                r => C::pool_row(lanes, bag.table.row(r), w, max, out, scratch),
            }
        }
    }
    if bag.ids == 0 {
        out.fill(0.0);
    } else if pooling == Pooling::Mean {
        let n = bag.ids as f32;
        out.iter_mut().for_each(|o| *o /= n);
    }
}

/// Rows of a bag gathered before a block of their sums is pooled (a bag of more takes several).
const CHUNK_ROWS: usize = 32;

/// Octets of sums kept in registers at once: 64 values, 8 of the 16 vector registers of AVX2
/// (and of SSE4.1's and SIMD128's two halves each), leaving room for a row's decoding.
const BLOCK: usize = 8;

/// [`pool`] of a sum or mean over one row an id, for formats that decode any octet of a row on
/// its own ([`Codec::OCTETS`]) and a dim that is a multiple of 8: the bag's rows (up to
/// [`CHUNK_ROWS`] at a time) are pooled a block of [`BLOCK`] octets at a time, its sums held in
/// registers across the rows rather than loaded and stored once a row, and each row's octets
/// decoded straight into them. Every value's sum takes the same terms in the same order, with
/// the same roundings, as [`Codec::pool_row`] row after row: the same bits.
#[inline(always)]
fn pool_octets<C: Codec, R: Resolve, L: Lanes>(l: L, bag: Bag<'_>, pooling: Pooling, out: &mut [f32], ahead: &mut Lookahead<'_, R>) {
    let dim = out.len();
    let (octets, _) = out.as_chunks_mut::<8>();
    octets.iter_mut().for_each(|o| *o = [0.0; 8]);
    let mut rows: [&[u32]; CHUNK_ROWS] = [&[]; CHUNK_ROWS];
    let mut weights = [1f32; CHUNK_ROWS];
    let mut j = 0;
    while j < bag.ids {
        let n = (bag.ids - j).min(CHUNK_ROWS);
        // The chunk's rows in order, bad ids under Bounds::Zero (zero rows) left out.
        let mut m = 0;
        for i in j..j + n {
            ahead.step();
            let r = ahead.ring.pop();
            if r != NO_ROW {
                rows[m] = bag.table.row(r);
                weights[m] = bag.weights.map_or(1.0, |w| w[i]);
                m += 1;
            }
        }
        let (rows, weights) = (&rows[..m], &weights[..m]);
        let (blocks, rest) = octets.as_chunks_mut::<BLOCK>();
        for (b, block) in blocks.iter_mut().enumerate() {
            let mut acc: [L::F; BLOCK] = std::array::from_fn(|o| l.load(&block[o]));
            for (&row, &w) in rows.iter().zip(weights) {
                for (o, a) in acc.iter_mut().enumerate() {
                    *a = add_weighted(l, *a, C::octet(l, row, b * BLOCK + o, dim), w);
                }
            }
            for (o, a) in acc.iter().enumerate() {
                l.store(*a, &mut block[o]);
            }
        }
        let first = blocks.len() * BLOCK;
        for (o, octet) in rest.iter_mut().enumerate() {
            let mut a = l.load(octet);
            for (&row, &w) in rows.iter().zip(weights) {
                a = add_weighted(l, a, C::octet(l, row, first + o, dim), w);
            }
            l.store(a, octet);
        }
        j += n;
    }
    if pooling == Pooling::Mean && bag.ids > 0 {
        let n = bag.ids as f32;
        out.iter_mut().for_each(|o| *o /= n);
    }
}

/// `acc + w · x`, or `acc + x` for a weight of 1 (as [`Codec::pool_row`] leaves the product out).
#[inline(always)]
fn add_weighted<L: Lanes>(l: L, acc: L::F, x: L::F, w: f32) -> L::F {
    if w == 1.0 {
        l.add(acc, x)
    } else {
        l.add(acc, l.mul(l.splat(w), x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lookahead walks exactly the indices the pooling reads, in its order (table by table,
    /// sample by sample within a table): empty bags, blocks of samples that start anywhere, one
    /// table or all, no samples or no tables.
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
        let walk = Walk { tables: &[], ids: &indices, offsets: &offsets, weights: None, batch, resolve: &Indexed(Bounds::Zero) };
        for (samples, tables) in [(0..batch, 0..n_tables), (3..7, 0..n_tables), (2..9, 1..2), (4..4, 0..n_tables), (0..batch, 2..3), (0..batch, 1..1)] {
            let mut ahead = Lookahead::start(walk, samples.clone(), tables.clone());
            let walked: Vec<(usize, u32)> = std::iter::from_fn(|| ahead.next_run()).flat_map(|(t, run)| run.iter().map(move |&id| (t, id))).collect();
            let pooled: Vec<(usize, u32)> =
                tables.clone().flat_map(|t| samples.clone().flat_map(move |b| walk.range(t, b).map(move |i| (t, walk.ids[i])))).collect();
            assert_eq!(walked, pooled, "samples {samples:?}, tables {tables:?}");
        }
    }
}
