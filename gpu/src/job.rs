//! The plumbing every GPU lookup shares: the [`LookupJob`] (its stages, each a compute pass of
//! [`Pass`]es and then buffer copies), what an encoder returns ([`Encoded`]), where a kernel reads
//! its indices from ([`Indices`]), the dense output rows ([`GpuRows`]), binding ranges, the split
//! of gathered rows into bindings ([`dense_parts`]), and the pass that rounds f32 rows to f16.
//!
//! It sits below every operation's module: `table`, `bag`, `prune`, `mixed`, `cache`, `hash`, `qr`
//! and `model` build jobs from it, and it knows none of them (a cache's hold on its slots is a
//! [`SubmitHook`]).

use edo_core::Error as CoreError;
use std::sync::Arc;

use super::{Buffer, Context, ShaderId};
use crate::{Element, Error};

/// One kernel and its dispatches, in the order they run.
pub struct Pass {
    pub pipeline: wgpu::ComputePipeline,
    pub dispatches: Vec<Dispatch>,
}

/// What an encoder of one kernel returns: its pass, every buffer its bind groups bind (kept
/// alive with the job: a buffer is destroyed when its last handle goes, and a bind group is not
/// one), and the rows it writes.
pub struct Encoded {
    pub pass: Pass,
    pub inputs: Vec<Buffer>,
    #[doc(hidden)]
    pub output: GpuRows,
}

impl Encoded {
    /// A job of this one pass.
    #[doc(hidden)]
    pub fn into_job(self) -> LookupJob {
        let ctx = self.output.ctx.clone();
        LookupJob::new(ctx, vec![self.pass], self.inputs, self.output)
    }
}

/// Where a kernel reads its indices from.
pub enum Indices<'a> {
    /// Uploaded from the host (checked there against the bounds policy).
    Host(&'a [u32]),
    /// Written by an earlier kernel of the same job (hashing): `len` indices.
    Device(Buffer, usize),
}

impl Indices<'_> {
    /// How many indices.
    #[doc(hidden)]
    pub fn len(&self) -> usize {
        match self {
            Indices::Host(i) => i.len(),
            Indices::Device(_, n) => *n,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub fn buffer_range(buffer: &wgpu::Buffer, offset: u64, size: u64) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer, offset, size: wgpu::BufferSize::new(size.max(4)) })
}

/// One dispatch of a kernel: its bind group and workgroups in x and y.
pub type Dispatch = (wgpu::BindGroup, u32, u32);

/// Records kernels, each with its dispatches, in order into one compute pass. Each dispatch sees
/// the writes of the ones before it (WebGPU orders the dispatches of a pass).
pub fn encode_passes(encoder: &mut wgpu::CommandEncoder, label: &str, passes: &[Pass]) {
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(label), timestamp_writes: None });
    for Pass { pipeline, dispatches } in passes {
        pass.set_pipeline(pipeline);
        for (bind_group, gx, gy) in dispatches {
            pass.set_bind_group(0, bind_group, &[]);
            pass.dispatch_workgroups(*gx, *gy, 1);
        }
    }
}

/// A lookup (gather, bags) ready to run: its kernels and their dispatches, the buffers they
/// bind, and its output buffer.
pub struct LookupJob {
    #[doc(hidden)]
    pub ctx: Arc<Context>,
    /// Compute passes in order, each followed by its copies.
    #[doc(hidden)]
    pub stages: Vec<Stage>,
    /// Input buffers the bind groups use, kept alive with the job.
    #[doc(hidden)]
    pub _inputs: Vec<Buffer>,
    #[doc(hidden)]
    pub output: GpuRows,
    /// What the job's maker wants told when the job is recorded or submitted (a cache's hold on
    /// the slots the job loads).
    #[doc(hidden)]
    pub hook: Option<Box<dyn SubmitHook>>,
}

/// Told when a job is recorded or submitted: how `edo`'s `GpuCache` holds the slots a
/// prepared job loads until the job runs (dropping the hook unsubmitted gives them up).
pub trait SubmitHook: wgpu::WasmNotSendSync {
    /// Whether the job may be submitted now (a cache's job may not run twice: its slots may hold
    /// other rows by then).
    fn check(&self) -> Result<(), Error>;
    /// The job has been recorded into an encoder or submitted.
    fn submitted(&self);
}

/// One compute pass (kernels in order, each with its dispatches), then buffer copies: `(from,
/// to, byte offset in to, bytes)`, each copying from the start of `from`.
pub struct Stage {
    pub passes: Vec<Pass>,
    pub copies: Vec<(Buffer, Buffer, u64, u64)>,
}

