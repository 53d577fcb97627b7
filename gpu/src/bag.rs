//! EmbeddingBag on the GPU, over one table or a batch of tables of one format in one dispatch
//! per shard.

use edo_core::Error as CoreError;
use std::sync::Arc;

use super::job::{buffer_range, dense_parts, Encoded, Indices, LookupJob, Pass};
use super::table::{Placement, Resident, RowPolicy, Shard};
use super::{Context, Engine, GpuRows, ShaderId};
use crate::bags::{BagPlan, TableShape};
use crate::bags::{Bags, Layout, Pooling};
use crate::format::{Format, PackedTable};
use crate::{Bounds, Error};

/// The uniform block of `bag.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct BagParams {
    batch: u32,
    n_bags: u32,
    pooling: u32,
    policy: u32,
    has_weights: u32,
    shard_start: u32,
    shard_end: u32,
    first_pass: u32,
    last_pass: u32,
    offsets_base: u32,
    counts_base: u32,
    max_dim: u32,
}
const _: () = assert!(std::mem::size_of::<BagParams>() == 48);

/// `TableMeta` of `bag.wgsl`: where a table is, and where its bags go.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct TableMeta {
    word_base: u32,
    rows: u32,
    dim: u32,
    row_words: u32,
    code_words: u32,
    out_base: u32,
    out_stride: u32,
    _pad: u32,
}
const _: () = assert!(std::mem::size_of::<TableMeta>() == 32);

impl TableShape for Placement {
    fn shape(&self) -> (usize, usize) {
        (self.rows as usize, self.dim as usize)
    }
}

/// Several tables of one format resident together — FBGEMM's table-batched embedding: one
/// dispatch (per shard) pools the bags of all of them. Tables may differ in rows and dim.
pub struct GpuTableBatch {
    res: Resident,
}

impl GpuTableBatch {
    /// Uploads `tables` (all of one format) concatenated, split into shards of whole rows.
    pub async fn upload(engine: &Engine, tables: &[&PackedTable]) -> Result<GpuTableBatch, Error> {
        Ok(GpuTableBatch { res: Resident::upload(engine, tables).await? })
    }

    /// The tables' format (they share one).
    pub fn format(&self) -> Format {
        self.res.format
    }
    /// Number of tables.
    pub fn len(&self) -> usize {
        self.res.tables.len()
    }
    /// Whether the batch holds no table.
    pub fn is_empty(&self) -> bool {
        self.res.tables.is_empty()
    }
    /// `(rows, dim)` of each table.
    pub fn shapes(&self) -> Vec<(usize, usize)> {
        self.res.tables.iter().map(|p| p.shape()).collect()
    }
    /// Number of storage buffers the tables are split into.
    pub fn shard_count(&self) -> usize {
        self.res.shards.len()
    }
    /// Bytes of GPU memory the tables take.
    pub fn bytes(&self) -> u64 {
        self.res.bytes()
    }
    /// Names the tables in the engine's [`crate::Engine::memory_report`].
    pub fn set_name(&self, name: &str) {
        self.res.set_name(name)
    }

    /// Pools `B·T` bags (feature-major: the `batch` bags of table 0 first) and submits the work.
    /// The output is `[B, Σ dims]` for [`Layout::Concat`] (`rows = B`, `dim = Σ dims`), or the
    /// same values table after table for [`Layout::PerTable`].
    pub async fn bags(&self, batch: usize, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds, layout: Layout) -> Result<GpuRows, Error> {
        let job = GpuTableBatch::prepare_bags(self, batch, bags, pooling, bounds, layout).await?;
        job.submit_checked().await?;
        Ok(job.output)
    }

    /// [`GpuTableBatch::bags`] without submitting: for encoding into the caller's encoder.
    #[doc(hidden)]
    pub async fn prepare_bags(&self, batch: usize, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds, layout: Layout) -> Result<LookupJob, Error> {
        self.res.prepare_bags(batch, bags, pooling, bounds, layout).await
    }
}

impl Resident {
    #[doc(hidden)]
    pub async fn prepare_bags(&self, batch: usize, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds, layout: Layout) -> Result<LookupJob, Error> {
        self.ctx.check_lost()?;
        let plan = BagPlan::new(&self.tables, batch, bags, pooling, bounds)?;
        Ok(self.encode_bags(batch, &plan, Indices::Host(bags.indices), bags.per_sample_weights, pooling, bounds, layout).await?.into_job())
    }

