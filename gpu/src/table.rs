//! Tables on the GPU: packed rows (padded where a table asks for a row alignment) in
//! storage-buffer shards, and gathers from them.

use edo_core::Error as CoreError;
use std::sync::Arc;

use super::job::{buffer_range, Encoded, Indices, LookupJob, Pass};
use super::{Context, Engine, GpuRows};
use crate::format::{Format, PackedTable};
use crate::request::{IdSelect, Request};
use crate::{Bounds, Element, Error};

/// The uniform block of the gather kernels (`GatherParams` in `shaders/gather_common.wgsl`).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct GatherParams {
    n_ids: u32,
    dim: u32,
    row_words: u32,
    code_words: u32,
    total_rows: u32,
    shard_first: u32,
    shard_rows: u32,
    policy: u32,
    /// 1: the ids binding holds (output row, id) pairs, the ids of this dispatch's shard.
    listed: u32,
    _pad: [u32; 3],
}
const _: () = assert!(std::mem::size_of::<GatherParams>() == 48);

#[derive(Clone)]
pub struct Shard {
    pub buffer: super::Buffer,
    /// Words `[word_start, word_end)` of the concatenated tables; always whole rows.
    pub word_start: u32,
    pub word_end: u32,
}

/// The index of the shard of `shards` (in word order, the first starting at 0) that holds word
/// `word` of the concatenated tables.
pub fn shard_holding(shards: &[Shard], word: u64) -> usize {
    shards.partition_point(|s| s.word_start as u64 <= word) - 1
}

/// Where one table sits in the concatenation its shards hold.
#[derive(Clone, Copy, Debug)]
pub struct Placement {
    pub word_base: u32,
    pub rows: u32,
    pub dim: u32,
    pub row_words: u32,
    pub code_words: u32,
}

/// One or more tables of one format on the GPU: their rows (packed, or padded to each table's
/// [`PackedTable::gpu_row_words`]) concatenated table after table, split into shards of whole
/// rows, each within the engine's binding limit.
#[derive(Clone)]
pub struct Resident {
    pub ctx: Arc<Context>,
    pub format: Format,
    pub tables: Vec<Placement>,
    pub shards: Vec<Shard>,
}

impl Resident {
    #[doc(hidden)]
    pub async fn upload(engine: &Engine, tables: &[&PackedTable]) -> Result<Resident, Error> {
        let ctx = engine.ctx.clone();
        ctx.check_lost()?;
        let Some(first) = tables.first() else {
            return Err(CoreError::ShapeMismatch { what: "tables", expected: 1, actual: 0 }.into());
        };
        let format = first.format();
        super::decoders::require(format)?;
        let cap_words = ctx.max_binding_bytes / 4;
        let mut placements = Vec::with_capacity(tables.len());
        let mut total_words = 0u64;
        for (index, t) in tables.iter().enumerate() {
            if t.format() != format {
                return Err(Error::MixedFormats { index, expected: format, found: t.format() });
            }
            let row_bytes = 4 * t.gpu_row_words() as u64;
            if row_bytes > 4 * cap_words {
                return Err(CoreError::LimitExceeded { what: "bytes of one row on the GPU", requested: row_bytes, max: ctx.max_binding_bytes }.into());
            }
            if t.rows() as u64 > u32::MAX as u64 {
                return Err(CoreError::LimitExceeded { what: "table rows (ids are u32)", requested: t.rows() as u64, max: u32::MAX as u64 }.into());
            }
            placements.push(Placement {
                word_base: total_words.min(u32::MAX as u64) as u32,
                rows: t.rows() as u32,
                dim: t.dim() as u32,
                row_words: t.gpu_row_words() as u32,
                code_words: t.format().code_words(t.dim()) as u32,
            });
            total_words += t.rows() as u64 * t.gpu_row_words() as u64;
        }
        if total_words > u32::MAX as u64 {
            return Err(CoreError::LimitExceeded { what: "packed words of tables uploaded together", requested: total_words, max: u32::MAX as u64 }.into());
        }
        // Greedy packing of whole rows into shards, in concatenation order. An empty batch still
        // gets one empty shard, so zero rows for bad ids have a dispatch to write them.
        let mut shards = Vec::new();
        // Runs of rows to copy, each with its table's row words and its stride on the GPU.
        let mut pending: Vec<Piece> = Vec::new();
        let mut pending_words = 0u64;
        let mut start = 0u64;
        for t in tables {
            let (packed, rw) = (t.row_words(), t.gpu_row_words());
            let mut r = 0;
            while r < t.rows() {
                let fit = ((cap_words - pending_words) / rw as u64) as usize;
                if fit == 0 {
                    shards.push(make_shard(&ctx, &pending, start).await?);
                    start += pending_words;
                    pending.clear();
                    pending_words = 0;
                    continue;
                }
                let n = fit.min(t.rows() - r);
                pending.push(Piece { words: &t.words()[r * packed..(r + n) * packed], row_words: packed, stride: rw });
                pending_words += (n * rw) as u64;
                r += n;
            }
        }
        if pending_words > 0 || shards.is_empty() {
            shards.push(make_shard(&ctx, &pending, start).await?);
        }
        let res = Resident { ctx, format, tables: placements, shards };
        res.set_name(&res.ctx.registry.owner_name("table"));
        Ok(res)
    }