impl LookupJob {
    /// A job of one compute pass.
    #[doc(hidden)]
    pub fn new(ctx: Arc<Context>, passes: Vec<Pass>, inputs: Vec<Buffer>, output: GpuRows) -> LookupJob {
        LookupJob { ctx, stages: vec![Stage { passes, copies: Vec::new() }], _inputs: inputs, output, hook: None }
    }

    /// This job, then `next` (which reads what this one wrote): their stages in order, `next`'s
    /// output. This job's output stays alive with the job.
    #[doc(hidden)]
    pub fn then(mut self, next: LookupJob) -> LookupJob {
        self.stages.extend(next.stages);
        self._inputs.extend(next._inputs);
        self._inputs.push(self.output.buffer.clone());
        debug_assert!(self.hook.is_none() || next.hook.is_none(), "one submit hook per job");
        LookupJob { ctx: self.ctx, stages: self.stages, _inputs: self._inputs, output: next.output, hook: self.hook.or(next.hook) }
    }

    fn encode_stages(&self, encoder: &mut wgpu::CommandEncoder) {
        for stage in &self.stages {
            if !stage.passes.is_empty() {
                encode_passes(encoder, "edo lookup", &stage.passes);
            }
            for (from, to, offset, bytes) in &stage.copies {
                if *bytes > 0 {
                    encoder.copy_buffer_to_buffer(from, 0, to, *offset, *bytes);
                }
            }
        }
    }

    /// Records the lookup into `encoder` (compute passes with one dispatch per shard, and per
    /// output chunk for gathers). A job of `edo`'s `GpuCache` holds the cache's slots until it
    /// is recorded: submit the encoder before the cache's next lookup, whose loads may reuse them.
    pub fn encode(&self, encoder: &mut wgpu::CommandEncoder) {
        self.encode_stages(encoder);
        if let Some(hook) = &self.hook {
            hook.submitted();
        }
    }

    /// Submits the lookup on the engine's queue (does not wait). A job may be submitted again
    /// (a benchmark repeats one), except a cache's: its slots may hold other rows by then, so a
    /// second submission is refused with [`Error::Unsupported`].
    pub fn submit(&self) -> Result<(), Error> {
        self.ctx.check_lost()?;
        if let Some(hook) = &self.hook {
            hook.check()?;
        }
        let mut encoder = self.ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("edo lookup") });
        self.encode_stages(&mut encoder);
        self.ctx.queue.submit([encoder.finish()]);
        // Told after the submission, so no lookup of the cache is queued before this one.
        if let Some(hook) = &self.hook {
            hook.submitted();
        }
        Ok(())
    }

    /// [`LookupJob::submit`], checked: a submission wgpu refuses is [`Error::Gpu`] (what the
    /// submitting verbs — gather, bag, encode — use).
    pub async fn submit_checked(&self) -> Result<(), Error> {
        super::checked_submit(&self.ctx, "lookup submission", || self.submit()).await
    }

    /// Submits the job and the copy of its output into a readback buffer in one command buffer
    /// (checked, as [`LookupJob::submit_checked`]), then reads the rows back: a lookup whose
    /// result goes to the host in one submission and one wait.
    pub async fn submit_and_read(&self) -> Result<crate::HostRows, Error> {
        let ctx = &self.ctx;
        ctx.check_lost()?;
        if let Some(hook) = &self.hook {
            hook.check()?;
        }
        let out = &self.output;
        let words = out.rows * out.row_words();
        let host = super::host_vec::<u32>(words)?;
        let staging = match words {
            0 => None,
            _ => Some(super::readback_buffer(ctx, 4 * words as u64).await?),
        };
        super::checked_submit(ctx, "lookup submission", || {
            let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("edo lookup and readback") });
            self.encode_stages(&mut encoder);
            if let Some(staging) = &staging {
                encoder.copy_buffer_to_buffer(&out.buffer, 0, staging, 0, 4 * words as u64);
            }
            ctx.queue.submit([encoder.finish()]);
            if let Some(hook) = &self.hook {
                hook.submitted();
            }
            Ok(())
        })
        .await?;
        let words = match &staging {
            Some(staging) => super::map_read(ctx, staging, host, words).await?,
            None => host,
        };
        out.host_rows(words)
    }

    /// The buffer the lookup writes.
    pub fn output(&self) -> &GpuRows {
        &self.output
    }

    /// Gives up the job, keeping its output.
    pub fn into_output(self) -> GpuRows {
        self.output
    }
}

/// Dense rows in a GPU buffer, row-major: the output of a lookup. f32 (`rows × dim` values), or,
/// from the `*_f16` lookups, f16: `rows × ⌈dim / 2⌉` u32 words, each holding two values (the
/// first in the low 16 bits; an odd dim's last word has 0 in its high half).
pub struct GpuRows {
    #[doc(hidden)]
    pub ctx: Arc<Context>,
    #[doc(hidden)]
    pub buffer: Buffer,
    #[doc(hidden)]
    pub rows: usize,
    #[doc(hidden)]
    pub dim: usize,
    /// The element type of the values (f16: two a word).
    #[doc(hidden)]
    pub element: Element,
}