    /// The bag kernel's pass over validated offsets: its pipeline, dispatches, the buffers they
    /// bind, and the output.
    #[allow(clippy::too_many_arguments)]
    #[doc(hidden)]
    pub async fn encode_bags(
        &self,
        batch: usize,
        plan: &BagPlan,
        indices: Indices<'_>,
        weights: Option<&[f32]>,
        pooling: Pooling,
        bounds: Bounds,
        layout: Layout,
    ) -> Result<Encoded, Error> {
        let ctx = &self.ctx;
        let n_indices = indices.len();
        // Bags are not split over dispatches: their output and indices must fit one binding of the
        // device (the engine's max_binding_bytes bounds table shards and gather outputs only).
        let max_binding = ctx.limits.max_storage_buffer_binding_size;
        let out_bytes = 4 * plan.out_len as u64;
        for (what, bytes) in [("bag output bytes", out_bytes), ("bag indices bytes", 4 * n_indices as u64)] {
            if bytes > max_binding {
                return Err(CoreError::LimitExceeded { what, requested: bytes, max: max_binding }.into());
            }
        }
        let dims: Vec<usize> = self.tables.iter().map(|p| p.dim as usize).collect();
        // The vec4 bags of FP32 and the 16-byte ones bind each shard as 16-byte words: a shard
        // under 16 bytes (the empty gathered part of a bag pass with no indices) takes the
        // one-column kernel.
        let vec4 = pooling != Pooling::None && dims.iter().all(|d| d % 4 == 0) && self.shards.iter().all(|s| s.buffer.inner.size() >= 16);
        let shader = bag_shader(self.format, &self.tables, vec4);
        let max_dim = dims.iter().copied().max().unwrap_or(1);
        let n_bags = if pooling == Pooling::None { n_indices } else { batch * self.tables.len() } as u64;
        let shape = bag_shape(ctx, shader, max_dim, n_bags);
        let pipeline = ctx.pipeline(shader, shape).await?;

        let mut metas = Vec::with_capacity(self.tables.len());
        let mut out_base = 0u32;
        for p in &self.tables {
            let (base, stride) = match layout {
                _ if pooling == Pooling::None => (0, p.dim),
                Layout::Concat => (out_base, plan.total_dim as u32),
                Layout::PerTable => (out_base, p.dim),
            };
            metas.push(TableMeta {
                word_base: p.word_base,
                rows: p.rows,
                dim: p.dim,
                row_words: p.row_words,
                code_words: p.code_words,
                out_base: base,
                out_stride: stride,
                _pad: 0,
            });
            out_base += match layout {
                Layout::Concat => p.dim,
                Layout::PerTable => p.dim * batch as u32,
            };
        }
        let storage = wgpu::BufferUsages::STORAGE;
        let metas = ctx.pooled("bag tables", 32 * metas.len() as u64, storage, Some(bytemuck::cast_slice(&metas)), super::Fit::Class).await?;
        // Indices from the host over several shards are sorted out here, so each shard's
        // dispatch reads only its own indices (its offsets, then the bags' own for counting).
        let n_offsets = plan.offsets.len();
        let lists = match indices {
            Indices::Host(ids) if self.shards.len() > 1 && pooling != Pooling::None && 4 * ((self.shards.len() + 1) * n_offsets) as u64 <= max_binding => {
                Some(BagLists::new(ids, weights, &plan.offsets, batch, &self.tables, &self.shards, bounds))
            }
            _ => None,
        };
        let weights = lists.as_ref().map_or(weights, |l| l.weights.as_deref());
        let indices = match (&lists, indices) {
            (Some(l), _) => {
                ctx.pooled("bag indices by shard", 4 * l.indices.len() as u64, storage, Some(bytemuck::cast_slice(&l.indices)), super::Fit::Class).await?
            }
            (None, Indices::Host(i)) => ctx.pooled("bag indices", 4 * i.len() as u64, storage, Some(bytemuck::cast_slice(i)), super::Fit::Class).await?,
            (None, Indices::Device(buffer, _)) => buffer,
        };
        let offsets: &[u32] = lists.as_ref().map_or(&plan.offsets, |l| &l.offsets);
        let offsets = ctx.pooled("bag offsets", 4 * offsets.len() as u64, storage, Some(bytemuck::cast_slice(offsets)), super::Fit::Class).await?;
        let has_weights = weights.is_some();
        let weights = weights.unwrap_or(&[0.0]);
        let weights = ctx.pooled("bag weights", 4 * weights.len() as u64, storage, Some(bytemuck::cast_slice(weights)), super::Fit::Class).await?;
        let out = ctx.pooled("bag output", out_bytes, storage | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST, None, super::Fit::Exact).await?;

        let (gx, gy) = ctx.grid("workgroups of one bag dispatch", n_bags, shape.1 as u64)?;
        let mut dispatches = Vec::new();
        let mut inputs = vec![metas, indices, offsets, weights];
        if n_bags > 0 {
            let last = self.shards.len() - 1;
            for (k, shard) in self.shards.iter().enumerate() {
                let params = BagParams {
                    batch: batch.max(1) as u32,
                    n_bags: n_bags as u32,
                    pooling: pooling.shader_code(),
                    policy: RowPolicy::from(bounds) as u32,
                    has_weights: has_weights as u32,
                    shard_start: shard.word_start,
                    shard_end: shard.word_end,
                    first_pass: (k == 0) as u32,
                    last_pass: (k == last) as u32,
                    offsets_base: if lists.is_some() { (k * n_offsets) as u32 } else { 0 },
                    counts_base: if lists.is_some() { (self.shards.len() * n_offsets) as u32 } else { 0 },
                    max_dim: max_dim as u32,
                };
                let uniform = ctx.pooled("bag params", 48, wgpu::BufferUsages::UNIFORM, Some(bytemuck::bytes_of(&params)), super::Fit::Class).await?;
                let bind_group = ctx.bind_group(
                    "edo bag",
                    &ctx.bag_layout,
                    &[
                        uniform.as_entire_binding(),
                        inputs[0].as_entire_binding(),
                        inputs[1].as_entire_binding(),
                        inputs[2].as_entire_binding(),
                        inputs[3].as_entire_binding(),
                        shard.buffer.as_entire_binding(),
                        buffer_range(&out, 0, out_bytes),
                    ],
                );
                dispatches.push((bind_group, gx, gy));
                inputs.push(uniform);
            }
        }
        // Every buffer a bind group binds stays with the job (a bind group does not keep a buffer
        // from being destroyed), the tables' shards too: a job may outlive its tables.
        inputs.extend(self.shards.iter().map(|s| s.buffer.clone()));
        let rows = if pooling == Pooling::None { n_indices } else { batch };
        Ok(Encoded { pass: Pass { pipeline, dispatches }, inputs, output: GpuRows::new(ctx.clone(), out, rows, plan.total_dim, crate::Element::F32) })
    }
}

