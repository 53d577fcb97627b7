//! A hot-row cache on the GPU over a host table larger than the GPU (or than its budget).
//!
//! The cache is a GPU table of `capacity` slots in the host table's format. A lookup maps its
//! ids to slots on the host ([`SlotMap`]), reads the missing rows from the host table, and
//! records one job: a scatter pass that writes the uploaded rows into their slots, then the
//! format's ordinary gather kernel over slot ids. The result is the fully resident table's, bit
//! for bit, because the slots hold the same packed words and the same kernel decodes them.
//!
//! A batch with more distinct rows than slots runs as several parts, scatter and gather after
//! scatter and gather, in one compute pass: WebGPU orders the dispatches of a pass, so a part's
//! scatter never overwrites a slot before the previous part's gather has read it.
//!
//! Lookups take `&self`, so one cache serves several threads (or models): the slot map sits
//! behind a mutex, and a lookup assigns its slots and is queued before the next one assigns
//! any. A prepared job holds the cache (a `Claim`) until it is submitted or dropped; another
//! lookup meanwhile is refused with [`Error::Busy`], as is, in a browser, one that starts while
//! another awaits the GPU.

use super::lookup::{Placeable, Reupload};
use crate::cache::{CacheSpec, HostCache};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use wgpu::WasmNotSendSync;

use super::job::{dense_parts, Dispatch, Indices, LookupJob, Pass, Stage, SubmitHook};
use super::lookup::GpuLookup;
use super::table::{Resident, RowPolicy};
use super::{Engine, GpuRows, GpuTable, ShaderId};
use crate::bags::BagPlan;
use crate::cache::{CacheStats, Part, Policy, RowSource, SlotMap};
use crate::format::{Format, PackedTable};
use crate::request::{IdSelect, Request};
use crate::{Bounds, Element, Error};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ScatterParams {
    n_moves: u32,
    row_words: u32,
    shard_first: u32,
    shard_rows: u32,
}

/// Rows of a host table cached on the GPU: up to `capacity` slots, filled on demand, evicted by
/// a replacement [`Policy`].
///
/// The host table (`S`, any [`RowSource`]: a [`PackedTable`] in memory or memory-mapped, a
/// checksummed [`crate::file::TableFile`], a [`crate::file::remote::RemoteTable`] on a server)
/// holds every row; the GPU holds up to `capacity` of them. Each lookup returns the same rows a
/// fully resident [`GpuTable`] would, whatever was cached before.
///
/// Lookups take `&self`: one cache can serve several threads. In a browser, while a lookup awaits
/// the GPU, another call is refused with [`Error::Busy`] and the accessors (`capacity`,
/// `cached_rows`, `stats`, …) read as an empty cache.
///
/// ```no_run
/// # use edo::{Bounds, Engine, EngineOptions, Format, GpuCache, GpuLookup, PackedTable};
/// # use edo::cache::PolicyKind;
/// # fn main() -> Result<(), edo::Error> {
/// let engine = Engine::new_blocking(EngineOptions::default())?;
/// let data = edo::synth::embedding_table(100_000, 64, 1);
/// let host = PackedTable::quantize(Format::Int8, &data, 100_000, 64)?;
/// // 10 000 rows on the GPU, least frequently used evicted first.
/// let mut cache = edo::block_on(GpuCache::new(&engine, host, 10_000, PolicyKind::Lfu.build()))?;
/// let rows = edo::block_on(cache.gather(&[3, 99_999, 3], Bounds::Error))?.read_blocking()?;
/// println!("{:?}", cache.stats());
/// # Ok(()) }
/// ```
pub struct GpuCache<S: RowSource = PackedTable> {
    source: S,
    state: Arc<Mutex<CacheState>>,
    max_capacity: usize,
    page_rows: usize,
}

/// What lookups change: the slots and their map, and the staging of the next batch.
pub(crate) struct CacheState {
    /// The slots: one shard per page, `page_rows` slots each (the last page may hold fewer).
    slots: GpuTable,
    map: SlotMap,
    max_capacity: usize,
    page_rows: usize,
    row_words: usize,
    rows: usize,
    dim: usize,
    name: String,
    /// Rows a prefetch uploaded for the next lookup (the second level): its misses are copied
    /// from here into their slots on the GPU instead of being read from the host.
    staged: Option<Staged>,
    /// A prepared lookup holds the slots it assigned until it is submitted or dropped.
    pending: bool,
}

