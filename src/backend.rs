//! [`Backend`] and [`Placed`]: where lookups run, chosen once at run time — a GPU when there is
//! one, else the CPU path — with one API (guide: [`crate::guide::lookups`]).

use std::sync::Arc;

use crate::cache::{CacheStats, RowSource};
use crate::gpu::Placeable;
use crate::model::StaticModel;
use crate::request::{AsyncLookup, HostRows, Request};
use crate::search::{Neighbors, Scored};
use crate::{Engine, EngineOptions, Error, GpuCache, GpuCodes, GpuLookup, GpuStaticModel, GpuTable, Lookup, PackedTable, Recoverable, RecoveringEngine};
use wgpu::WasmNotSendSync;

/// Where lookups run: a GPU (through a [`RecoveringEngine`]) or the CPU path.
///
/// [`Backend::new`] takes a GPU when an adapter and a device can be had, else the CPU path, and
/// says why; [`Backend::place`] puts a table, cache, binary codes or a model on it; the same
/// `async` verbs of [`Placed`] then run on either, with the same results (gathers and searches bit
/// for bit, bags within the documented bound). On a GPU every call reads its result back and
/// survives a device loss.
///
/// ```
/// use edo::{AsyncLookup, Backend, Bounds, Format, GpuTable, PackedTable};
/// # edo::block_on(async {
/// let data: Vec<f32> = (0..1000 * 16).map(|i| (i as f32 * 0.37).sin()).collect();
/// let table = PackedTable::quantize(Format::Int8, &data, 1000, 16)?;
/// let backend = Backend::cpu("no GPU wanted here");
/// let placed = backend.place::<GpuTable>(table.clone()).await?;
/// assert_eq!(placed.gather(&[3, 999], Bounds::Error).await?, edo::cpu::gather(&table, &[3, 999], Bounds::Error)?);
/// # Ok::<(), edo::Error>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub enum Backend {
    /// A GPU; tables placed on it survive a device loss.
    Gpu(RecoveringEngine),
    /// The CPU path, and why (no adapter, no device, or asked for).
    Cpu {
        /// Why not a GPU.
        reason: String,
    },
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Gpu(r) => f.debug_tuple("Gpu").field(&r.engine().adapter().to_string()).finish(),
            Backend::Cpu { reason } => f.debug_struct("Cpu").field("reason", reason).finish(),
        }
    }
}

impl Backend {
    /// A GPU when [`Engine::new`] gets one with `options`, else the CPU path with its error as
    /// the reason. Never fails: the CPU path is always there.
    pub async fn new(options: EngineOptions) -> Backend {
        match Engine::new(options).await {
            Ok(engine) => Backend::Gpu(RecoveringEngine::new(engine)),
            Err(e) => Backend::Cpu { reason: format!("no GPU ({e}); using the CPU path") },
        }
    }

    /// The CPU path, for `reason`.
    pub fn cpu(reason: impl Into<String>) -> Backend {
        Backend::Cpu { reason: reason.into() }
    }

    /// `"gpu"` or `"cpu"`.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Gpu(_) => "gpu",
            Backend::Cpu { .. } => "cpu",
        }
    }

    /// The engine in use now, on a GPU.
    pub fn engine(&self) -> Option<Engine> {
        match self {
            Backend::Gpu(r) => Some(r.engine()),
            Backend::Cpu { .. } => None,
        }
    }

    /// What it runs on: the GPU adapter, or why the CPU path.
    pub fn note(&self) -> String {
        match self {
            Backend::Gpu(r) => r.engine().adapter().to_string(),
            Backend::Cpu { reason } => reason.clone(),
        }
    }

    /// Makes `host` ready for lookups: uploaded on a GPU (kept for recovery), checked and kept as
    /// it is on the CPU path. `T` names the GPU form: [`GpuTable`] (a [`PackedTable`]),
    /// [`crate::AnyGpuTable`] (an [`crate::AnyTable`]), [`GpuCodes`] (binary codes),
    /// [`GpuStaticModel`] (a [`StaticModel`]) or [`GpuCache`] (a [`crate::gpu::CacheSpec`]). A table the GPU
    /// cannot take (past its limits) is the same error the GPU upload gives; the CPU path takes
    /// it.
    pub async fn place<T: Placeable>(&self, host: T::Host) -> Result<Placed<T>, Error>
    where
        T::Host: WasmNotSendSync,
    {
        match self {
            Backend::Gpu(r) => Ok(Placed::Gpu(r.upload(host).await?)),
            Backend::Cpu { .. } => Ok(Placed::Cpu(Arc::new(T::place_cpu(host)?))),
        }
    }
}

/// A table, cache, codes or model placed on a [`Backend`]: on the GPU (recovering from device
/// loss), or its host copy on the CPU path. Cheap to clone.
pub enum Placed<T: Placeable> {
    /// On the GPU.
    Gpu(Recoverable<T>),
    /// On the CPU path: the host copy, or for a cache a [`crate::cache::HostCache`] over it.
    Cpu(Arc<T::Cpu>),
}

impl<T: Placeable> Clone for Placed<T> {
    fn clone(&self) -> Self {
        match self {
            Placed::Gpu(g) => Placed::Gpu(g.clone()),
            Placed::Cpu(h) => Placed::Cpu(h.clone()),
        }
    }
}