/// The bag kernel for tables of `format` placed as `tables`; `vec4` when the quad kernel may run
/// (every dim a multiple of 4, pooling). Tables of a format with 16-byte reads
/// ([`has_wide_reads`](super::decoders::has_wide_reads)) whose rows start on 16-byte boundaries and whose dims are
/// multiples of 16 get the kernel that reads a lane's sixteen columns of a row at once: the 8-bit
/// formats' rows aligned to 16 bytes, FP16's rows of such dims without an alignment.
pub fn bag_shader(format: Format, tables: &[Placement], vec4: bool) -> ShaderId {
    let aligned = |p: &Placement| p.dim.is_multiple_of(16) && p.row_words.is_multiple_of(4) && p.word_base.is_multiple_of(4);
    if vec4 && super::decoders::has_wide_reads(format) && tables.iter().all(aligned) {
        return ShaderId::BagWide { format };
    }
    ShaderId::Bag { format, vec4 }
}

/// Compiles the bag kernel a first small batch of bags over one table of `format` and `dim`, rows
/// `row_words` words apart, uses (`prepare_rows`, `prepare_model`).
pub async fn prepare_first_bag(ctx: &Context, format: Format, dim: usize, row_words: usize) -> Result<(), Error> {
    let placement = Placement { word_base: 0, rows: 1, dim: dim as u32, row_words: row_words as u32, code_words: format.code_words(dim) as u32 };
    let shader = bag_shader(format, &[placement], dim.is_multiple_of(4));
    ctx.pipeline(shader, bag_shape(ctx, shader, dim, 1)).await.map(drop)
}