/// A prepared cache lookup's hold on the cache: the slots it loads. Submitting the job releases
/// it; dropping the job unsubmitted empties those slots, so the cache never claims a row it does
/// not hold.
pub(crate) struct Claim {
    state: Arc<Mutex<CacheState>>,
    loaded: Vec<u32>,
    released: AtomicBool,
}

impl SubmitHook for Claim {
    fn check(&self) -> Result<(), edo_gpu::Error> {
        if self.released.load(Ordering::Acquire) {
            return Err(edo_gpu::Error::Unsupported(edo_gpu::Unsupported::ResubmittedCacheLookup));
        }
        Ok(())
    }
    /// Releases the cache: the slots the job loads are its rows now.
    fn submitted(&self) {
        if !self.released.swap(true, Ordering::AcqRel) {
            if let Ok(mut st) = self.state.lock() {
                st.pending = false;
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.released.swap(true, Ordering::AcqRel) {
            if let Ok(mut st) = self.state.lock() {
                st.map.invalidate(self.loaded.drain(..));
                st.pending = false;
            }
        }
    }
}

struct Staged {
    /// Row → its place in `buffer`.
    index: rustc_hash::FxHashMap<u32, u32>,
    buffer: super::Buffer,
}

// Lookups hold the state's lock across their awaits on purpose: slots are assigned and the work
// queued as one step. Natively edo's futures complete without yielding to another task (wgpu's
// are ready at once; pollster runs them), so no task on the thread waits on the lock; in a
// browser the lock is only tried, and a lookup meanwhile is refused (`Error::Busy`).
#[allow(clippy::await_holding_lock)]
impl<S: RowSource> GpuCache<S> {
    /// A cache of up to `capacity` rows of `source` (at most its row count), empty at first.
    ///
    /// On an engine with a memory budget, slots are allocated in pages of a quarter of the
    /// capacity (at most one storage binding each): one page now, more as the rows looked up need
    /// them and the engine's memory pressure allows ([`crate::PressureStages`]); under pressure
    /// the cache gives pages back. Without a budget all slots are allocated at once.
    /// `capacity == 0` is [`Error::LimitExceeded`]: a cache needs a slot to load a row into.
    /// The slots count against the engine's memory budget like any table.
    pub async fn new(engine: &Engine, source: S, capacity: usize, policy: Box<dyn Policy>) -> Result<GpuCache<S>, Error> {
        let (format, rows, dim) = (source.format(), source.rows(), source.dim());
        if rows > u32::MAX as usize {
            return Err(Error::LimitExceeded { what: "table rows (ids are u32)", requested: rows as u64, max: u32::MAX as u64 });
        }
        if dim == 0 {
            return Err(Error::ZeroDim);
        }
        let max_capacity = capacity.min(rows.max(1));
        let row_words = format.row_words(dim);
        let rows_per_shard = (engine.ctx.max_binding_bytes / 4 / row_words as u64).max(1) as usize;
        // Every page is one more dispatch of the gather kernel over all of a batch's ids, so
        // pages are few: a quarter of the capacity when the engine has a budget to react to,
        // else the whole capacity at once (split only where a binding cannot hold it).
        let pages = if engine.ctx.memory_budget.is_some() { 4 } else { 1 };
        let page_rows = max_capacity.div_ceil(pages).clamp(1, rows_per_shard);
        let first = page_rows.min(max_capacity);
        let map = SlotMap::new(first, format.row_bytes(dim) as u64, policy)?.for_rows(rows);
        let res = Resident::zeroed(engine, format, first, dim).await?;
        let name = engine.ctx.registry.owner_name("cache");
        res.set_name(&name);
        let mut st = CacheState { slots: GpuTable { res }, map, max_capacity, page_rows, row_words, rows, dim, name, staged: None, pending: false };
        if pages == 1 {
            while st.map.capacity() < max_capacity {
                if !st.grow().await? {
                    return Err(Error::OutOfMemory { what: "cache slots" });
                }
            }
        }
        // In a browser nothing runs on another thread; the Arc only shares the state with claims.
        #[cfg_attr(web, allow(clippy::arc_with_non_send_sync))]
        let state = Arc::new(Mutex::new(st));
        Ok(GpuCache { source, state, max_capacity, page_rows })
    }

    /// A cache holding as many rows as `budget_bytes` of packed rows allow (see
    /// [`GpuCache::new`]; a budget below one row is an error).
    pub async fn with_budget(engine: &Engine, source: S, budget_bytes: u64, policy: Box<dyn Policy>) -> Result<GpuCache<S>, Error> {
        let row_bytes = source.format().row_bytes(source.dim()) as u64;
        let capacity = (budget_bytes / row_bytes).min(usize::MAX as u64) as usize;
        if capacity == 0 {
            return Err(Error::LimitExceeded { what: "bytes of one cached row (the cache budget holds none)", requested: row_bytes, max: budget_bytes });
        }
        GpuCache::new(engine, source, capacity, policy).await
    }

    /// The host table.
    pub fn source(&self) -> &S {
        &self.source
    }
    /// The host table's format (the slots hold its packed rows).
    pub fn format(&self) -> Format {
        self.source.format()
    }
    /// Rows of the host table (ids address these).
    pub fn rows(&self) -> usize {
        self.source.rows()
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.source.dim()
    }
    /// The cache's state, for one call. Natively a lookup on another thread is waited for; in
    /// a browser (one thread) a lookup awaiting the GPU cannot be, so the call is refused.
    fn state(&self) -> Result<MutexGuard<'_, CacheState>, Error> {
        #[cfg(native)]
        let st = self.state.lock().map_err(|_| Error::gpu("cache", "a lookup panicked on another thread"))?;
        #[cfg(web)]
        let st = self.state.try_lock().map_err(|_| Error::Busy { what: "the cache (a lookup is awaiting the GPU)" })?;
        Ok(st)
    }

    /// Slots allocated now: rows the GPU can hold before the cache grows or evicts.
    pub fn capacity(&self) -> usize {
        self.state().map_or(0, |st| st.map.capacity())
    }
    /// Slots the cache may grow to.
    pub fn max_capacity(&self) -> usize {
        self.max_capacity
    }
    /// Slots per page (a page is the unit the cache grows and shrinks by).
    pub fn page_rows(&self) -> usize {
        self.page_rows
    }
    /// Rows cached now.
    pub fn cached_rows(&self) -> usize {
        self.state().map_or(0, |st| st.map.len())
    }
    /// The rows on the GPU now, in slot order (what a rebuilt cache loads to start warm).
    pub fn cached_ids(&self) -> Vec<u32> {
        self.state().map_or_else(|_| Vec::new(), |st| st.map.entries().map(|(row, _)| row).collect())
    }
    /// Whether `row` is on the GPU now.
    pub fn is_cached(&self, row: u32) -> bool {
        self.state().is_ok_and(|st| st.map.slot(row).is_some())
    }
    /// Names the cache in the engine's [`Engine::memory_report`] (default: "cache N").
    pub fn set_name(&self, name: &str) {
        if let Ok(mut st) = self.state() {
            st.name = name.to_string();
            st.slots.set_name(name)
        }
    }

    /// Gives back every page but the first: the rows stay on the host and are loaded again when
    /// looked up. What the engine does by itself above [`crate::PressureStages::evict`].
    pub fn release(&self) -> Result<(), Error> {
        self.state()?.shrink_to_pages(1)
    }
    /// Storage buffers the slots are split into (each within the binding limit).
    pub fn shard_count(&self) -> usize {
        self.state().map_or(0, |st| st.slots.shard_count())
    }
    /// Bytes of GPU memory the slots take.
    pub fn bytes(&self) -> u64 {
        self.state().map_or(0, |st| st.slots.bytes())
    }
    /// The replacement policy's name ("lru").
    pub fn policy_name(&self) -> String {
        self.state().map_or_else(|_| String::new(), |st| st.map.policy_name().to_string())
    }
    /// Hits, misses, evictions and bytes uploaded since the cache was made or the last reset.
    pub fn stats(&self) -> CacheStats {
        self.state().map(|st| st.map.stats()).unwrap_or_default()
    }
    /// Zeroes the counters of [`GpuCache::stats`].
    pub fn reset_stats(&self) {
        if let Ok(mut st) = self.state() {
            st.map.reset_stats()
        }
    }
    /// The engine the cache lives on.
    pub fn engine(&self) -> Result<Engine, Error> {
        Ok(Engine { ctx: self.state()?.slots.res.ctx.clone() })
    }

    /// A gather of `ids` (checked) into `element` rows, submitted under the cache's lock: slots
    /// assigned, the work queued, before the next lookup assigns any.
    async fn gather_locked(&self, ids: &[u32], bounds: Bounds, element: Element) -> Result<GpuRows, Error> {
        let mut st = self.state()?;
        let (job, loaded) = self.prepare_locked(&mut st, ids, bounds).await?;
        // This call holds the lock until the work is queued: no claim is needed.
        let job = match job.into_element(element).await {
            Ok(job) => job,
            Err(e) => {
                st.map.invalidate(loaded);
                return Err(e.into());
            }
        };
        let ctx = job.ctx.clone();
        if let Err(e) = super::checked_submit(&ctx, "cache lookup submission", || job.submit()).await {
            st.map.invalidate(loaded);
            return Err(e.into());
        }
        Ok(job.into_output())
    }

    /// A gather of `ids` (checked) into `element` rows, not submitted: the slots are assigned and
    /// the job holds them with a claim.
    async fn prepare_claimed(&self, ids: &[u32], bounds: Bounds, element: Element) -> Result<LookupJob, Error> {
        let mut st = self.state()?;
        let (job, loaded) = self.prepare_locked(&mut st, ids, bounds).await?;
        let mut job = match job.into_element(element).await {
            Ok(job) => job,
            Err(e) => {
                st.map.invalidate(loaded);
                return Err(e.into());
            }
        };
        job.hook = Some(Box::new(Claim { state: self.state.clone(), loaded, released: AtomicBool::new(false) }));
        st.pending = true;
        Ok(job)
    }

    /// A lookup's job, its slots assigned, and the slots it loads (which the caller must
    /// invalidate if the job does not run); the caller holds the lock.
    async fn prepare_locked(&self, st: &mut CacheState, ids: &[u32], bounds: Bounds) -> Result<(LookupJob, Vec<u32>), Error> {
        st.slots.res.ctx.check_lost()?;
        st.check_idle()?;
        let rows = st.rows;
        bounds.check(ids, rows)?;
        st.adapt(ids).await?;
        let resolved: Vec<Option<u32>> = ids.iter().map(|&id| bounds.resolve(id, rows).map(|r| r as u32)).collect();
        let mut slots = Vec::new();
        let parts = st.map.lookup(&resolved, &mut slots);
        let loaded: Vec<u32> = parts.iter().flat_map(|p| p.loads.iter().map(|&(_, slot)| slot)).collect();
        match st.encode(&self.source, &parts, &slots).await {
            Ok(job) => Ok((job, loaded)),
            Err(e) => {
                st.map.invalidate(loaded);
                Err(e)
            }
        }
    }

    /// Stages the rows of `ids` that are not cached (the next batch) on the GPU, beside the
    /// cache: the two-level scheme, the cache (L1) holding the current batch's rows and a staging
    /// buffer (L2) the next one's. Call it after submitting the current batch: the host reads (a
    /// mapped file's pages, a remote table's requests, checksums) and the upload then overlap the
    /// GPU's work. The next lookup copies its misses that were staged from L2 into their slots on
    /// the GPU, reading nothing from the host for them; staging evicts nothing and does not touch
    /// the policy, so a wrong guess costs only the upload. Each prefetch replaces the previous
    /// staging, and a lookup consumes it. Ids out of range are skipped (the lookup applies its
    /// bounds policy); at most `capacity` distinct rows (and one storage binding) are staged.
    /// Returns how many rows were staged.
    pub async fn prefetch(&self, ids: &[u32]) -> Result<usize, Error> {
        let mut st = self.state()?;
        st.check_idle()?;
        st.prefetch(&self.source, ids).await
    }

    /// Uploads again the cached copies of rows `ids` after the host table changed them (see
    /// [`GpuCache::update_rows`] for an in-memory host table); rows not cached need nothing.
    pub async fn refresh_rows(&self, ids: &[u32]) -> Result<(), Error> {
        let mut st = self.state()?;
        st.check_idle()?;
        st.refresh_rows(&self.source, ids).await
    }
}

use crate::source::read_whole_rows;

impl CacheState {
    /// Refuses a call while a prepared lookup holds the slots: its claim would otherwise have to
    /// wait for this call's awaits (in a browser, it could not).
    fn check_idle(&self) -> Result<(), Error> {
        match self.pending {
            true => Err(Error::Busy { what: "the cache (a prepared lookup is not yet submitted)" }),
            false => Ok(()),
        }
    }