    /// A table of `rows` zero rows of `format` (the slots of a row cache), in shards of whole
    /// rows like an uploaded table, allocated without a host copy.
    #[doc(hidden)]
    pub async fn zeroed(engine: &Engine, format: Format, rows: usize, dim: usize) -> Result<Resident, Error> {
        let ctx = engine.ctx.clone();
        ctx.check_lost()?;
        if dim == 0 {
            return Err(CoreError::ZeroDim.into());
        }
        super::decoders::require(format)?;
        let row_words = format.row_words(dim) as u64;
        let cap_words = ctx.max_binding_bytes / 4;
        if row_words > cap_words {
            return Err(CoreError::LimitExceeded { what: "bytes of one packed row", requested: 4 * row_words, max: ctx.max_binding_bytes }.into());
        }
        let total_words = rows as u64 * row_words;
        if total_words > u32::MAX as u64 {
            return Err(CoreError::LimitExceeded { what: "packed words of one GPU table", requested: total_words, max: u32::MAX as u64 }.into());
        }
        let per_shard = cap_words / row_words;
        let mut shards = Vec::new();
        let mut first = 0u64;
        while first < rows as u64 || shards.is_empty() {
            let n = per_shard.min(rows as u64 - first);
            let buffer = ctx.create_buffer("cache slots", 4 * n * row_words, wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST, None).await?;
            shards.push(Shard { buffer, word_start: (first * row_words) as u32, word_end: ((first + n) * row_words) as u32 });
            first += n;
        }
        let placement = Placement { word_base: 0, rows: rows as u32, dim: dim as u32, row_words: row_words as u32, code_words: format.code_words(dim) as u32 };
        let res = Resident { ctx, format, tables: vec![placement], shards };
        res.set_name(&res.ctx.registry.owner_name("cache"));
        Ok(res)
    }

    /// Names the shards' owner in the engine's memory report.
    #[doc(hidden)]
    pub fn set_name(&self, name: &str) {
        self.ctx.registry.set_owner(self.shards.iter().map(|s| &s.buffer), name);
    }

    #[doc(hidden)]
    pub fn bytes(&self) -> u64 {
        self.shards.iter().map(|s| 4 * (s.word_end - s.word_start) as u64).sum()
    }
}

/// Rows of one table bound for a shard: `words` holds them packed, `row_words` each, and the
/// shard holds them `stride` words apart (the row alignment's padding zeros).
struct Piece<'a> {
    words: &'a [u32],
    row_words: usize,
    stride: usize,
}