/// Lanes of a bag's work below which a batch is small: it then gets more lanes per bag.
const SMALL_BATCH_LANES: u64 = 1 << 15;

/// The bag kernel's workgroup shape for `n_bags` bags whose widest row has `max_dim` values: a
/// lane per four quads of the row (or four columns; each lane then keeps sixteen loads in
/// flight), or, for a small batch, a lane per quad (per column), up to 32 — so that a batch of a
/// few bags still spreads over enough lanes to hide the latency of its reads. Pooling stays in
/// index order either way.
pub fn bag_shape(ctx: &Context, shader: ShaderId, max_dim: usize, n_bags: u64) -> (u32, u32) {
    let quads = max_dim.max(1).div_ceil(shader.values_per_step());
    if matches!(shader, ShaderId::BagWide { .. }) {
        // A lane owns sixteen contiguous columns, whatever the batch.
        return ctx.workgroup_shape(quads, 1);
    }
    let narrow = quads.div_ceil(4);
    let lanes = if n_bags.saturating_mul(narrow as u64) < SMALL_BATCH_LANES { quads } else { narrow };
    ctx.workgroup_shape(lanes, 1)
}

/// Host indices of bags sorted out by the shard that holds their rows: per shard, the indices
/// of every bag that lie in it (and their weights), in bag order, with `B·T + 1` offsets; then
/// the bags' own offsets, which count their indices for mean.
struct BagLists {
    indices: Vec<u32>,
    weights: Option<Vec<f32>>,
    /// `(shards + 1) · (B·T + 1)` offsets into `indices`: shard after shard, then the bags' own.
    offsets: Vec<u32>,
}

impl BagLists {
    fn new(
        ids: &[u32],
        weights: Option<&[f32]>,
        offsets: &[u32],
        batch: usize,
        tables: &[Placement],
        shards: &[super::table::Shard],
        bounds: Bounds,
    ) -> BagLists {
        // The shard whose dispatch pools index `id` of table `t`, as the kernel's locate decides:
        // its row's shard, the last row's under Clamp, and the first pass's (shard 0) for a zero
        // row.
        let shard_of = |t: usize, id: u32| -> usize {
            let p = &tables[t];
            let row = match id {
                r if r < p.rows => r,
                _ if bounds == Bounds::Clamp => p.rows - 1,
                _ => return 0,
            };
            super::table::shard_holding(shards, p.word_base as u64 + row as u64 * p.row_words as u64)
        };
        let n_bags = offsets.len() - 1;
        let mut lists: Vec<(Vec<u32>, Vec<f32>, Vec<u32>)> = vec![(Vec::new(), Vec::new(), Vec::with_capacity(n_bags + 1)); shards.len()];
        for g in 0..n_bags {
            for (idx, _, off) in &mut lists {
                off.push(idx.len() as u32);
            }
            let t = g / batch.max(1);
            for j in offsets[g] as usize..offsets[g + 1] as usize {
                let l = &mut lists[shard_of(t, ids[j])];
                l.0.push(ids[j]);
                if let Some(w) = weights {
                    l.1.push(w[j]);
                }
            }
        }
        let mut out = BagLists { indices: Vec::with_capacity(ids.len()), weights: weights.map(|_| Vec::with_capacity(ids.len())), offsets: Vec::new() };
        for (idx, w, off) in lists {
            let base = out.indices.len() as u32;
            out.offsets.extend(off.iter().map(|o| base + o));
            out.offsets.push(base + idx.len() as u32);
            out.indices.extend(idx);
            if let Some(all) = &mut out.weights {
                all.extend(w);
            }
        }
        out.offsets.extend_from_slice(offsets);
        out
    }
}

/// A bag built by gathering: `gather(range)` builds the gather of the indices in `range` (rows
/// of `dim` values; the ranges of [`dense_parts`], each within one binding), and the FP32 bag
/// kernel pools the gathered rows, all in one job.
pub async fn gather_and_pool<I, E: From<Error>>(
    ctx: &Arc<Context>,
    dim: usize,
    bags: &Bags<'_, I>,
    pooling: Pooling,
    mut gather: impl AsyncFnMut(std::ops::Range<usize>) -> Result<LookupJob, E>,
) -> Result<LookupJob, E> {
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
    let pool = pool_gathered(ctx, parts, bags, pooling).await?;
    Ok(job.expect("dense_parts gives at least one part").then(pool))
}