impl GpuRows {
    /// Rows of `dim` values of `element` in `buffer`.
    #[doc(hidden)]
    pub fn new(ctx: Arc<Context>, buffer: Buffer, rows: usize, dim: usize, element: Element) -> GpuRows {
        GpuRows { ctx, buffer, rows, dim, element }
    }

    /// The element type of the values.
    pub fn element(&self) -> Element {
        self.element
    }

    /// Another handle to the same buffer (the job that writes it keeps its own).
    #[doc(hidden)]
    pub fn clone_handle(&self) -> GpuRows {
        GpuRows { ctx: self.ctx.clone(), buffer: self.buffer.clone(), rows: self.rows, dim: self.dim, element: self.element }
    }

    /// Whether the rows are f16 (two values a word) rather than f32.
    pub fn is_f16(&self) -> bool {
        self.element == Element::F16
    }

    /// u32 words of the buffer a row takes: `dim`, or `⌈dim / 2⌉` for f16 rows.
    pub fn row_words(&self) -> usize {
        if self.is_f16() {
            self.dim.div_ceil(2)
        } else {
            self.dim
        }
    }
    /// The storage buffer holding the rows (usages STORAGE | COPY_SRC | COPY_DST), for binding in
    /// the caller's own pipelines. It is destroyed when the last handle to it goes (this
    /// `GpuRows`, or the job that wrote it): keep the `GpuRows` while the caller's work uses it.
    /// (An output nobody asked the buffer of goes idle instead, for a later lookup to reuse.)
    pub fn buffer(&self) -> &wgpu::Buffer {
        self.buffer.export()
    }
    /// Rows of the output (ids, bags, or indices for pooling None).
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Values per output row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Overwrites every value with `value` (queued before any later submission). Tests fill
    /// outputs with a sentinel so a kernel that never ran cannot pass for one that wrote zeros.
    #[doc(hidden)] // a test hook
    pub fn fill(&self, value: f32) -> Result<(), Error> {
        self.ctx.check_lost()?;
        // At most 4 MiB on the host at a time, whatever the output's size.
        let total = self.rows * self.row_words();
        let word = if self.is_f16() {
            let h = half::f16::from_f32(value).to_bits() as u32;
            f32::from_bits(h | (h << 16))
        } else {
            value
        };
        let block = vec![word; total.min(1 << 20)];
        for at in (0..total).step_by(block.len().max(1)) {
            let n = block.len().min(total - at);
            self.ctx.queue.write_buffer(&self.buffer, 4 * at as u64, bytemuck::cast_slice(&block[..n]));
        }
        Ok(())
    }

    /// Copies the rows back to the host once all work submitted before has finished, as
    /// `rows × dim` f32 (f16 rows widened, which is exact).
    pub async fn read(&self) -> Result<Vec<f32>, Error> {
        if self.is_f16() {
            return Ok(self.read_f16().await?.into_iter().map(half::f16::to_f32).collect());
        }
        super::read_buffer(&self.ctx, &self.buffer, 0, self.rows * self.dim).await
    }

    /// Copies the rows back to the host as they are: f32, or f16 for f16 rows.
    pub async fn read_host(&self) -> Result<crate::HostRows, Error> {
        Ok(if self.is_f16() { crate::HostRows::F16(self.read_f16().await?) } else { crate::HostRows::F32(self.read().await?) })
    }

    /// [`GpuRows::read`] for native code without an executor.
    #[cfg(native)]
    pub fn read_blocking(&self) -> Result<Vec<f32>, Error> {
        pollster::block_on(self.read())
    }

    /// Copies f16 rows back to the host, as `rows × dim` values (an odd dim's padding dropped).
    /// f32 rows are [`Error::Unsupported`]: read them with [`GpuRows::read`].
    pub async fn read_f16(&self) -> Result<Vec<half::f16>, Error> {
        if !self.is_f16() {
            return Err(Error::Unsupported(crate::Unsupported::ReadF16OfF32Rows));
        }
        let words: Vec<u32> = super::read_buffer(&self.ctx, &self.buffer, 0, self.rows * self.row_words()).await?;
        self.unpack_f16(&words)
    }

    /// f16 rows as read back (two values a word, rows of `row_words`) as `rows × dim` values.
    fn unpack_f16(&self, words: &[u32]) -> Result<Vec<half::f16>, Error> {
        let mut out = super::host_vec(self.rows * self.dim)?;
        for row in words.chunks_exact(self.row_words().max(1)).take(self.rows) {
            let values = row.iter().flat_map(|&w| [w as u16, (w >> 16) as u16]).take(self.dim);
            out.extend(values.map(half::f16::from_bits));
        }
        Ok(out)
    }