    fn shrink_to_pages(&mut self, pages: usize) -> Result<(), Error> {
        let pages = pages.max(1);
        let res = &mut self.slots.res;
        if res.shards.len() <= pages {
            return Ok(());
        }
        let capacity = (pages * self.page_rows).min(self.max_capacity);
        self.map.resize(capacity)?;
        res.shards.truncate(pages);
        res.tables[0].rows = capacity as u32;
        Ok(())
    }

    /// Adds a page of slots; `false` when the budget or the device refuses it (the cache keeps
    /// serving with the slots it has).
    async fn grow(&mut self) -> Result<bool, Error> {
        let capacity = self.map.capacity();
        let n = self.page_rows.min(self.max_capacity - capacity);
        let ctx = self.slots.res.ctx.clone();
        let bytes = 4 * (n * self.row_words) as u64;
        let buffer = match ctx.create_buffer("cache slots", bytes, wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST, None).await {
            Ok(b) => b,
            Err(edo_gpu::Error::Core(edo_core::Error::LimitExceeded { .. }) | edo_gpu::Error::OutOfMemory { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        ctx.registry.set_owner([&buffer], &self.name);
        let rw = self.row_words as u32;
        self.slots.res.shards.push(super::table::Shard { buffer, word_start: capacity as u32 * rw, word_end: (capacity + n) as u32 * rw });
        self.slots.res.tables[0].rows = (capacity + n) as u32;
        self.map.resize(capacity + n)?;
        Ok(true)
    }

    /// The engine's pressure stages, applied before a lookup or prefetch of `ids`: shrink under
    /// pressure, else grow by pages until the rows `ids` miss fit the free slots (or the cache
    /// reaches its capacity, or the pressure stops it).
    async fn adapt(&mut self, ids: &[u32]) -> Result<(), Error> {
        let ctx = self.slots.res.ctx.clone();
        let stages = ctx.pressure;
        let pressure = ctx.pressure();
        let pages = self.slots.res.shards.len();
        match pressure {
            Some(p) if p > stages.evict => return self.shrink_to_pages(1),
            Some(p) if p > stages.shrink => return self.shrink_to_pages(pages - 1),
            _ => {}
        }
        if self.map.capacity() >= self.max_capacity {
            return Ok(());
        }
        let rows = self.rows;
        let missing = ids.iter().filter(|&&id| (id as usize) < rows && self.map.slot(id).is_none()).count();
        while self.map.capacity() - self.map.len() < missing && self.map.capacity() < self.max_capacity {
            if ctx.pressure().is_some_and(|p| p >= stages.stop_growing) || !self.grow().await? {
                break;
            }
        }
        Ok(())
    }
    async fn prefetch(&mut self, source: &impl RowSource, ids: &[u32]) -> Result<usize, Error> {
        let ctx = self.slots.res.ctx.clone();
        ctx.check_lost()?;
        self.staged = None;
        let rows = self.rows;
        let limit = self.max_capacity.min((ctx.max_binding_bytes / 4 / self.row_words as u64).max(1) as usize);
        let mut index = rustc_hash::FxHashMap::default();
        let mut wanted = Vec::new();
        for &id in ids {
            if wanted.len() == limit {
                break;
            }
            if (id as usize) < rows && self.map.slot(id).is_none() && !index.contains_key(&id) {
                index.insert(id, wanted.len() as u32);
                wanted.push(id);
            }
        }
        if wanted.is_empty() {
            return Ok(0);
        }
        let mut words = Vec::new();
        read_whole_rows(source, self.row_words, &wanted, &mut words).await?;
        let buffer = ctx.create_buffer("cache staging", 4 * words.len() as u64, wgpu::BufferUsages::STORAGE, Some(bytemuck::cast_slice(&words))).await?;
        ctx.registry.set_owner([&buffer], &self.name);
        self.map.note_staged(wanted.len());
        self.staged = Some(Staged { index, buffer });
        Ok(wanted.len())
    }

    async fn refresh_rows(&mut self, source: &impl RowSource, ids: &[u32]) -> Result<(), Error> {
        let ctx = self.slots.res.ctx.clone();
        ctx.check_lost()?;
        Bounds::Error.check(ids, self.rows)?;
        // A staged copy of a changed row is stale: drop the staging rather than serve it.
        if self.staged.as_ref().is_some_and(|s| ids.iter().any(|id| s.index.contains_key(id))) {
            self.staged = None;
        }
        let mut loads: Vec<(u32, u32)> = ids.iter().filter_map(|&row| self.map.slot(row).map(|slot| (row, slot))).collect();
        loads.sort_unstable();
        loads.dedup();
        if loads.is_empty() {
            return Ok(());
        }
        let mut passes = Vec::new();
        let mut inputs = Vec::new();
        if let Err(e) = self.scatter(source, &loads, &mut passes, &mut inputs).await {
            // The old copies are stale now: forget them rather than serve them.
            self.map.invalidate(loads.iter().map(|&(_, slot)| slot));
            return Err(e);
        }
        let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("edo cache refresh") });
        super::job::encode_passes(&mut encoder, "edo cache refresh", &passes);
        ctx.queue.submit([encoder.finish()]);
        Ok(())
    }

    /// The job of a lookup: per part, the scatter of its loads and the gather of its slots.
    async fn encode(&mut self, source: &impl RowSource, parts: &[Part], slots: &[u32]) -> Result<LookupJob, Error> {
        let job = self.encode_parts(source, parts, slots).await;
        // The staging served this lookup (or was not needed): the next prefetch stages anew.
        self.staged = None;
        job
    }

    async fn encode_parts(&mut self, source: &impl RowSource, parts: &[Part], slots: &[u32]) -> Result<LookupJob, Error> {
        let ctx = self.slots.res.ctx.clone();
        let dim = self.dim as u64;
        let mut passes = Vec::new();
        let mut inputs = Vec::new();
        if let [part] = parts {
            self.scatter(source, &part.loads, &mut passes, &mut inputs).await?;
            let gather = self.slots.encode_gather(Indices::Host(slots), RowPolicy::Zero, None, Element::F32).await?;
            passes.push(gather.pass);
            inputs.extend(gather.inputs);
            return Ok(LookupJob::new(ctx, passes, inputs, gather.output));
        }
        // Several parts: each gathers into its own buffer, copied into place after the pass
        // (binding offsets must be aligned, part boundaries are not).
        let out_bytes = (slots.len() as u64).saturating_mul(4 * dim);
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        let out = ctx.pooled("cache lookup output", out_bytes, usage, None, super::Fit::Exact).await?;
        let mut copies = Vec::new();
        for part in parts {
            self.scatter(source, &part.loads, &mut passes, &mut inputs).await?;
            let gather = self.slots.encode_gather(Indices::Host(&slots[part.ids.clone()]), RowPolicy::Zero, None, Element::F32).await?;
            passes.push(gather.pass);
            inputs.extend(gather.inputs);
            copies.push((gather.output.buffer, out.clone(), 4 * dim * part.ids.start as u64, 4 * dim * part.ids.len() as u64));
        }
        let output = GpuRows::new(ctx.clone(), out, slots.len(), dim as usize, crate::Element::F32);
        Ok(LookupJob { ctx, stages: vec![Stage { passes, copies }], _inputs: inputs, output, hook: None })
    }

    /// Adds the pass that writes the rows of `loads` (row, slot) into their slots: rows the
    /// staging buffer holds are copied from it on the GPU, the others are read from the host and
    /// uploaded. One dispatch per shard and source.
    async fn scatter(&mut self, source: &impl RowSource, loads: &[(u32, u32)], passes: &mut Vec<Pass>, inputs: &mut Vec<super::Buffer>) -> Result<(), Error> {
        if loads.is_empty() {
            return Ok(());
        }
        let ctx = self.slots.res.ctx.clone();
        // Per shard: moves from the host upload, and moves from the staging buffer.
        let shards = self.slots.res.shards.len();
        let mut from_host: Vec<Vec<(u32, u32)>> = vec![Vec::new(); shards];
        let mut from_stage: Vec<Vec<(u32, u32)>> = vec![Vec::new(); shards];
        for &(row, slot) in loads {
            let shard = slot as usize / self.page_rows;
            match self.staged.as_ref().and_then(|s| s.index.get(&row)) {
                Some(&k) => from_stage[shard].push((slot, k)),
                None => from_host[shard].push((row, slot)),
            }
        }
        self.map.note_served_from_staging(from_stage.iter().map(Vec::len).sum());
        let pipeline = ctx.pipeline(ShaderId::Scatter, (ctx.workgroup_size, 1)).await?;
        let mut dispatches = Vec::new();
        let mut words = Vec::new();
        for shard_index in 0..shards {
            let group = &from_host[shard_index];
            if !group.is_empty() {
                let rows: Vec<u32> = group.iter().map(|&(row, _)| row).collect();
                words.clear();
                read_whole_rows(source, self.row_words, &rows, &mut words).await?;
                let upload = ctx
                    .pooled("scatter rows", 4 * words.len() as u64, wgpu::BufferUsages::STORAGE, Some(bytemuck::cast_slice(&words)), super::Fit::Class)
                    .await?;
                let moves: Vec<(u32, u32)> = group.iter().enumerate().map(|(k, &(_, slot))| (slot, k as u32)).collect();
                dispatches.push(self.scatter_dispatch(shard_index, &moves, &upload, inputs).await?);
                inputs.push(upload);
            }
            if let (Some(staged), false) = (&self.staged, from_stage[shard_index].is_empty()) {
                let buffer = staged.buffer.clone();
                dispatches.push(self.scatter_dispatch(shard_index, &from_stage[shard_index], &buffer, inputs).await?);
                inputs.push(buffer);
            }
        }
        passes.push(Pass { pipeline, dispatches });
        Ok(())
    }

    /// One scatter dispatch: `moves` (slot, source row in `rows`) into shard `shard_index`.
    async fn scatter_dispatch(
        &self,
        shard_index: usize,
        moves: &[(u32, u32)],
        rows: &super::Buffer,
        inputs: &mut Vec<super::Buffer>,
    ) -> Result<Dispatch, Error> {
        let ctx = &self.slots.res.ctx;
        let shard = &self.slots.res.shards[shard_index];
        let params = ScatterParams {
            n_moves: moves.len() as u32,
            row_words: self.row_words as u32,
            shard_first: shard.word_start / self.row_words as u32,
            shard_rows: (shard.word_end - shard.word_start) / self.row_words as u32,
        };
        let flat: Vec<u32> = moves.iter().flat_map(|&(slot, source)| [slot, source]).collect();
        let uniform = ctx.pooled("scatter params", 16, wgpu::BufferUsages::UNIFORM, Some(bytemuck::bytes_of(&params)), super::Fit::Class).await?;
        let moves_buffer =
            ctx.pooled("scatter moves", 4 * flat.len() as u64, wgpu::BufferUsages::STORAGE, Some(bytemuck::cast_slice(&flat)), super::Fit::Class).await?;
        let bind_group = ctx.bind_group(
            "edo scatter",
            &ctx.gather_layout,
            &[uniform.as_entire_binding(), moves_buffer.as_entire_binding(), rows.as_entire_binding(), shard.buffer.as_entire_binding()],
        );
        let (gx, gy) = ctx.grid("workgroups of one scatter dispatch", (moves.len() * self.row_words) as u64, ctx.workgroup_size as u64)?;
        inputs.extend([uniform, moves_buffer, shard.buffer.clone()]);
        Ok((bind_group, gx, gy))
    }
}

impl GpuCache<PackedTable> {
    /// Re-quantises rows `ids` of the in-memory host table from `values` (as
    /// [`PackedTable::update_rows`]) and uploads the new rows to the slots that hold them; later
    /// lookups see the new rows. A bad id or value changes nothing.
    pub async fn update_rows(&mut self, ids: &[u32], values: &[f32]) -> Result<(), Error> {
        self.source.update_rows(ids, values)?;
        self.refresh_rows(ids).await
    }
}

impl<S: RowSource> GpuLookup for GpuCache<S> {
    fn rows(&self) -> usize {
        self.rows()
    }
    fn dim(&self) -> usize {
        self.dim()
    }
    fn bytes(&self) -> u64 {
        self.bytes()
    }
    fn set_name(&self, name: &str) {
        self.set_name(name)
    }
    fn engine(&self) -> Engine {
        Engine { ctx: self.state.lock().map(|st| st.slots.res.ctx.clone()).unwrap_or_else(|p| p.into_inner().slots.res.ctx.clone()) }
    }

