//! One interface over the GPU table kinds that u32 ids look up: [`GpuLookup`], and the closed
//! enum [`AnyGpuTable`] over them for code that picks a kind at run time.
//!
//! A kind implements the primitive `prepare_gather` (build the job, submit nothing); `gather`,
//! `bag` and `prepare_bag` have defaults built on it, as burn's `ModuleOps::embedding` defaults to
//! select + reshape. The default bag gathers every index into dense f32 rows and pools those
//! with the FP32 bag kernel, in the same compute pass: the same values as a fused bag (rows are
//! decoded exactly as the gather decodes them, then summed in index order), at the cost of
//! `indices × dim × 4` bytes of GPU scratch. Kinds with a fused bag kernel ([`GpuTable`],
//! [`super::GpuPrunedTable`]) override it. The row cache implements the trait too: its lookups
//! take `&self`, with the slot map behind a lock (see [`GpuCache`]).

use std::sync::Arc;

use super::bag::Indices;
use super::table::{LookupJob, Placement, Resident, Shard};
use super::{Context, Engine, GpuCache, GpuMixedTable, GpuPrunedTable, GpuRows, GpuTable};
use crate::bags::BagPlan;
use crate::bags::{Bags, Layout, Pooling};
use crate::format::Format;
use crate::{Bounds, Error};

/// A table on the GPU whose rows u32 ids look up: gathered into dense f32 rows, or pooled into
/// bags (EmbeddingBag). Every call submits its work and returns at once; the output stays on
/// the GPU in a [`GpuRows`] until read back. The `prepare_*` forms build the same job without
/// submitting it, for a caller's own command encoder ([`LookupJob::encode`]) or to repeat it.
///
/// Bounds are applied as [`Bounds`] says: with [`Bounds::Error`] a bad id fails the call before
/// any work; [`Bounds::Zero`] reads zero rows (which count for mean and take part in max) and
/// [`Bounds::Clamp`] the last row.
#[allow(async_fn_in_trait)] // the futures are awaited where they are made; wasm's are not Send
pub trait GpuLookup {
    /// Rows the ids address (before any pruning or remapping).
    fn rows(&self) -> usize;
    /// Values per row.
    fn dim(&self) -> usize;
    /// Bytes of GPU memory the table holds (shards, remaps).
    fn bytes(&self) -> u64;
    /// Names the table's buffers in the engine's [`super::Engine::memory_report`].
    fn set_name(&self, name: &str);

    /// Builds a gather of `ids` into `ids.len() × dim` f32 without submitting it.
    async fn prepare_gather(&self, ids: &[u32], bounds: Bounds) -> Result<LookupJob, Error>;

