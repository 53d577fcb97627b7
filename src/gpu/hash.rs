//! Hashed embedding tables on the GPU: raw 64-bit ids are hashed by one kernel (hot ids looked
//! up first), and the resulting rows pooled by the bag kernel, in one job.

use super::job::{Indices, LookupJob, Pass};
use super::lookup::{GpuLookup, Reupload};
use super::table::Resident;
use super::{Engine, GpuRows, ShaderId};
use crate::bags::BagPlan;
use crate::format::PackedTable;
use crate::hash::{expand, HashSpec, HashedBags, HashedTable};
use crate::request::{Request, Select};
use crate::{Bounds, Error, Layout, Pooling};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct HashParams {
    n_ids: u32,
    n_tables: u32,
    _pad: [u32; 2],
}

/// `HashMeta` of `hash_ids.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct HashMeta {
    id_start: u32,
    id_end: u32,
    out_base: u32,
    k: u32,
    buckets: u32,
    hot_start: u32,
    hot_len: u32,
    _pad: u32,
    seeds: [u32; 8],
}
const _: () = assert!(std::mem::size_of::<HashMeta>() == 64);

/// Hashed tables of one format on the GPU, each with its [`HashSpec`]: table `t` has
/// `specs[t].rows()` rows (buckets, then one per hot id).
pub struct GpuHashedTables {
    res: Resident,
    specs: Vec<HashSpec>,
    /// Hot ids of every table, sorted within each table: (low, high, row, 0).
    hot: super::Buffer,
    hot_ranges: Vec<(u32, u32)>,
}

impl GpuHashedTables {
    /// Uploads tables with their hashing specs (all tables of one format).
    pub async fn upload(engine: &Engine, tables: &[(&PackedTable, HashSpec)]) -> Result<GpuHashedTables, Error> {
        let mut hot = Vec::new();
        let mut hot_ranges = Vec::new();
        for (table, spec) in tables {
            let map = spec.validate()?;
            crate::hash::check_table_rows(table, spec)?;
            hot_ranges.push((hot.len() as u32, map.len() as u32));
            hot.extend(map.sorted().iter().map(|&(id, row)| [id as u32, (id >> 32) as u32, row, 0]));
        }
        let refs: Vec<&PackedTable> = tables.iter().map(|(t, _)| *t).collect();
        let res = Resident::upload(engine, &refs).await?;
        let hot = if hot.is_empty() { vec![[0u32; 4]] } else { hot };
        let hot = res.ctx.create_buffer("hot ids", 16 * hot.len() as u64, wgpu::BufferUsages::STORAGE, Some(bytemuck::cast_slice(&hot))).await?;
        Ok(GpuHashedTables { res, specs: tables.iter().map(|(_, s)| s.clone()).collect(), hot, hot_ranges })
    }

    /// Bytes of GPU memory: the tables and the hot-id map.
    pub fn bytes(&self) -> u64 {
        self.res.bytes() + self.hot.size()
    }
    /// The tables' format (they share one).
    pub fn format(&self) -> crate::Format {
        self.res.format
    }
    /// Number of tables.
    pub fn len(&self) -> usize {
        self.specs.len()
    }
    /// Whether there is no table.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }
    /// `(rows, dim)` of each table.
    pub fn shapes(&self) -> Vec<(usize, usize)> {
        self.res.tables.iter().map(|p| (p.rows as usize, p.dim as usize)).collect()
    }
    /// Names the tables and their hot-id map in the engine's memory report.
    pub fn set_name(&self, name: &str) {
        self.res.set_name(name);
        self.res.ctx.registry.set_owner([&self.hot], name);
    }