/// The bag pass over rows already gathered, one per index of `bags` in order (`parts`, each
/// within one binding, from [`dense_parts`]): the FP32 bag kernel over those rows as a table,
/// with index `i` reading row `i`. The parts stay alive with the job.
pub async fn pool_gathered<I>(ctx: &Arc<Context>, parts: Vec<GpuRows>, bags: &Bags<'_, I>, pooling: Pooling) -> Result<LookupJob, Error> {
    let dim = parts.first().map_or(1, |p| p.dim);
    let n = bags.indices.len();
    if n as u64 * dim as u64 > u32::MAX as u64 {
        return Err(CoreError::LimitExceeded {
            what: "values of the rows gathered for a bag (u32 words)",
            requested: n as u64 * dim as u64,
            max: u32::MAX as u64,
        }
        .into());
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
    let mut pass = res.encode_bags(dense.len(), &plan, Indices::Host(&iota), bags.per_sample_weights, pooling, Bounds::Error, Layout::Concat).await?;
    pass.inputs.extend(parts.into_iter().map(|p| p.buffer));
    Ok(pass.into_job())
}

impl Engine {
    /// Compiles the kernels of a static model's first embedding of a few texts (its bag kernel
    /// fused with the decoder, in a small batch's shape, and the normalisation), for a model
    /// whose table is in `format` with `dim` values and rows aligned to `row_alignment` bytes
    /// on the GPU ([`crate::format::NO_ROW_ALIGNMENT`] for packed rows; `edo`'s
    /// `StaticModel::with_row_alignment`), now rather than at that embedding. In a browser the
    /// compiler runs in the GPU process: a page can start this, read the model file meanwhile,
    /// and find the kernels ready (`edo::file::table_shape` gives the format, dim and row
    /// alignment from the file's first bytes). At dims up to 256 (64 where the dim is not a multiple
    /// of 4) a large batch — 32 768 lanes' worth of bags or more at a lane per four quads (four
    /// columns), so 2 048 texts at dim 256 — runs the bag kernel in another shape, compiled at
    /// its first use, so a page that embeds a query at a time never pays for it (on a software
    /// adapter such as SwiftShader each shape takes most of a second to compile); wider rows, and
    /// FP16 rows of a dim that is a multiple of 16 (a lane per sixteen columns, read 16 bytes a
    /// load), run one shape at every batch size.
    pub async fn prepare_model(&self, format: Format, dim: usize, row_alignment: usize) -> Result<(), Error> {
        let ctx = &self.ctx;
        ctx.check_lost()?;
        let row_words = super::prepared_row_words(format, dim, row_alignment)?;
        // The pipelines `GpuStaticModel::prepare_encode` asks for: a bag with sum pooling over
        // one table (`GpuTableBatch::encode_bags`), then `normalize_rows`.
        prepare_first_bag(ctx, format, dim, row_words).await?;
        ctx.pipeline(ShaderId::NormalizeRows, (ctx.workgroup_size, 1)).await.map(drop)
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;
    use crate::ShaderId;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        crate::assert_wgsl_layout!(
            ShaderId::Bag { format: crate::Format::F32, vec4: false },
            BagParams { batch, n_bags, pooling, policy, has_weights, shard_start, shard_end, first_pass, last_pass, offsets_base, counts_base, max_dim }
        );
        crate::assert_wgsl_layout!(
            ShaderId::Bag { format: crate::Format::F32, vec4: false },
            TableMeta { word_base, rows, dim, row_words, code_words, out_base, out_stride, _pad }
        );
    }

    #[test]
    fn aligned_tables_take_the_16_byte_bag() {
        let at = |dim: u32, row_words: u32, word_base: u32| Placement { word_base, rows: 10, dim, row_words, code_words: dim / 4 };
        let wide = ShaderId::BagWide { format: Format::Int8 };
        assert_eq!(bag_shader(Format::Int8, &[at(128, 36, 0), at(48, 16, 360)], true), wide);
        // Unaligned rows, a dim not a multiple of 16, no quad kernel, another format: the others.
        assert_eq!(bag_shader(Format::Int8, &[at(128, 34, 0)], true), ShaderId::Bag { format: Format::Int8, vec4: true });
        assert_eq!(bag_shader(Format::Int8, &[at(128, 36, 0), at(40, 12, 360)], true), ShaderId::Bag { format: Format::Int8, vec4: true });
        assert_eq!(bag_shader(Format::Int8, &[at(128, 36, 0)], false), ShaderId::Bag { format: Format::Int8, vec4: false });
        assert_eq!(bag_shader(Format::Int4, &[at(128, 20, 0)], true), ShaderId::Bag { format: Format::Int4, vec4: true });
        // A table after one whose rows end off a 16-byte boundary (an unaligned table first).
        assert_eq!(bag_shader(Format::Int8, &[at(128, 36, 0), at(48, 16, 34 * 3)], true), ShaderId::Bag { format: Format::Int8, vec4: true });
        assert_eq!(ShaderId::gather(Format::Int8, 128, 36), ShaderId::GatherWide { format: Format::Int8 });
        assert_eq!(ShaderId::gather(Format::Int8, 128, 34), ShaderId::Gather { format: Format::Int8, vec4: true });
        assert_eq!(ShaderId::gather(Format::Int8, 40, 12), ShaderId::Gather { format: Format::Int8, vec4: true });
        // FP16 rows of whole vec4s need no alignment.
        let half = |dim: u32, row_words: u32, word_base: u32| Placement { code_words: dim / 2, ..at(dim, row_words, word_base) };
        assert_eq!(bag_shader(Format::F16, &[half(128, 64, 0), half(48, 24, 640)], true), ShaderId::BagWide { format: Format::F16 });
        assert_eq!(bag_shader(Format::F16, &[half(40, 20, 0)], true), ShaderId::Bag { format: Format::F16, vec4: true });
        assert_eq!(ShaderId::gather(Format::F16, 40, 20), ShaderId::GatherWide { format: Format::F16 });
        assert_eq!(ShaderId::gather(Format::F16, 44, 22), ShaderId::Gather { format: Format::F16, vec4: true });
        // FP8 and q8_0 as INT8: aligned rows at dims that are multiples of 16 (q8_0's: of 32, rows
        // of dim / 4 code words and dim / 64 words of scales).
        for format in [Format::Fp8E4M3, Format::Fp8E5M2] {
            let fp8 = |dim: u32, row_words: u32, word_base: u32| Placement { code_words: dim / 4, ..at(dim, row_words, word_base) };
            assert_eq!(bag_shader(format, &[fp8(128, 36, 0), fp8(48, 16, 360)], true), ShaderId::BagWide { format });
            assert_eq!(bag_shader(format, &[fp8(128, 33, 0)], true), ShaderId::Bag { format, vec4: true });
            assert_eq!(ShaderId::gather(format, 128, 36), ShaderId::GatherWide { format });
            assert_eq!(ShaderId::gather(format, 40, 12), ShaderId::Gather { format, vec4: true });
        }
        assert_eq!(bag_shader(Format::Q8_0, &[at(128, 36, 0)], true), ShaderId::BagWide { format: Format::Q8_0 });
        assert_eq!(bag_shader(Format::Q8_0, &[at(128, 34, 0)], true), ShaderId::Bag { format: Format::Q8_0, vec4: true });
        assert_eq!(ShaderId::gather(Format::Q8_0, 96, 28), ShaderId::GatherWide { format: Format::Q8_0 });
        assert_eq!(ShaderId::gather(Format::Q8_0, 96, 26), ShaderId::Gather { format: Format::Q8_0, vec4: true });
        // Packed q8_0 rows of whole vec4s (dims 224 + 256k, multiples of 256) need no alignment.
        for dim in [224, 256, 480, 2048] {
            let row_words = Format::Q8_0.row_words(dim);
            assert!(row_words.is_multiple_of(4), "{dim}");
            assert_eq!(ShaderId::gather(Format::Q8_0, dim, row_words), ShaderId::GatherWide { format: Format::Q8_0 });
        }
        assert_eq!(ShaderId::gather(Format::Q8_0, 128, Format::Q8_0.row_words(128)), ShaderId::Gather { format: Format::Q8_0, vec4: true });
        // The 4-bit formats read words.
        assert_eq!(ShaderId::gather(Format::Q4_0, 128, 20), ShaderId::Gather { format: Format::Q4_0, vec4: true });
    }
}
