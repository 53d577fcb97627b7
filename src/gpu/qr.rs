//! Quotient-remainder embeddings on the GPU (DLRM's `QREmbeddingBag` lookup): the two tables
//! ([`GpuQrTables`], the combine chosen per call) and the table kind over them
//! ([`GpuQrTable`], a [`GpuLookup`] of u32 and 64-bit ids).

use super::job::LookupJob;
use super::lookup::{GpuLookup, Reupload};
use super::table::{Resident, RowPolicy};
use super::{Engine, GpuRows, ShaderId};
use crate::bags::{Bags, Pooling};
use crate::format::PackedTable;
use crate::qr::{check_qr, qr_split, QrCombine, QrTable};
use crate::request::{Request, Select};
use crate::{Bounds, Error};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct QrParams {
    n_ids: u32,
    m: u32,
    stage: u32,
    combine: u32,
    policy: u32,
    dim: u32,
    out_stride: u32,
    rows: u32,
    row_words: u32,
    code_words: u32,
    shard_first: u32,
    shard_rows: u32,
}
const _: () = assert!(std::mem::size_of::<QrParams>() == 48);

/// The two tables of a quotient-remainder embedding on the GPU: `quotient` with `ceil(N / m)`
/// rows and `remainder` with `m`, of one format and dim. Id `i` reads quotient row `i / m` and
/// remainder row `i mod m`: `N` ids for `N / m + m` rows.
pub struct GpuQrTables {
    quotient: Resident,
    remainder: Resident,
}

impl GpuQrTables {
    /// Uploads the quotient and the remainder tables (one format and dim).
    pub async fn upload(engine: &Engine, quotient: &PackedTable, remainder: &PackedTable) -> Result<GpuQrTables, Error> {
        check_qr(quotient, remainder)?;
        if quotient.format() != remainder.format() {
            return Err(Error::MixedFormats { index: 1, expected: quotient.format(), found: remainder.format() });
        }
        Ok(GpuQrTables { quotient: Resident::upload(engine, &[quotient]).await?, remainder: Resident::upload(engine, &[remainder]).await? })
    }

    /// Bytes of GPU memory of both tables.
    pub fn bytes(&self) -> u64 {
        self.quotient.bytes() + self.remainder.bytes()
    }
    /// The tables' format (they share one).
    pub fn format(&self) -> crate::Format {
        self.quotient.format
    }
    /// Values per row of each table (a looked-up row has twice as many for [`QrCombine::Concat`]).
    pub fn dim(&self) -> usize {
        self.quotient.tables[0].dim as usize
    }
    /// Ids the tables cover: quotient rows × remainder rows.
    pub fn ids(&self) -> u64 {
        self.quotient.tables[0].rows as u64 * self.remainder.tables[0].rows as u64
    }
    /// Names both tables in the engine's memory report ("NAME (quotient)", "NAME (remainder)").
    pub fn set_name(&self, name: &str) {
        self.quotient.set_name(&format!("{name} (quotient)"));
        self.remainder.set_name(&format!("{name} (remainder)"));
    }

    /// EmbeddingBag over raw 64-bit ids (DLRM's `QREmbeddingBag`): each id's combined row, as
    /// [`GpuQrTables::gather`] gives it, pooled on the GPU in the same job, and submitted. The
    /// CPU path's twin is [`crate::qr::bag`].
    pub async fn bag(&self, bags: &Bags<'_, u64>, combine: QrCombine, pooling: Pooling, bounds: Bounds) -> Result<GpuRows, Error> {
        let job = self.prepare_bag(bags, combine, pooling, bounds).await?;
        job.submit_checked().await?;
        Ok(job.into_output())
    }

    /// [`GpuQrTables::bag`] without submitting.
    pub async fn prepare_bag(&self, bags: &Bags<'_, u64>, combine: QrCombine, pooling: Pooling, bounds: Bounds) -> Result<LookupJob, Error> {
        bags.validate(pooling, None)?;
        let ctx = self.quotient.ctx.clone();
        let out_dim = if combine == QrCombine::Concat { 2 * self.dim() } else { self.dim() };
        super::bag::gather_and_pool(&ctx, out_dim, bags, pooling, async |part| {
            // A bad id's index in the call, not in its part.
            self.prepare_gather(&bags.indices[part.clone()], combine, bounds).await.map_err(|e| match e {
                Error::IdOutOfRange64 { index, id, max } => Error::IdOutOfRange64 { index: part.start + index, id, max },
                e => e,
            })
        })
        .await
    }

    /// Looks up raw 64-bit ids: `ids.len() × dim` (`× 2·dim` for [`QrCombine::Concat`]). Ids
    /// whose quotient is past the table follow `bounds`, as [`crate::qr::gather`].
    pub async fn gather(&self, ids: &[u64], combine: QrCombine, bounds: Bounds) -> Result<GpuRows, Error> {
        let job = self.prepare_gather(ids, combine, bounds).await?;
        job.submit_checked().await?;
        Ok(job.output)
    }