    /// Each id's embedding (its hot row, or the sum of its k bucket rows) from a single hashed
    /// table: `ids.len() × dim`.
    pub async fn gather(&self, ids: &[u64]) -> Result<GpuRows, Error> {
        if self.specs.len() != 1 {
            return Err(Error::Unsupported(crate::Unsupported::LookupOnSeveralHashedTables));
        }
        let offsets: Vec<u32> = (0..ids.len() as u32).collect();
        self.bags(ids.len(), &HashedBags::new(ids, &offsets), Pooling::Sum, Layout::Concat).await
    }

    /// Pools bags of hashed ids (feature-major over the tables, as [`crate::GpuTableBatch::bags`])
    /// and submits the work.
    pub async fn bags(&self, batch: usize, bags: &HashedBags<'_>, pooling: Pooling, layout: Layout) -> Result<GpuRows, Error> {
        let job = self.prepare_bags(batch, bags, pooling, layout).await?;
        job.submit_checked().await?;
        Ok(job.output)
    }

    /// [`GpuHashedTables::bags`] without submitting: the hashing pass, then the bag pass.
    pub async fn prepare_bags(&self, batch: usize, bags: &HashedBags<'_>, pooling: Pooling, layout: Layout) -> Result<LookupJob, Error> {
        let ctx = &self.res.ctx;
        ctx.check_lost()?;
        let ex = expand(&self.specs, batch, bags, pooling)?;
        let storage = wgpu::BufferUsages::STORAGE;
        if 8 * bags.indices.len() as u64 > ctx.limits.max_storage_buffer_binding_size {
            return Err(Error::LimitExceeded {
                what: "bytes of ids in one call",
                requested: 8 * bags.indices.len() as u64,
                max: ctx.limits.max_storage_buffer_binding_size,
            });
        }
        let metas: Vec<HashMeta> = self
            .specs
            .iter()
            .zip(&ex.ranges)
            .zip(&self.hot_ranges)
            .map(|((spec, &(s, e, base)), &(hot_start, hot_len))| {
                let mut seeds = [0u32; 8];
                seeds[..spec.seeds.len()].copy_from_slice(&spec.seeds);
                HashMeta { id_start: s, id_end: e, out_base: base, k: spec.seeds.len() as u32, buckets: spec.buckets, hot_start, hot_len, _pad: 0, seeds }
            })
            .collect();
        let n_ids = bags.indices.len() as u32;
        let params = HashParams { n_ids, n_tables: metas.len() as u32, _pad: [0; 2] };
        let uniform = ctx.pooled("hash params", 16, wgpu::BufferUsages::UNIFORM, Some(bytemuck::bytes_of(&params)), super::Fit::Class).await?;
        let metas = ctx.pooled("hash tables", 64 * metas.len() as u64, storage, Some(bytemuck::cast_slice(&metas)), super::Fit::Class).await?;
        let ids = ctx.pooled("hashed ids", 8 * bags.indices.len() as u64, storage, Some(bytemuck::cast_slice(bags.indices)), super::Fit::Class).await?;
        let slots = ctx.pooled("hashed rows", 4 * ex.n_slots as u64, storage, None, super::Fit::Class).await?;
        let pipeline = ctx.pipeline(ShaderId::HashIds, (ctx.workgroup_size, 1)).await?;
        let bind_group = ctx.bind_group(
            "edo hash",
            &ctx.hash_layout,
            &[uniform.as_entire_binding(), metas.as_entire_binding(), ids.as_entire_binding(), self.hot.as_entire_binding(), slots.as_entire_binding()],
        );
        let (gx, gy) = ctx.grid("workgroups of one hash dispatch", n_ids as u64, ctx.workgroup_size as u64)?;
        let hash_pass = Pass { pipeline, dispatches: if n_ids > 0 { vec![(bind_group, gx, gy)] } else { vec![] } };
        let total_dim = self.res.tables.iter().map(|t| t.dim as usize).sum::<usize>();
        let plan = BagPlan { offsets: ex.offsets, total_dim, out_len: batch * total_dim };
        let bag = self.res.encode_bags(batch, &plan, Indices::Device(slots, ex.n_slots), ex.weights.as_deref(), pooling, Bounds::Zero, layout).await?;
        let mut inputs = bag.inputs;
        inputs.extend([uniform, metas, ids, self.hot.clone()]);
        Ok(LookupJob::new(ctx.clone(), vec![hash_pass, bag.pass], inputs, bag.output))
    }
}