    /// The lookup without submitting, so the output can be inspected (or pre-filled) first. The
    /// slots are assigned already and the job holds them: until it is submitted (or dropped,
    /// which empties the slots it would have loaded, so the cache never claims a row it does not
    /// hold), other lookups of the cache are refused with [`Error::Busy`]. A bag is prepared
    /// only when its gathered rows fit one storage binding (else [`Error::Unsupported`]:
    /// [`GpuLookup::bag`] submits part by part).
    async fn prepare(&self, request: &Request<'_>) -> Result<LookupJob, Error> {
        let bounds = request.bounds;
        let mut store = Vec::new();
        match request.narrow(self.rows(), &mut store)? {
            IdSelect::Ids(ids) => self.prepare_claimed(ids, bounds, request.element).await,
            IdSelect::Bags(bags, pooling) => {
                BagPlan::new(&[(self.rows(), self.dim())], bags.len(), &bags, pooling, bounds)?;
                let ctx = GpuLookup::engine(self).ctx;
                if dense_parts(&ctx, bags.indices.len(), self.dim())?.len() > 1 {
                    return Err(Error::Unsupported(crate::Unsupported::PreparedCacheBagOverBindings));
                }
                let job = super::bag::gather_and_pool(&ctx, self.dim(), &bags, pooling, async |part| {
                    self.prepare_claimed(&bags.indices[part], bounds, Element::F32).await
                })
                .await?;
                Ok(job.into_element(request.element).await?)
            }
        }
    }