    /// [`GpuQrTables::gather`] without submitting.
    pub async fn prepare_gather(&self, ids: &[u64], combine: QrCombine, bounds: Bounds) -> Result<LookupJob, Error> {
        let ctx = &self.quotient.ctx;
        ctx.check_lost()?;
        let (q, r) = (self.quotient.tables[0], self.remainder.tables[0]);
        let m = r.rows;
        if bounds == Bounds::Error {
            if let Some(index) = ids.iter().position(|&id| qr_split(id, m).0 >= q.rows as u64) {
                return Err(Error::IdOutOfRange64 { index, id: ids[index], max: q.rows as u64 * m as u64 });
            }
        }
        let dim = q.dim;
        let out_stride = if combine == QrCombine::Concat { 2 * dim } else { dim };
        let out_bytes = 4 * ids.len() as u64 * out_stride as u64;
        let max_binding = ctx.limits.max_storage_buffer_binding_size;
        for (what, bytes) in [("qr output bytes", out_bytes), ("bytes of ids in one call", 8 * ids.len() as u64)] {
            if bytes > max_binding {
                return Err(Error::LimitExceeded { what, requested: bytes, max: max_binding });
            }
        }
        let shape = ctx.workgroup_shape(dim as usize, 4);
        let pipeline = ctx.pipeline(ShaderId::Qr { format: self.quotient.format }, shape).await?;
        let ids_buffer = ctx.pooled("qr ids", 8 * ids.len() as u64, wgpu::BufferUsages::STORAGE, Some(bytemuck::cast_slice(ids)), super::Fit::Class).await?;
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        let out = ctx.pooled("qr output", out_bytes, usage, None, super::Fit::Exact).await?;
        let (gx, gy) = ctx.grid("workgroups of one qr dispatch", ids.len() as u64, shape.1 as u64)?;
        let mut dispatches = Vec::new();
        let mut inputs = vec![ids_buffer];
        for (stage, (res, p)) in [(&self.quotient, q), (&self.remainder, r)].into_iter().enumerate() {
            for shard in &res.shards {
                if ids.is_empty() {
                    break;
                }
                let params = QrParams {
                    n_ids: ids.len() as u32,
                    m,
                    stage: stage as u32,
                    combine: combine.shader_code(),
                    policy: RowPolicy::from(bounds) as u32,
                    dim,
                    out_stride,
                    rows: p.rows,
                    row_words: p.row_words,
                    code_words: p.code_words,
                    shard_first: shard.word_start / p.row_words,
                    shard_rows: (shard.word_end - shard.word_start) / p.row_words,
                };
                let uniform = ctx.pooled("qr params", 48, wgpu::BufferUsages::UNIFORM, Some(bytemuck::bytes_of(&params)), super::Fit::Class).await?;
                let bind_group = ctx.bind_group(
                    "edo qr",
                    &ctx.gather_layout,
                    &[uniform.as_entire_binding(), inputs[0].as_entire_binding(), shard.buffer.as_entire_binding(), out.as_entire_binding()],
                );
                dispatches.push((bind_group, gx, gy));
                inputs.push(uniform);
                inputs.push(shard.buffer.clone());
            }
        }
        let output = GpuRows::new(ctx.clone(), out, ids.len(), out_stride as usize, crate::Element::F32);
        Ok(LookupJob::new(ctx.clone(), vec![super::job::Pass { pipeline, dispatches }], inputs, output))
    }
}

/// [`QrTable`] on the GPU: the two tables and how their rows combine, answering every
/// [`Request`] as [`QrTable`] does on the CPU path (u32 ids widened to 64 bits).
pub struct GpuQrTable {
    tables: GpuQrTables,
    combine: QrCombine,
}

impl GpuQrTable {
    /// Uploads `host`'s two tables (one format).
    pub async fn upload(engine: &Engine, host: &QrTable) -> Result<GpuQrTable, Error> {
        Ok(GpuQrTable { tables: GpuQrTables::upload(engine, host.quotient(), host.remainder()).await?, combine: host.combine() })
    }
    /// The two tables.
    pub fn tables(&self) -> &GpuQrTables {
        &self.tables
    }
}

impl GpuLookup for GpuQrTable {
    /// [`GpuQrTables::ids`], or `usize::MAX` where it does not fit.
    fn rows(&self) -> usize {
        usize::try_from(self.tables.ids()).unwrap_or(usize::MAX)
    }
    fn dim(&self) -> usize {
        if self.combine == QrCombine::Concat {
            2 * self.tables.dim()
        } else {
            self.tables.dim()
        }
    }
    fn bytes(&self) -> u64 {
        self.tables.bytes()
    }
    fn set_name(&self, name: &str) {
        self.tables.set_name(name);
    }
    fn engine(&self) -> Engine {
        Engine { ctx: self.tables.quotient.ctx.clone() }
    }
    async fn prepare(&self, request: &Request<'_>) -> Result<LookupJob, Error> {
        let (t, combine, bounds) = (&self.tables, self.combine, request.bounds);
        let widen = |ids: &[u32]| -> Vec<u64> { ids.iter().map(|&id| u64::from(id)).collect() };
        let job = match request.select {
            Select::Keys(keys) => t.prepare_gather(keys, combine, bounds).await?,
            Select::Ids(ids) => t.prepare_gather(&widen(ids), combine, bounds).await?,
            Select::KeyBags(bags, pooling) => t.prepare_bag(&bags, combine, pooling, bounds).await?,
            Select::Bags(bags, pooling) => t.prepare_bag(&bags.with_indices(&widen(bags.indices)), combine, pooling, bounds).await?,
        };
        Ok(job.into_element(request.element).await?)
    }
}

impl Reupload for GpuQrTable {
    type Host = QrTable;
    async fn reupload(engine: &Engine, host: &QrTable, _: Option<&Self>) -> Result<Self, Error> {
        GpuQrTable::upload(engine, host).await
    }
}

super::lookup::placed_as_is!(GpuQrTable);

#[cfg(test)]
mod layout_tests {
    use super::*;
    use crate::gpu::ShaderId;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        edo_gpu::assert_wgsl_layout!(
            ShaderId::Qr { format: crate::Format::F32 },
            QrParams { n_ids, m, stage, combine, policy, dim, out_stride, rows, row_words, code_words, shard_first, shard_rows }
        );
    }
}
