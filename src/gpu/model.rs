//! Static embedding models on the GPU: texts become token rows and weights on the host, then one
//! job pools them — the bag kernel fused with the table's decoder, each token weighted by its
//! weight over its text's token count, so the sum is the mean — and, when the model normalises,
//! divides each vector by its L2 norm in place.

use super::job::LookupJob;
use super::lookup::GpuLookup;
use super::{Engine, GpuRows, GpuTable, ShaderId};
use crate::bags::Pooling;
use crate::model::StaticModel;
use crate::{Bounds, Error, Format};

/// The uniform block of `normalize_rows.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct NormParams {
    n_rows: u32,
    dim: u32,
    _pad0: u32,
    _pad1: u32,
}

/// A [`StaticModel`] whose table is on the GPU (in the model's format); the tokenizer runs on the
/// host. Cloning gives another handle to the same table.
#[derive(Clone)]
pub struct GpuStaticModel {
    model: StaticModel,
    table: GpuTable,
}

impl GpuStaticModel {
    /// Uploads the model's table.
    pub async fn upload(engine: &Engine, model: &StaticModel) -> Result<GpuStaticModel, Error> {
        let table = GpuTable::upload(engine, model.table()).await?;
        table.set_name("static model");
        Ok(GpuStaticModel { model: model.clone(), table })
    }

    /// The model (tokenizer and settings).
    pub fn model(&self) -> &StaticModel {
        &self.model
    }

    /// Bytes of GPU memory the table takes.
    pub fn bytes(&self) -> u64 {
        self.table.bytes()
    }

    /// Sentence vectors of `texts`, `texts.len() × dim`, left on the GPU: tokenized on the host,
    /// pooled and normalised on the GPU, and submitted.
    pub async fn encode(&self, texts: &[&str]) -> Result<GpuRows, Error> {
        let job = self.prepare_encode(texts).await?;
        job.submit_checked().await?;
        Ok(job.into_output())
    }

    /// [`GpuStaticModel::encode`] without submitting.
    pub async fn prepare_encode(&self, texts: &[&str]) -> Result<LookupJob, Error> {
        let bags = self.model.bags(texts)?;
        let pooled = GpuLookup::prepare_bag(&self.table, &bags.as_bags(), Pooling::Sum, Bounds::Error).await?;
        if !self.model.normalize() || texts.is_empty() {
            return Ok(pooled);
        }
        let ctx = self.table.res.ctx.clone();
        let params = NormParams { n_rows: texts.len() as u32, dim: self.model.dim() as u32, _pad0: 0, _pad1: 0 };
        let uniform = ctx.pooled("normalize params", 16, wgpu::BufferUsages::UNIFORM, Some(bytemuck::bytes_of(&params)), super::Fit::Class).await?;
        // The gather layout's two inputs, unused by the kernel.
        let unused = ctx.pooled("normalize (unused)", 4, wgpu::BufferUsages::STORAGE, None, super::Fit::Class).await?;
        let pipeline = ctx.pipeline(ShaderId::NormalizeRows, (ctx.workgroup_size, 1)).await?;
        let (gx, gy) = ctx.grid("workgroups of one normalize dispatch", texts.len() as u64, ctx.workgroup_size as u64)?;
        let bind_group = ctx.bind_group(
            "edo normalize",
            &ctx.gather_layout,
            &[uniform.as_entire_binding(), unused.as_entire_binding(), unused.as_entire_binding(), pooled.output.buffer.as_entire_binding()],
        );
        let output = pooled.output.clone_handle();
        let normalize = LookupJob::new(ctx.clone(), vec![super::job::Pass { pipeline, dispatches: vec![(bind_group, gx, gy)] }], vec![uniform, unused], output);
        Ok(pooled.then(normalize))
    }
}

impl Engine {
    /// Compiles the kernels of a static model's first embedding of a few texts (its bag kernel
    /// fused with the decoder, in a small batch's shape, and the normalisation), for a model
    /// whose table is in `format` with `dim` values and rows aligned to `row_alignment` bytes
    /// on the GPU ([`crate::format::NO_ROW_ALIGNMENT`] for packed rows;
    /// [`StaticModel::with_row_alignment`]), now rather than at that embedding. In a browser the
    /// compiler runs in the GPU process: a page can start this, read the model file meanwhile,
    /// and find the kernels ready ([`crate::file::table_shape`] gives the format, dim and row
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
        super::bag::prepare_first_bag(ctx, format, dim, row_words).await?;
        ctx.pipeline(ShaderId::NormalizeRows, (ctx.workgroup_size, 1)).await.map(drop)
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        super::super::shaders::assert_wgsl_layout!(ShaderId::NormalizeRows, NormParams { n_rows, dim, _pad0, _pad1 });
    }
}