    /// Builds EmbeddingBag over `bags` of rows — `bags.len() × dim` values, `indices.len() × dim`
    /// for [`Pooling::None`] — without submitting it.
    async fn prepare_bag(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<LookupJob, Error> {
        // Offsets, weights and bounds are checked against this table before anything is built.
        BagPlan::new(&[(self.rows(), self.dim())], bags.len(), bags, pooling, bounds)?;
        gather_and_pool(&self.engine().ctx, self.dim(), bags, pooling, async |part| self.prepare_gather(&bags.indices[part], bounds).await).await
    }

    /// Gathers `ids` and submits the work.
    async fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<GpuRows, Error> {
        let job = self.prepare_gather(ids, bounds).await?;
        job.submit_checked().await?;
        Ok(job.into_output())
    }

    /// Pools `bags` and submits the work.
    async fn bag(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<GpuRows, Error> {
        let job = self.prepare_bag(bags, pooling, bounds).await?;
        job.submit_checked().await?;
        Ok(job.into_output())
    }

    /// The engine the table lives on (another handle to it).
    fn engine(&self) -> Engine;

    /// [`GpuLookup::prepare_gather`] writing f16 rows (see [`GpuRows`]): the gathered values
    /// rounded to nearest even, as [`crate::Lookup::gather_f16`] rounds them. By default the f32
    /// gather, then a pass that rounds it; a [`GpuTable`] writes f16 from the gather itself,
    /// half the bytes of an f32 gather.
    async fn prepare_gather_f16(&self, ids: &[u32], bounds: Bounds) -> Result<LookupJob, Error> {
        let job = self.prepare_gather(ids, bounds).await?;
        let pack = pack_f16(&self.engine().ctx, job.output()).await?;
        Ok(job.then(pack))
    }

    /// [`GpuLookup::prepare_bag`] writing f16 rows: the bags pool in f32, then a pass rounds
    /// them to f16 (bags are few beside the rows they read).
    async fn prepare_bag_f16(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<LookupJob, Error> {
        let job = self.prepare_bag(bags, pooling, bounds).await?;
        let pack = pack_f16(&self.engine().ctx, job.output()).await?;
        Ok(job.then(pack))
    }

    /// Gathers `ids` into f16 rows and submits the work.
    async fn gather_f16(&self, ids: &[u32], bounds: Bounds) -> Result<GpuRows, Error> {
        let job = self.prepare_gather_f16(ids, bounds).await?;
        job.submit_checked().await?;
        Ok(job.into_output())
    }

    /// Pools `bags` into f16 rows and submits the work.
    async fn bag_f16(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<GpuRows, Error> {
        let job = self.prepare_bag_f16(bags, pooling, bounds).await?;
        job.submit_checked().await?;
        Ok(job.into_output())
    }
}

/// Parameters of `pack_f16.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct PackParams {
    n_rows: u32,
    dim: u32,
    _pad0: u32,
    _pad1: u32,
}

/// The pass that rounds f32 `rows` (as a lookup wrote them) to f16 rows, two values a word,
/// into a new buffer: the job's output. One dispatch per range of rows whose f32 input fits a
/// storage binding.
pub(crate) async fn pack_f16(ctx: &Arc<Context>, rows: &GpuRows) -> Result<LookupJob, Error> {
    ctx.check_lost()?;
    let (n, dim) = (rows.rows, rows.dim);
    let words = dim.div_ceil(2) as u64;
    let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
    let out = ctx.create_buffer("f16 output", (n as u64 * 4 * words).max(4), usage, None).await?;
    let pipeline = ctx.pipeline(super::ShaderId::PackF16, (ctx.workgroup_size, 1)).await?;
    // Rows per dispatch: their f32 input within one binding, starting at an aligned offset.
    let granule = (ctx.limits.min_storage_buffer_offset_alignment.max(4) / 4) as u64;
    let chunk = (ctx.max_binding_bytes / (4 * dim.max(1) as u64)) / granule * granule;
    if chunk == 0 {
        return Err(Error::LimitExceeded {
            what: "bytes of one f32 row group to round to f16",
            requested: 4 * dim as u64 * granule,
            max: ctx.max_binding_bytes,
        });
    }
    // The gather layout's second input, unused by the kernel.
    let unused = ctx.create_buffer("pack f16 (unused)", 4, wgpu::BufferUsages::STORAGE, None).await?;
    let mut inputs = vec![unused];
    let mut dispatches = Vec::new();
    let mut start = 0u64;
    while start < n as u64 {
        let m = chunk.min(n as u64 - start);
        let params = PackParams { n_rows: m as u32, dim: dim as u32, _pad0: 0, _pad1: 0 };
        let uniform = ctx.create_buffer("pack f16 params", 16, wgpu::BufferUsages::UNIFORM, Some(bytemuck::bytes_of(&params))).await?;
        let (gx, gy) = ctx.grid("workgroups of one f16 rounding dispatch", m * words, ctx.workgroup_size as u64)?;
        let bind_group = ctx.bind_group(
            "edo pack f16",
            &ctx.gather_layout,
            &[
                uniform.as_entire_binding(),
                super::table::buffer_range(&rows.buffer, 4 * dim as u64 * start, 4 * dim as u64 * m),
                inputs[0].as_entire_binding(),
                super::table::buffer_range(&out, 4 * words * start, 4 * words * m),
            ],
        );
        dispatches.push((bind_group, gx, gy));
        inputs.push(uniform);
        start += m;
    }
    let output = GpuRows { ctx: ctx.clone(), buffer: out, rows: n, dim, half: true };
    Ok(LookupJob::new(ctx.clone(), vec![(pipeline, dispatches)], inputs, output))
}

/// The ranges of `n` gathered rows of `dim` values that fit one storage binding each: the
/// shards of a dense table of gathered rows. At least one (empty) range.
pub(crate) fn dense_parts(ctx: &Context, n: usize, dim: usize) -> Result<Vec<std::ops::Range<usize>>, Error> {
    let per = (ctx.max_binding_bytes / (4 * dim.max(1) as u64)).min(u32::MAX as u64) as usize;
    if per == 0 {
        return Err(Error::LimitExceeded { what: "bytes of one gathered row", requested: 4 * dim as u64, max: ctx.max_binding_bytes });
    }
    if n == 0 {
        // One empty part: an empty lookup still has an output to bind.
        #[allow(clippy::single_range_in_vec_init)]
        return Ok(vec![0..0]);
    }
    Ok((0..n).step_by(per).map(|s| s..(s + per).min(n)).collect())
}

/// A bag built by gathering: `gather(range)` builds the gather of the indices in `range` (rows
/// of `dim` values; the ranges of [`dense_parts`], each within one binding), and the FP32 bag
/// kernel pools the gathered rows, all in one job.
pub(crate) async fn gather_and_pool<I>(
    ctx: &Arc<Context>,
    dim: usize,
    bags: &Bags<'_, I>,
    pooling: Pooling,
    mut gather: impl AsyncFnMut(std::ops::Range<usize>) -> Result<LookupJob, Error>,
) -> Result<LookupJob, Error> {
    let mut job: Option<LookupJob> = None;
    let mut parts = Vec::new();
    for part in dense_parts(ctx, bags.indices.len(), dim)? {
        let g = gather(part).await?;
        parts.push(g.output.clone_handle());
        job = Some(match job {
            None => g,
            Some(j) => j.then(g),
        });
    }
    let pool = pool_dense(ctx, parts, bags, pooling).await?;
    Ok(job.expect("dense_parts gives at least one part").then(pool))
}

/// The bag pass over rows already gathered, one per index of `bags` in order (`parts`, each
/// within one binding, from [`dense_parts`]): the FP32 bag kernel over those rows as a table,
/// with index `i` reading row `i`. The parts stay alive with the job.
pub(crate) async fn pool_dense<I>(ctx: &Arc<Context>, parts: Vec<GpuRows>, bags: &Bags<'_, I>, pooling: Pooling) -> Result<LookupJob, Error> {
    let dim = parts.first().map_or(1, |p| p.dim);
    let n = bags.indices.len();
    if n as u64 * dim as u64 > u32::MAX as u64 {
        return Err(Error::LimitExceeded { what: "values of the rows gathered for a bag (u32 words)", requested: n as u64 * dim as u64, max: u32::MAX as u64 });
    }
    let iota: Vec<u32> = (0..n as u32).collect();
    let dense = bags.with_indices(&iota);
    let plan = BagPlan::new(&[(n, dim)], dense.len(), &dense, pooling, Bounds::Error)?;
    let mut shards = Vec::with_capacity(parts.len());
    let mut word = 0u32;
    for part in &parts {
        let words = (part.rows * dim) as u32;
        shards.push(Shard { buffer: part.buffer.clone(), word_start: word, word_end: word + words });
        word += words;
    }
    let placement = Placement { word_base: 0, rows: n as u32, dim: dim as u32, row_words: dim as u32, code_words: dim as u32 };
    let res = Resident { ctx: ctx.clone(), format: Format::F32, tables: vec![placement], shards };
    let (pipeline, dispatches, mut inputs, output) =
        res.encode_bags(dense.len(), &plan, Indices::Host(&iota), bags.per_sample_weights, pooling, Bounds::Error, Layout::Concat).await?;
    inputs.extend(parts.into_iter().map(|p| p.buffer));
    Ok(LookupJob::new(ctx.clone(), vec![(pipeline, dispatches)], inputs, output))
}

/// Implements [`GpuLookup`] for a kind by its inherent methods of the same names (and its fused
/// `prepare_bag` and f16 gather, where it has them; else the trait's defaults).
macro_rules! by_inherent_methods {
    ($t:ty $(, bag: $fused_bag:ident)? $(, f16: $fused_f16:ident)?) => {
        impl GpuLookup for $t {
            fn rows(&self) -> usize {
                <$t>::rows(self)
            }
            fn dim(&self) -> usize {
                <$t>::dim(self)
            }
            fn bytes(&self) -> u64 {
                <$t>::bytes(self)
            }
            fn set_name(&self, name: &str) {
                <$t>::set_name(self, name)
            }
            fn engine(&self) -> Engine {
                <$t>::engine(self)
            }
            async fn prepare_gather(&self, ids: &[u32], bounds: Bounds) -> Result<LookupJob, Error> {
                <$t>::prepare_gather(self, ids, bounds).await
            }
            $(
                async fn prepare_bag(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<LookupJob, Error> {
                    <$t>::$fused_bag(self, bags, pooling, bounds).await
                }
            )?
            $(
                async fn prepare_gather_f16(&self, ids: &[u32], bounds: Bounds) -> Result<LookupJob, Error> {
                    <$t>::$fused_f16(self, ids, bounds).await
                }
            )?
        }
    };
}

by_inherent_methods!(GpuTable, bag: prepare_bag, f16: prepare_gather_f16_fused);
by_inherent_methods!(GpuPrunedTable, bag: prepare_bag);
by_inherent_methods!(GpuMixedTable);

/// Any of the GPU table kinds of [`GpuLookup`], for code that chooses one at run time (a
/// planner's choice, a file's contents): a closed enum, so no `dyn` and no boxing.
#[derive(Clone)]
pub enum AnyGpuTable {
    /// A packed table of one format.
    Dense(GpuTable),
    /// A compact table of kept rows and its remap.
    Pruned(GpuPrunedTable),
    /// Hot rows in one format, cold rows in another.
    Mixed(GpuMixedTable),
    /// Rows of a host table cached on the GPU (shared: lookups take `&self`).
    Cached(Arc<GpuCache>),
}

macro_rules! each {
    ($self:expr, $t:ident => $e:expr) => {
        match $self {
            AnyGpuTable::Dense(t) => {
                let $t: &GpuTable = t;
                $e
            }
            AnyGpuTable::Pruned(t) => {
                let $t: &GpuPrunedTable = t;
                $e
            }
            AnyGpuTable::Mixed(t) => {
                let $t: &GpuMixedTable = t;
                $e
            }
            AnyGpuTable::Cached(t) => {
                let $t: &GpuCache = t;
                $e
            }
        }
    };
}

impl GpuLookup for AnyGpuTable {
    fn rows(&self) -> usize {
        each!(self, t => GpuLookup::rows(t))
    }
    fn dim(&self) -> usize {
        each!(self, t => GpuLookup::dim(t))
    }
    fn bytes(&self) -> u64 {
        each!(self, t => GpuLookup::bytes(t))
    }
    fn set_name(&self, name: &str) {
        each!(self, t => GpuLookup::set_name(t, name))
    }
    async fn prepare_gather(&self, ids: &[u32], bounds: Bounds) -> Result<LookupJob, Error> {
        each!(self, t => GpuLookup::prepare_gather(t, ids, bounds).await)
    }
    async fn prepare_bag(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<LookupJob, Error> {
        each!(self, t => GpuLookup::prepare_bag(t, bags, pooling, bounds).await)
    }
    async fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<GpuRows, Error> {
        each!(self, t => GpuLookup::gather(t, ids, bounds).await)
    }
    async fn bag(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<GpuRows, Error> {
        each!(self, t => GpuLookup::bag(t, bags, pooling, bounds).await)
    }
    async fn prepare_gather_f16(&self, ids: &[u32], bounds: Bounds) -> Result<LookupJob, Error> {
        each!(self, t => GpuLookup::prepare_gather_f16(t, ids, bounds).await)
    }
    fn engine(&self) -> Engine {
        each!(self, t => GpuLookup::engine(t))
    }
}

impl From<GpuTable> for AnyGpuTable {
    fn from(t: GpuTable) -> Self {
        AnyGpuTable::Dense(t)
    }
}
impl From<GpuPrunedTable> for AnyGpuTable {
    fn from(t: GpuPrunedTable) -> Self {
        AnyGpuTable::Pruned(t)
    }
}
impl From<GpuMixedTable> for AnyGpuTable {
    fn from(t: GpuMixedTable) -> Self {
        AnyGpuTable::Mixed(t)
    }
}
impl From<GpuCache> for AnyGpuTable {
    // In a browser nothing runs on another thread; the Arc only shares the cache.
    #[cfg_attr(web, allow(clippy::arc_with_non_send_sync))]
    fn from(t: GpuCache) -> Self {
        AnyGpuTable::Cached(Arc::new(t))
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        super::super::shaders::assert_wgsl_layout!(super::super::ShaderId::PackF16, PackParams { n_rows, dim, _pad0, _pad1 });
    }
}