async fn make_shard(ctx: &Context, pieces: &[Piece<'_>], start: u64) -> Result<Shard, Error> {
    let mut words: Vec<u32> = Vec::with_capacity(pieces.iter().map(|p| p.words.len() / p.row_words.max(1) * p.stride).sum());
    for p in pieces {
        if p.stride == p.row_words {
            words.extend_from_slice(p.words);
        } else {
            for row in p.words.chunks_exact(p.row_words) {
                words.extend_from_slice(row);
                words.resize(words.len() + p.stride - p.row_words, 0);
            }
        }
    }
    // At least 16 bytes: the FP32 gather binds a shard as vec4 words (an empty table's too).
    let bytes = (4 * words.len() as u64).max(16);
    let buffer =
        ctx.create_buffer("table shard", bytes, wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST, Some(bytemuck::cast_slice(&words))).await?;
    Ok(Shard { buffer, word_start: start as u32, word_end: (start + words.len() as u64) as u32 })
}

/// A packed table resident on the GPU, split into shards of whole rows, each within the device's
/// storage-binding limit (or the engine's smaller `max_binding_bytes`).
///
/// Cloning gives another handle to the same GPU buffers (no copy, no memory): models sharing a
/// table each hold a handle, and the table is freed when the last one is dropped. Rows written
/// through one handle ([`GpuTable::write_rows`]) are seen through all.
#[derive(Clone)]
pub struct GpuTable {
    #[doc(hidden)]
    pub res: Resident,
}

impl GpuTable {
    /// Uploads a packed table, shard by shard, its rows padded to [`PackedTable::gpu_row_words`].
    ///
    /// Fails with [`edo_core::Error::LimitExceeded`] when one row is larger than a shard may be, or the
    /// table has more rows than a `u32` id can address, and with [`Error::OutOfMemory`] when the
    /// device cannot hold it.
    pub async fn upload(engine: &Engine, table: &PackedTable) -> Result<GpuTable, Error> {
        Ok(GpuTable { res: Resident::upload(engine, &[table]).await? })
    }

    /// The table's format.
    pub fn format(&self) -> Format {
        self.res.format
    }
    /// Rows of the table.
    pub fn rows(&self) -> usize {
        self.res.tables[0].rows as usize
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.res.tables[0].dim as usize
    }
    /// The engine the table lives on.
    pub fn engine(&self) -> Engine {
        Engine { ctx: self.res.ctx.clone() }
    }
    /// Number of storage buffers the table is split into.
    pub fn shard_count(&self) -> usize {
        self.res.shards.len()
    }
    /// Bytes of GPU memory the table's shards take: its packed words, and the padding of aligned
    /// rows ([`PackedTable::with_row_alignment`]).
    #[doc(hidden)]
    pub fn bytes(&self) -> u64 {
        self.res.bytes()
    }
    /// Names the table in the engine's [`Engine::memory_report`] (default: "table N"). Every
    /// handle to the table shares the name.
    #[doc(hidden)]
    pub fn set_name(&self, name: &str) {
        self.res.set_name(name)
    }

    /// Overwrites rows `ids` on the GPU with those rows of `table` — the host copy, already
    /// changed with [`PackedTable::update_rows`] — without re-uploading the rest: one queued write
    /// per run of consecutive rows, visible to every lookup submitted after this call.
    pub fn write_rows(&self, table: &PackedTable, ids: &[u32]) -> Result<(), Error> {
        let ctx = &self.res.ctx;
        ctx.check_lost()?;
        if table.format() != self.format() {
            return Err(Error::MixedFormats { index: 0, expected: self.format(), found: table.format() });
        }
        if (table.rows(), table.dim()) != (self.rows(), self.dim()) {
            return Err(CoreError::ShapeMismatch { what: "rows of the host table (the GPU table's)", expected: self.rows(), actual: table.rows() }.into());
        }
        Bounds::Error.check(ids, table.rows())?;
        let mut rows: Vec<u32> = ids.to_vec();
        rows.sort_unstable();
        rows.dedup();
        // Rows are `packed` words on the host and `rw` apart on the GPU (the row alignment's).
        let (packed, rw) = (table.row_words(), self.res.tables[0].row_words as u64);
        let words = table.words();
        let mut i = 0;
        while i < rows.len() {
            // A run of consecutive rows inside one shard.
            let first = rows[i] as u64;
            let shard = self.res.shards.iter().find(|s| (s.word_start as u64..s.word_end as u64).contains(&(first * rw))).expect("every row lies in a shard");
            let mut last = first;
            while i + 1 < rows.len() && rows[i + 1] as u64 == last + 1 && (last + 2) * rw <= shard.word_end as u64 {
                i += 1;
                last += 1;
            }
            i += 1;
            let run = &words[first as usize * packed..(last + 1) as usize * packed];
            let offset = 4 * (first * rw - shard.word_start as u64);
            if rw as usize == packed {
                ctx.queue.write_buffer(&shard.buffer, offset, bytemuck::cast_slice(run));
            } else {
                let mut padded = vec![0u32; (last + 1 - first) as usize * rw as usize];
                for (dst, src) in padded.chunks_exact_mut(rw as usize).zip(run.chunks_exact(packed)) {
                    dst[..packed].copy_from_slice(src);
                }
                ctx.queue.write_buffer(&shard.buffer, offset, bytemuck::cast_slice(&padded));
            }
        }
        Ok(())
    }

    /// The gather pass of `ids` into rows of `element`: its pipeline, dispatches, the buffers
    /// they bind, and the output — `output` when another pass shares it (ids must then be checked
    /// by the caller as `policy` needs).
    pub async fn encode_gather(&self, ids: Indices<'_>, policy: RowPolicy, output: Option<super::Buffer>, element: Element) -> Result<Encoded, Error> {
        let policy = policy as u32;
        let half = element == Element::F16;
        let ctx = &self.res.ctx;
        let (rows, dim) = (self.rows(), self.dim());
        let n_ids = ids.len();
        // Bytes of one output row: dim f32, or ⌈dim / 2⌉ words of f16 pairs.
        let row_bytes = if half { 4 * dim.div_ceil(2) as u64 } else { 4 * dim as u64 };
        let out_bytes = (n_ids as u64).saturating_mul(row_bytes);
        if out_bytes > ctx.limits.max_buffer_size {
            return Err(CoreError::LimitExceeded { what: "gather output bytes", requested: out_bytes, max: ctx.limits.max_buffer_size }.into());
        }
        let (pipeline, (_, wg_y)) = if half {
            ctx.gather_f16_pipeline(self.format(), dim).await?
        } else {
            ctx.gather_pipeline(self.format(), dim, self.res.tables[0].row_words as usize).await?
        };
        let out = match output {
            Some(out) => out,
            None => {
                let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
                ctx.pooled("gather output", out_bytes, usage, None, super::Fit::Exact).await?
            }
        };

        // Ids per dispatch: the output range of one dispatch must fit a storage binding, and its
        // offset must be a multiple of the device's offset alignment (so must the ids offset).
        let align = ctx.limits.min_storage_buffer_offset_alignment.max(4) as u64;
        let granule = align / 4; // ids per aligned step of both the ids and the output binding
        let max_binding = ctx.max_binding_bytes;
        let mut chunk = (max_binding / row_bytes.max(1)) / granule * granule;
        if chunk == 0 {
            return Err(CoreError::LimitExceeded { what: "bytes of one output row group", requested: row_bytes * granule, max: max_binding }.into());
        }
        // A chunk's (row, id) pairs must fit one binding too.
        chunk = chunk.min((max_binding / 8) / granule * granule).min(n_ids.max(1) as u64);
        let Placement { row_words, code_words, .. } = self.res.tables[0];
        let shards = &self.res.shards;
        let params = |n: u64, shard: &Shard, listed: bool| GatherParams {
            n_ids: n as u32,
            dim: dim as u32,
            row_words,
            code_words,
            total_rows: rows as u32,
            shard_first: shard.word_start / row_words,
            shard_rows: (shard.word_end - shard.word_start) / row_words,
            policy,
            listed: listed as u32,
            _pad: [0; 3],
        };

        // Ids from the host over several shards are sorted out here, so each shard's dispatch
        // runs over its own ids only. Ids already on the device (written by an earlier kernel)
        // go to every shard's dispatch, which skips those that are not its own.
        let (ids_buffer, lists) = match ids {
            Indices::Host(ids) if shards.len() > 1 => {
                let lists = ShardLists::new(ids, chunk as usize, granule as usize, rows, policy, shards, row_words);
                (
                    ctx.pooled(
                        "gather ids by shard",
                        4 * lists.words.len() as u64,
                        wgpu::BufferUsages::STORAGE,
                        Some(bytemuck::cast_slice(&lists.words)),
                        super::Fit::Class,
                    )
                    .await?,
                    Some(lists),
                )
            }
            Indices::Host(ids) => {
                (ctx.pooled("gather ids", 4 * ids.len() as u64, wgpu::BufferUsages::STORAGE, Some(bytemuck::cast_slice(ids)), super::Fit::Class).await?, None)
            }
            Indices::Device(buffer, _) => (buffer, None),
        };

        // Each dispatch: its ids (count, words of the ids binding), its shard, its first output row.
        let mut plan: Vec<(u64, (u64, u64), &Shard, u64)> = Vec::new();
        let mut start = 0u64;
        while start < n_ids as u64 {
            let n = chunk.min(n_ids as u64 - start);
            match &lists {
                Some(lists) => {
                    let first = (start / chunk) as usize * shards.len();
                    for (shard, &(word, pairs)) in shards.iter().zip(&lists.ranges[first..first + shards.len()]) {
                        if pairs > 0 {
                            plan.push((pairs as u64, (word as u64, 2 * pairs as u64), shard, start));
                        }
                    }
                }
                None => plan.extend(shards.iter().map(|shard| (n, (start, n), shard, start))),
            }
            start += n;
        }
        let mut dispatches = Vec::with_capacity(plan.len());
        // Every buffer a bind group binds stays with the job: a buffer is destroyed when its last
        // handle goes, and a bind group is not one.
        let mut inputs = Vec::with_capacity(plan.len() + 1);
        for (n, (word, words), shard, start) in plan {
            let (gx, gy) = ctx.grid("workgroups of one gather dispatch", n, wg_y as u64)?;
            let params = params(n, shard, lists.is_some());
            let uniform = ctx.pooled("gather params", 48, wgpu::BufferUsages::UNIFORM, Some(bytemuck::bytes_of(&params)), super::Fit::Class).await?;
            let bind_group = ctx.bind_group(
                "edo gather",
                &ctx.gather_layout,
                &[
                    uniform.as_entire_binding(),
                    buffer_range(&ids_buffer, 4 * word, 4 * words),
                    shard.buffer.as_entire_binding(),
                    buffer_range(&out, row_bytes * start, row_bytes * chunk.min(n_ids as u64 - start)),
                ],
            );
            dispatches.push((bind_group, gx, gy));
            inputs.push(uniform);
        }
        inputs.push(ids_buffer);
        // The table's shards too: a job may outlive the table it was prepared on.
        inputs.extend(shards.iter().map(|s| s.buffer.clone()));
        Ok(Encoded { pass: Pass { pipeline, dispatches }, inputs, output: GpuRows::new(ctx.clone(), out, n_ids, dim, element) })
    }

    /// Builds the job of `request` without submitting it (`edo::GpuLookup::prepare` for this
    /// kind). A gather writes f32 or f16 rows itself (f16: half the bytes); a bag pools as it
    /// decodes (the fused bag kernel), and an f16 bag is rounded by one more pass. With
    /// [`Bounds::Error`] the ids are checked first; [`Bounds::Zero`] and [`Bounds::Clamp`] are
    /// applied by the kernels.
    pub async fn prepare(&self, request: &Request<'_>) -> Result<LookupJob, Error> {
        self.res.ctx.check_lost()?;
        let mut store = Vec::new();
        match request.narrow(self.rows(), &mut store)? {
            IdSelect::Ids(ids) => {
                request.bounds.check(ids, self.rows())?;
                Ok(self.encode_gather(Indices::Host(ids), request.bounds.into(), None, request.element).await?.into_job())
            }
            IdSelect::Bags(bags, pooling) => {
                let job = self.res.prepare_bags(bags.len(), &bags, pooling, request.bounds, crate::Layout::Concat).await?;
                job.into_element(request.element).await
            }
        }
    }
}

/// Host ids sorted out by the shard that writes their output row: per chunk of `chunk` ids,
/// one list per shard of (output row within the chunk, id) pairs, each list starting at a
/// multiple of `granule` words (the device's binding offset alignment).
struct ShardLists {
    words: Vec<u32>,
    /// Per chunk, per shard: the list's first word and its pairs.
    ranges: Vec<(usize, usize)>,
}

impl ShardLists {
    fn new(ids: &[u32], chunk: usize, granule: usize, rows: usize, policy: u32, shards: &[Shard], row_words: u32) -> ShardLists {
        // The shard whose dispatch writes the row of `id`, as the kernel's resolve_row decides:
        // its row's shard; the last row's under Clamp; none for the skipped id under Skip; shard
        // 0 (which writes zero rows) for any other bad id.
        let shard_of = |id: u32| -> Option<usize> {
            let row = match id as usize {
                r if r < rows => r,
                _ if policy == RowPolicy::Clamp as u32 => rows - 1,
                _ if policy == RowPolicy::Skip as u32 && id == crate::bounds::SKIP_ID => return None,
                _ => return Some(0),
            };
            Some(shard_holding(shards, row as u64 * row_words as u64))
        };
        let mut words = Vec::with_capacity(2 * ids.len() + granule * shards.len());
        let mut ranges = Vec::new();
        let mut lists: Vec<Vec<[u32; 2]>> = vec![Vec::new(); shards.len()];
        for part in ids.chunks(chunk.max(1)) {
            for (pos, &id) in part.iter().enumerate() {
                if let Some(s) = shard_of(id) {
                    lists[s].push([pos as u32, id]);
                }
            }
            for list in &mut lists {
                ranges.push((words.len(), list.len()));
                words.extend(list.drain(..).flatten());
                words.resize(words.len().next_multiple_of(granule.max(1)), 0);
            }
        }
        ShardLists { words, ranges }
    }
}

/// What a kernel does with an id past its table: the policy codes of `gather_common.wgsl`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowPolicy {
    /// A zero row ([`Bounds::Zero`]; also [`Bounds::Error`]'s, whose ids the host checked).
    Zero = 0,
    /// The last row ([`Bounds::Clamp`]).
    Clamp = 1,
    /// Leaves the output row of [`crate::bounds::SKIP_ID`] unwritten, for another pass over the
    /// same output to write (a mixed table's hot and cold halves); other bad ids read zero rows.
    Skip = 2,
}

impl From<Bounds> for RowPolicy {
    fn from(bounds: Bounds) -> RowPolicy {
        match bounds {
            Bounds::Clamp => RowPolicy::Clamp,
            Bounds::Zero | Bounds::Error => RowPolicy::Zero,
        }
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;
    use crate::ShaderId;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        crate::assert_wgsl_layout!(
            ShaderId::Gather { format: crate::Format::F32, vec4: false },
            GatherParams { n_ids, dim, row_words, code_words, total_rows, shard_first, shard_rows, policy, listed, _pad }
        );
    }
}
