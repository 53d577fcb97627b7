//! A live table's key index on the GPU ([`crate::live`]): the probe kernel (`live_probe.wgsl`)
//! turns the keys of a lookup into table rows on the GPU, before the gather or bag pass of the
//! same job, and counts each slot's lookups for the host's usage counts and eviction policy.

use super::job::{Indices, LookupJob, Pass};
use super::table::RowPolicy;
use super::{Buffer, Context, GpuTable, ShaderId};
use crate::bags::BagPlan;
use crate::{Bounds, Element, Error};
use edo_core::Error as CoreError;
use edo_core::{Bags, Pooling};
use std::sync::Arc;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ProbeParams {
    n_keys: u32,
    mask: u32,
    missing: u32,
    fallback_rows: u32,
    slots: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

/// What the probe reads for a key the index does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeMissing {
    /// A zero row.
    Zero = 0,
    /// Row 0 (the initial row).
    FirstRow = 1,
    /// Row `hash_id(key, 0) % fallback_rows` (the hashed initial rows).
    Hashed = 2,
}

/// A copy of a live table's index buckets and a lookup count per slot, on one engine.
pub struct GpuKeyIndex {
    ctx: Arc<Context>,
    buckets: Buffer,
    /// Buckets − 1.
    mask: u32,
    /// Lookups of each slot since the counts were last taken, then the unknown keys looked up
    /// (`slots + 1` u32s).
    hits: Buffer,
    slots: usize,
}

impl GpuKeyIndex {
    /// Uploads `words` (the index's buckets, four words each; `mask` + 1 of them) and zeroed
    /// counts for `slots` slots, on the engine of `table`; `None` when either is larger than one
    /// storage binding of the device (the probe binds each whole).
    #[doc(hidden)]
    pub async fn upload(table: &GpuTable, words: &[u32], mask: u32, slots: usize) -> Result<Option<GpuKeyIndex>, Error> {
        let ctx = table.res.ctx.clone();
        ctx.check_lost()?;
        let max = ctx.limits.max_storage_buffer_binding_size.min(ctx.limits.max_buffer_size);
        if 4 * words.len() as u64 > max || 4 * (slots as u64 + 1) > max {
            return Ok(None);
        }
        let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        let buckets = ctx.create_buffer("live index", 4 * words.len() as u64, storage, Some(bytemuck::cast_slice(words))).await?;
        let hits = ctx.create_buffer("live lookup counts", 4 * (slots as u64 + 1), storage | wgpu::BufferUsages::COPY_SRC, None).await?;
        Ok(Some(GpuKeyIndex { ctx, buckets, mask, hits, slots }))
    }

    /// Writes the buckets `changed` (ascending) of `words`, one queued write a run of them,
    /// visible to every lookup submitted after this call.
    #[doc(hidden)]
    pub fn write_buckets(&self, words: &[u32], changed: &[u32]) -> Result<(), Error> {
        self.ctx.check_lost()?;
        let mut i = 0;
        while i < changed.len() {
            let first = changed[i] as usize;
            let mut last = first;
            while i + 1 < changed.len() && changed[i + 1] as usize == last + 1 {
                i += 1;
                last += 1;
            }
            i += 1;
            self.ctx.queue.write_buffer(&self.buckets, 16 * first as u64, bytemuck::cast_slice(&words[4 * first..4 * (last + 1)]));
        }
        Ok(())
    }