    /// Looks the rows up — loading the rows that are not cached, evicting others by policy —
    /// and submits the work; the output is what the fully resident table's lookup gives. The
    /// slots are assigned and the work queued under the cache's lock, so lookups from several
    /// threads queue in the order they assign slots. A bag's indices are looked up through the
    /// cache, then pooled on the GPU (at the cost of `indices × dim × 4` bytes of GPU scratch),
    /// part by part when the gathered rows exceed one storage binding.
    async fn lookup(&self, request: &Request<'_>) -> Result<GpuRows, Error> {
        let bounds = request.bounds;
        let mut store = Vec::new();
        match request.narrow(self.rows(), &mut store)? {
            IdSelect::Ids(ids) => self.gather_locked(ids, bounds, request.element).await,
            IdSelect::Bags(bags, pooling) => {
                // Offsets, weights and bounds are checked before any row is loaded.
                BagPlan::new(&[(self.rows(), self.dim())], bags.len(), &bags, pooling, bounds)?;
                let ctx = GpuLookup::engine(self).ctx;
                let mut parts = Vec::new();
                for part in dense_parts(&ctx, bags.indices.len(), self.dim())? {
                    parts.push(self.gather_locked(&bags.indices[part], bounds, Element::F32).await?);
                }
                let job = super::bag::pool_gathered(&ctx, parts, &bags, pooling).await?.into_element(request.element).await?;
                job.submit_checked().await?;
                Ok(job.into_output())
            }
        }
    }

