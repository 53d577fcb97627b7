//! Pruned tables on the GPU: the compact table and the remap, which a kernel applies to the ids
//! before the gather or bag kernel of the same job reads them.

use super::job::{Indices, LookupJob, Pass};
use super::lookup::GpuLookup;
use super::lookup::Reupload;
use super::table::RowPolicy;
use super::{Engine, GpuTable, ShaderId};
use crate::bags::BagPlan;
use crate::prune::PrunedTable;
use crate::request::{IdSelect, Request};
use crate::{Bounds, Element, Error};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct RemapParams {
    n_ids: u32,
    original_rows: u32,
    policy: u32,
    _pad: u32,
}

/// A [`PrunedTable`] on the GPU. Cloning gives another handle to the same buffers.
#[derive(Clone)]
pub struct GpuPrunedTable {
    table: GpuTable,
    remap: super::Buffer,
    original_rows: usize,
}

impl GpuPrunedTable {
    /// Uploads the compact table and the remap of `pruned`.
    pub async fn upload(engine: &Engine, pruned: &PrunedTable) -> Result<GpuPrunedTable, Error> {
        // The remap is bound whole (the compact table is sharded).
        let max = engine.limits().max_storage_buffer_binding_size;
        if 4 * pruned.remap().len() as u64 > max {
            return Err(Error::LimitExceeded {
                what: "bytes of a pruned table's id map (one storage binding)",
                requested: 4 * pruned.remap().len() as u64,
                max,
            });
        }
        let table = GpuTable::upload(engine, pruned.table()).await?;
        let remap = if pruned.remap().is_empty() { &[crate::prune::ABSENT][..] } else { pruned.remap() };
        let remap = table.res.ctx.create_buffer("prune remap", 4 * remap.len() as u64, wgpu::BufferUsages::STORAGE, Some(bytemuck::cast_slice(remap))).await?;
        Ok(GpuPrunedTable { table, remap, original_rows: pruned.original_rows() })
    }

    /// Bytes of GPU memory: the compact table and the remap.
    pub fn bytes(&self) -> u64 {
        self.table.bytes() + 4 * self.original_rows as u64
    }

    /// Names the compact table and its remap in the engine's [`Engine::memory_report`].
    pub fn set_name(&self, name: &str) {
        self.table.set_name(name);
        self.table.res.ctx.registry.set_owner([&self.remap], name);
    }

    /// Rows of the original table (ids address these).
    pub fn rows(&self) -> usize {
        self.original_rows
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.table.dim()
    }
    /// The compact table's format.
    pub fn format(&self) -> crate::Format {
        self.table.format()
    }
    /// Storage buffers the compact table is split into.
    pub fn shard_count(&self) -> usize {
        self.table.shard_count()
    }
    /// The engine the table lives on.
    pub fn engine(&self) -> Engine {
        Engine { ctx: self.table.res.ctx.clone() }
    }

    /// The remap pass over ids already checked against the bounds policy.
    async fn remap_pass(&self, ids: &[u32], bounds: Bounds) -> Result<(Pass, super::Buffer, Vec<super::Buffer>), Error> {
        let ctx = &self.table.res.ctx;
        ctx.check_lost()?;
        let storage = wgpu::BufferUsages::STORAGE;
        let params = RemapParams { n_ids: ids.len() as u32, original_rows: self.original_rows as u32, policy: RowPolicy::from(bounds) as u32, _pad: 0 };
        let uniform = ctx.pooled("remap params", 16, wgpu::BufferUsages::UNIFORM, Some(bytemuck::bytes_of(&params)), super::Fit::Class).await?;
        let ids_buffer = ctx.pooled("remap ids", 4 * ids.len() as u64, storage, Some(bytemuck::cast_slice(ids)), super::Fit::Class).await?;
        let mapped = ctx.pooled("remapped ids", 4 * ids.len() as u64, storage, None, super::Fit::Class).await?;
        let pipeline = ctx.pipeline(ShaderId::Remap, (ctx.workgroup_size, 1)).await?;
        let bind_group = ctx.bind_group(
            "edo remap",
            &ctx.gather_layout,
            &[uniform.as_entire_binding(), ids_buffer.as_entire_binding(), self.remap.as_entire_binding(), mapped.as_entire_binding()],
        );
        let (gx, gy) = ctx.grid("workgroups of one remap dispatch", ids.len() as u64, ctx.workgroup_size as u64)?;
        let dispatches = if ids.is_empty() { vec![] } else { vec![(bind_group, gx, gy)] };
        Ok((Pass { pipeline, dispatches }, mapped.clone(), vec![uniform, ids_buffer, mapped, self.remap.clone()]))
    }
}

impl GpuLookup for GpuPrunedTable {
    super::lookup::inherent_accessors!(GpuPrunedTable);

    /// Rows of the original table (pruned rows are zeros; in bags zero rows, counted by mean and
    /// taking part in max): the remap pass, then the gather or the fused bag pass, in one job.
    async fn prepare(&self, request: &Request<'_>) -> Result<LookupJob, Error> {
        let mut store = Vec::new();
        let select = request.narrow(self.original_rows, &mut store)?;
        let ids = select.indices();
        // Ids (and a bag's offsets, weights) checked against the original table's ids.
        let plan = match select {
            IdSelect::Ids(_) => {
                request.bounds.check(ids, self.original_rows)?;
                None
            }
            IdSelect::Bags(bags, pooling) => Some(BagPlan::new(&[(self.original_rows, self.table.dim())], bags.len(), &bags, pooling, request.bounds)?),
        };
        let (remap_pass, mapped, mut inputs) = self.remap_pass(ids, request.bounds).await?;
        let pass = match (select, plan) {
            (IdSelect::Bags(bags, pooling), Some(plan)) => {
                let mapped = Indices::Device(mapped, ids.len());
                self.table.res.encode_bags(bags.len(), &plan, mapped, bags.per_sample_weights, pooling, Bounds::Zero, crate::Layout::Concat).await?
            }
            _ => self.table.encode_gather(Indices::Device(mapped, ids.len()), RowPolicy::Zero, None, Element::F32).await?,
        };
        inputs.extend(pass.inputs);
        let job = LookupJob::new(self.table.res.ctx.clone(), vec![remap_pass, pass.pass], inputs, pass.output);
        Ok(job.into_element(request.element).await?)
    }
}

impl Reupload for GpuPrunedTable {
    type Host = PrunedTable;
    async fn reupload(engine: &Engine, host: &PrunedTable, _: Option<&Self>) -> Result<Self, Error> {
        GpuPrunedTable::upload(engine, host).await
    }
}

super::lookup::placed_as_is!(GpuPrunedTable);

#[cfg(test)]
mod layout_tests {
    use super::*;
    use crate::gpu::ShaderId;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        edo_gpu::assert_wgsl_layout!(ShaderId::Remap, RemapParams { n_ids, original_rows, policy, _pad });
    }
}