    /// The lookups counted per slot since the last call and the unknown keys looked up, after
    /// every job submitted before it, and the counts zeroed.
    pub async fn take_hits(&self) -> Result<(Vec<u32>, u32), Error> {
        let ctx = &self.ctx;
        ctx.check_lost()?;
        let size = 4 * (self.slots as u64 + 1);
        let out = super::host_vec::<u32>(self.slots + 1)?;
        let staging = super::readback_buffer(ctx, size).await?;
        let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("edo live lookup counts") });
        encoder.copy_buffer_to_buffer(&self.hits, 0, &staging, 0, size);
        encoder.clear_buffer(&self.hits, 0, None);
        ctx.queue.submit([encoder.finish()]);
        let mut hits = super::map_read(ctx, &staging, out, self.slots + 1).await?;
        let unknown = hits.pop().unwrap_or(0);
        Ok((hits, unknown))
    }

    /// The probe pass over `keys`: its pipeline and dispatch, the rows it writes (`keys.len()`
    /// u32s), and the buffers it binds.
    async fn probe_pass(&self, keys: &[u64], missing: ProbeMissing, fallback_rows: usize) -> Result<(Pass, Buffer, Vec<Buffer>), Error> {
        let ctx = &self.ctx;
        ctx.check_lost()?;
        let max = ctx.limits.max_storage_buffer_binding_size;
        if 8 * keys.len() as u64 > max {
            return Err(CoreError::LimitExceeded { what: "bytes of keys in one call", requested: 8 * keys.len() as u64, max }.into());
        }
        let params = ProbeParams {
            n_keys: keys.len() as u32,
            mask: self.mask,
            missing: missing as u32,
            fallback_rows: fallback_rows as u32,
            slots: self.slots as u32,
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        };
        let storage = wgpu::BufferUsages::STORAGE;
        let uniform = ctx.pooled("probe params", 32, wgpu::BufferUsages::UNIFORM, Some(bytemuck::bytes_of(&params)), super::Fit::Class).await?;
        let keys_buffer = ctx.pooled("probe keys", 8 * keys.len().max(1) as u64, storage, Some(bytemuck::cast_slice(keys)), super::Fit::Class).await?;
        let rows = ctx.pooled("probed rows", 4 * keys.len().max(1) as u64, storage, None, super::Fit::Class).await?;
        let pipeline = ctx.pipeline(ShaderId::LiveProbe, (ctx.workgroup_size, 1)).await?;
        let bind_group = ctx.bind_group(
            "edo live probe",
            &ctx.probe_layout,
            &[
                uniform.as_entire_binding(),
                keys_buffer.as_entire_binding(),
                self.buckets.as_entire_binding(),
                rows.as_entire_binding(),
                self.hits.as_entire_binding(),
            ],
        );
        let (gx, gy) = ctx.grid("workgroups of one probe dispatch", keys.len() as u64, ctx.workgroup_size as u64)?;
        let dispatches = if keys.is_empty() { vec![] } else { vec![(bind_group, gx, gy)] };
        Ok((Pass { pipeline, dispatches }, rows.clone(), vec![uniform, keys_buffer, rows, self.buckets.clone(), self.hits.clone()]))
    }

    /// A gather of the rows of `keys` from `table` (the live table's GPU copy): the probe, then
    /// the gather, in one job.
    #[doc(hidden)]
    pub async fn gather(&self, table: &GpuTable, keys: &[u64], missing: ProbeMissing, fallback_rows: usize) -> Result<LookupJob, Error> {
        let (probe, rows, mut inputs) = self.probe_pass(keys, missing, fallback_rows).await?;
        let pass = table.encode_gather(Indices::Device(rows, keys.len()), RowPolicy::Zero, None, Element::F32).await?;
        inputs.extend(pass.inputs);
        Ok(LookupJob::new(self.ctx.clone(), vec![probe, pass.pass], inputs, pass.output))
    }

    /// The bags of keys `bags` from `table`: the probe, then the bag pass, in one job.
    pub async fn bag(&self, table: &GpuTable, bags: &Bags<'_, u64>, pooling: Pooling, missing: ProbeMissing, fallback_rows: usize) -> Result<LookupJob, Error> {
        // The offsets and weights checked as a bag of the probed rows would be (every row in
        // range: unknown keys read zero rows under `Bounds::Zero`).
        let placeholder = vec![0u32; bags.indices.len()];
        let checked = bags.with_indices(&placeholder);
        let plan = BagPlan::new(&[(table.rows(), table.dim())], checked.len(), &checked, pooling, Bounds::Zero)?;
        let (probe, rows, mut inputs) = self.probe_pass(bags.indices, missing, fallback_rows).await?;
        let pass = table
            .res
            .encode_bags(checked.len(), &plan, Indices::Device(rows, bags.indices.len()), bags.per_sample_weights, pooling, Bounds::Zero, crate::Layout::Concat)
            .await?;
        inputs.extend(pass.inputs);
        Ok(LookupJob::new(self.ctx.clone(), vec![probe, pass.pass], inputs, pass.output))
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        crate::assert_wgsl_layout!(ShaderId::LiveProbe, ProbeParams { n_keys, mask, missing, fallback_rows, slots, _pad0, _pad1, _pad2 });
    }
}