    /// [`GpuLookup::lookup`] (under the cache's lock), then its rows read back.
    async fn lookup_host(&self, request: &Request<'_>) -> Result<crate::HostRows, Error> {
        Ok(GpuLookup::lookup(self, request).await?.read_host().await?)
    }
}

/// Rows a rebuilt cache loads per lookup while it warms up.
const WARM_BATCH: usize = 1 << 16;

impl<S: RowSource + Clone> Reupload for GpuCache<S> {
    type Host = CacheSpec<S>;
    /// A new cache holding the rows the lost one held (their counts in the policy start over).
    async fn reupload(engine: &Engine, host: &CacheSpec<S>, lost: Option<&Self>) -> Result<Self, Error> {
        let cache = GpuCache::new(engine, host.source.clone(), host.capacity, host.policy.build()).await?;
        let warm = lost.map(GpuCache::cached_ids).unwrap_or_default();
        for ids in warm.chunks(WARM_BATCH) {
            drop(GpuLookup::gather(&cache, ids, crate::Bounds::Error).await?);
        }
        cache.reset_stats();
        Ok(cache)
    }
}

/// A cache placed on the CPU path is a cache there too: the same policy and capacity, its rows in
/// host memory.
impl<S: RowSource + Clone + WasmNotSendSync + 'static> Placeable for GpuCache<S> {
    type Cpu = HostCache<S>;
    fn place_cpu(host: CacheSpec<S>) -> Result<HostCache<S>, Error> {
        HostCache::new(host)
    }
    fn cpu_host(cpu: &HostCache<S>) -> &CacheSpec<S> {
        cpu.spec()
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;
    use crate::gpu::ShaderId;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        edo_gpu::assert_wgsl_layout!(ShaderId::Scatter, ScatterParams { n_moves, row_words, shard_first, shard_rows });
    }
}
