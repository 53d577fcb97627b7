//! Static embedding models on the GPU: texts become token rows and weights on the host, then one
//! job pools them — the bag kernel fused with the table's decoder, each token weighted by its
//! weight over its text's token count, so the sum is the mean — and, when the model normalises,
//! divides each vector by its L2 norm in place.

use super::job::LookupJob;
use super::lookup::GpuLookup;
use super::lookup::Reupload;
use super::{Engine, GpuRows, GpuTable, ShaderId};
use crate::bags::Pooling;
use crate::model::StaticModel;
use crate::{Bounds, Error};

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

impl Reupload for GpuStaticModel {
    type Host = StaticModel;
    async fn reupload(engine: &Engine, host: &StaticModel, _: Option<&Self>) -> Result<Self, Error> {
        GpuStaticModel::upload(engine, host).await
    }
}

super::lookup::placed_as_is!(GpuStaticModel);

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        edo_gpu::assert_wgsl_layout!(ShaderId::NormalizeRows, NormParams { n_rows, dim, _pad0, _pad1 });
    }
}