impl Reupload for GpuHashedTables {
    /// Each table and how its ids hash.
    type Host = Vec<(PackedTable, HashSpec)>;
    async fn reupload(engine: &Engine, host: &Self::Host, _: Option<&Self>) -> Result<Self, Error> {
        let tables: Vec<(&PackedTable, HashSpec)> = host.iter().map(|(t, s)| (t, s.clone())).collect();
        GpuHashedTables::upload(engine, &tables).await
    }
}

super::lookup::placed_as_is!(GpuHashedTables);

/// [`HashedTable`] on the GPU: one hashed table answering every [`Request`] as the CPU path's
/// kind does (u32 ids widened; the bounds policy has nothing to do).
pub struct GpuHashedTable {
    tables: GpuHashedTables,
}

impl GpuHashedTable {
    /// Uploads `host`'s table and its hot ids.
    pub async fn upload(engine: &Engine, host: &HashedTable) -> Result<GpuHashedTable, Error> {
        Ok(GpuHashedTable { tables: GpuHashedTables::upload(engine, &[(host.table(), host.spec().clone())]).await? })
    }
    /// The table as [`GpuHashedTables`] (of one).
    pub fn tables(&self) -> &GpuHashedTables {
        &self.tables
    }
}

impl GpuLookup for GpuHashedTable {
    /// Every id has a row: `usize::MAX`.
    fn rows(&self) -> usize {
        usize::MAX
    }
    fn dim(&self) -> usize {
        self.tables.shapes()[0].1
    }
    fn bytes(&self) -> u64 {
        self.tables.bytes()
    }
    fn set_name(&self, name: &str) {
        self.tables.set_name(name);
    }
    fn engine(&self) -> Engine {
        Engine { ctx: self.tables.res.ctx.clone() }
    }
    async fn prepare(&self, request: &Request<'_>) -> Result<LookupJob, Error> {
        let widen = |ids: &[u32]| -> Vec<u64> { ids.iter().map(|&id| u64::from(id)).collect() };
        let ids_as_bags = async |ids: &[u64]| {
            let offsets: Vec<u32> = (0..ids.len() as u32).collect();
            self.tables.prepare_bags(ids.len(), &HashedBags::new(ids, &offsets), Pooling::Sum, Layout::Concat).await
        };
        let job = match request.select {
            Select::Keys(keys) => ids_as_bags(keys).await?,
            Select::Ids(ids) => ids_as_bags(&widen(ids)).await?,
            Select::KeyBags(bags, pooling) => self.tables.prepare_bags(bags.len(), &bags, pooling, Layout::Concat).await?,
            Select::Bags(bags, pooling) => {
                let keys = widen(bags.indices);
                self.tables.prepare_bags(bags.len(), &bags.with_indices(&keys), pooling, Layout::Concat).await?
            }
        };
        Ok(job.into_element(request.element).await?)
    }
}

impl Reupload for GpuHashedTable {
    type Host = HashedTable;
    async fn reupload(engine: &Engine, host: &HashedTable, _: Option<&Self>) -> Result<Self, Error> {
        GpuHashedTable::upload(engine, host).await
    }
}

super::lookup::placed_as_is!(GpuHashedTable);

#[cfg(test)]
mod layout_tests {
    use super::*;
    use crate::gpu::ShaderId;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        edo_gpu::assert_wgsl_layout!(ShaderId::HashIds, HashParams { n_ids, n_tables, _pad });
        edo_gpu::assert_wgsl_layout!(ShaderId::HashIds, HashMeta { id_start, id_end, out_base, k, buckets, hot_start, hot_len, _pad, seeds });
    }
}