    /// The rows as read back, word for word, as host rows of their element type.
    fn host_rows(&self, words: Vec<u32>) -> Result<crate::HostRows, Error> {
        Ok(match self.element {
            Element::F16 => crate::HostRows::F16(self.unpack_f16(&words)?),
            // In place: the same size and alignment.
            Element::F32 => crate::HostRows::F32(words.into_iter().map(f32::from_bits).collect()),
        })
    }

    /// [`GpuRows::read_f16`] for native code without an executor.
    #[cfg(native)]
    pub fn read_f16_blocking(&self) -> Result<Vec<half::f16>, Error> {
        pollster::block_on(self.read_f16())
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
pub async fn pack_f16(ctx: &Arc<Context>, rows: &GpuRows) -> Result<LookupJob, Error> {
    ctx.check_lost()?;
    let (n, dim) = (rows.rows, rows.dim);
    let words = dim.div_ceil(2) as u64;
    let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
    let out = ctx.pooled("f16 output", (n as u64 * 4 * words).max(4), usage, None, super::Fit::Exact).await?;
    let pipeline = ctx.pipeline(ShaderId::PackF16, (ctx.workgroup_size, 1)).await?;
    // Rows per dispatch: their f32 input within one binding, starting at an aligned offset.
    let granule = (ctx.limits.min_storage_buffer_offset_alignment.max(4) / 4) as u64;
    let chunk = (ctx.max_binding_bytes / (4 * dim.max(1) as u64)) / granule * granule;
    if chunk == 0 {
        return Err(CoreError::LimitExceeded {
            what: "bytes of one f32 row group to round to f16",
            requested: 4 * dim as u64 * granule,
            max: ctx.max_binding_bytes,
        }
        .into());
    }
    // The gather layout's second input, unused by the kernel.
    let unused = ctx.pooled("pack f16 (unused)", 4, wgpu::BufferUsages::STORAGE, None, super::Fit::Class).await?;
    let mut inputs = vec![unused];
    let mut dispatches = Vec::new();
    let mut start = 0u64;
    while start < n as u64 {
        let m = chunk.min(n as u64 - start);
        let params = PackParams { n_rows: m as u32, dim: dim as u32, _pad0: 0, _pad1: 0 };
        let uniform = ctx.pooled("pack f16 params", 16, wgpu::BufferUsages::UNIFORM, Some(bytemuck::bytes_of(&params)), super::Fit::Class).await?;
        let (gx, gy) = ctx.grid("workgroups of one f16 rounding dispatch", m * words, ctx.workgroup_size as u64)?;
        let bind_group = ctx.bind_group(
            "edo pack f16",
            &ctx.gather_layout,
            &[
                uniform.as_entire_binding(),
                buffer_range(&rows.buffer, 4 * dim as u64 * start, 4 * dim as u64 * m),
                inputs[0].as_entire_binding(),
                buffer_range(&out, 4 * words * start, 4 * words * m),
            ],
        );
        dispatches.push((bind_group, gx, gy));
        inputs.push(uniform);
        start += m;
    }
    let output = GpuRows::new(ctx.clone(), out, n, dim, Element::F16);
    Ok(LookupJob::new(ctx.clone(), vec![Pass { pipeline, dispatches }], inputs, output))
}

/// The ranges of `n` gathered rows of `dim` values that fit one storage binding each: the
/// shards of a dense table of gathered rows. At least one (empty) range.
pub fn dense_parts(ctx: &Context, n: usize, dim: usize) -> Result<Vec<std::ops::Range<usize>>, Error> {
    let per = (ctx.max_binding_bytes / (4 * dim.max(1) as u64)).min(u32::MAX as u64) as usize;
    if per == 0 {
        return Err(CoreError::LimitExceeded { what: "bytes of one gathered row", requested: 4 * dim as u64, max: ctx.max_binding_bytes }.into());
    }
    if n == 0 {
        // One empty part: an empty lookup still has an output to bind.
        #[allow(clippy::single_range_in_vec_init)]
        return Ok(vec![0..0]);
    }
    Ok((0..n).step_by(per).map(|s| s..(s + per).min(n)).collect())
}

impl LookupJob {
    /// This job's rows as `element`s: f32 rows rounded to f16 by one more pass where asked
    /// (the job unchanged when it writes them already).
    #[doc(hidden)]
    pub async fn into_element(self, element: Element) -> Result<LookupJob, Error> {
        if element == Element::F16 && self.output.element != Element::F16 {
            let pack = pack_f16(&self.ctx, &self.output).await?;
            return Ok(self.then(pack));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        crate::assert_wgsl_layout!(ShaderId::PackF16, PackParams { n_rows, dim, _pad0, _pad1 });
    }
}