impl<T: Placeable> Placed<T>
where
    T::Host: WasmNotSendSync,
{
    /// `"gpu"` or `"cpu"`.
    pub fn backend(&self) -> &'static str {
        match self {
            Placed::Gpu(_) => "gpu",
            Placed::Cpu(_) => "cpu",
        }
    }

    /// The host copy (the table it was placed from).
    pub fn host(&self) -> &T::Host {
        match self {
            Placed::Gpu(g) => g.host(),
            Placed::Cpu(h) => T::cpu_host(h),
        }
    }
}

impl<T: Placeable + GpuLookup> AsyncLookup for Placed<T>
where
    T::Host: Lookup + WasmNotSendSync,
{
    fn rows(&self) -> usize {
        self.host().rows()
    }
    fn dim(&self) -> usize {
        self.host().dim()
    }
    /// [`GpuLookup::lookup`] read back (recovering from a device loss), or [`Lookup::lookup`].
    async fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error> {
        match self {
            Placed::Gpu(g) => g.lookup(request).await,
            Placed::Cpu(h) => Lookup::lookup(T::cpu_host(h), request),
        }
    }
}

/// Lookups through the cache: on a GPU its slots there (recovered from a device loss), on the
/// CPU path a [`crate::cache::HostCache`] — loading the rows they miss from the source either way.
impl<S: RowSource + Clone + WasmNotSendSync + 'static> AsyncLookup for Placed<GpuCache<S>> {
    fn rows(&self) -> usize {
        self.host().source.rows()
    }
    fn dim(&self) -> usize {
        self.host().source.dim()
    }
    async fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error> {
        match self {
            Placed::Gpu(c) => c.lookup(request).await,
            Placed::Cpu(c) => c.lookup(request).await,
        }
    }
}

impl<S: RowSource + Clone + WasmNotSendSync + 'static> Placed<GpuCache<S>> {
    /// Stages the rows of the next batch: [`GpuCache::prefetch`] on a GPU, [`crate::cache::HostCache::prefetch`]
    /// on the CPU path; how many rows were read.
    pub async fn prefetch(&self, ids: &[u32]) -> Result<usize, Error> {
        match self {
            Placed::Gpu(c) => c.run(async |c| c.prefetch(ids).await).await,
            Placed::Cpu(c) => c.prefetch(ids).await,
        }
    }

    /// Hits, misses and evictions of the cache on either backend (a GPU cache being rebuilt
    /// after a device loss has none yet: all zero).
    pub fn stats(&self) -> CacheStats {
        match self {
            Placed::Gpu(c) => c.latest().map(|c| c.stats()).unwrap_or_default(),
            Placed::Cpu(c) => c.stats(),
        }
    }

    /// Zeroes the counters of [`Placed::stats`].
    pub fn reset_stats(&self) {
        match self {
            Placed::Gpu(c) => c.latest().iter().for_each(|c| c.reset_stats()),
            Placed::Cpu(c) => c.reset_stats(),
        }
    }

    /// Rows the cache holds now, and at most now (0, 0 for a GPU cache being rebuilt).
    pub fn occupancy(&self) -> (usize, usize) {
        match self {
            Placed::Gpu(c) => c.latest().map_or((0, 0), |c| (c.cached_rows(), c.capacity())),
            Placed::Cpu(c) => (c.cached_rows(), c.capacity()),
        }
    }
}

impl Placed<GpuCodes> {
    /// Exact Hamming top-`k` of binary `queries` (ties to the lower row).
    pub async fn hamming_topk(&self, queries: &PackedTable, k: usize) -> Result<Neighbors, Error> {
        match self {
            Placed::Gpu(g) => g.hamming_topk(queries, k).await,
            Placed::Cpu(h) => crate::search::hamming_topk(h, queries, k),
        }
    }

    /// Hamming candidates (`k × multiplier`) rescored by the dot product with `table`'s rows,
    /// which must be placed on the same backend (see [`GpuCodes::search_rescored`]).
    pub async fn search_rescored(&self, queries: &[f32], table: &Placed<GpuTable>, k: usize, multiplier: usize) -> Result<Scored, Error> {
        match (self, table) {
            // The table's current form first: after a loss the codes' rebuild uploads both.
            (Placed::Gpu(codes), Placed::Gpu(rows)) => codes.run(async |c| c.search_rescored(queries, &*rows.current().await?, k, multiplier).await).await,
            (Placed::Cpu(codes), Placed::Cpu(rows)) => crate::search::search_rescored(codes, queries, rows, k, multiplier),
            _ => Err(Error::Unsupported(crate::Unsupported::RescoringAcrossBackends)),
        }
    }
}

impl Placed<GpuStaticModel> {
    /// Sentence vectors of `texts` ([`StaticModel::encode`]).
    pub async fn encode(&self, texts: &[&str]) -> Result<Vec<f32>, Error> {
        match self {
            Placed::Gpu(m) => m.encode(texts).await,
            Placed::Cpu(m) => m.encode(texts),
        }
    }

    /// The model.
    pub fn model(&self) -> &StaticModel {
        self.host()
    }
}
