//! Hot-row caches over a table in WASM memory or a remote file.

use super::*;

/// A cache over a table in WASM memory or over a remote table file.
pub(crate) enum CacheInner {
    Local(Placed<GpuCache<Arc<PackedTable>>>),
    Remote(Placed<GpuCache<Arc<RemoteTable<FetchReader>>>>),
}

/// A hot-row cache over a table in WASM memory or a remote file (see `EdoEngine.cache` and
/// `cacheRemote`). On WebGPU one lookup at a time: a call made while another is pending is
/// refused with an error. On the CPU path lookups may overlap (they share their fetches).
#[wasm_bindgen]
pub struct EdoCache {
    pub(crate) inner: RefCell<CacheInner>,
    /// Fixed at creation, so reading it never waits on the lookup in flight.
    pub(crate) backend: &'static str,
}

impl EdoCache {
    pub(crate) fn new(inner: CacheInner) -> EdoCache {
        let backend = web_name(match &inner {
            CacheInner::Local(c) => c.backend(),
            CacheInner::Remote(c) => c.backend(),
        });
        EdoCache { inner: RefCell::new(inner), backend }
    }
}

pub(crate) fn policy_of(name: Option<&str>) -> Result<PolicyKind, Failure> {
    match name {
        None => Ok(PolicyKind::Lfu),
        Some(name) => {
            PolicyKind::from_name(name).ok_or_else(|| Failure::arg(format!("unknown policy {name:?} ({})", PolicyKind::ALL.map(|k| k.name()).join(", "))))
        }
    }
}

pub(crate) fn busy() -> Failure {
    Failure { code: "BUSY", message: "this cache is serving another call; await it first".into() }
}

#[wasm_bindgen]
impl EdoCache {
    /// `"webgpu"` or `"cpu"`.
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        self.backend.into()
    }

    /// Decoded rows of `ids` (`ids.length × dim` values), loading missing rows into the cache.
    /// On WebGPU one lookup at a time (a call meanwhile is refused); on the CPU path lookups may
    /// overlap, and a row one of them is fetching is not fetched again by another.
    // The GPU cache stays borrowed while the lookup awaits the GPU: that is the "one lookup at a
    // time" rule, and a call meanwhile gets `busy()` from `try_borrow_mut`, never a panic.
    #[allow(clippy::await_holding_refcell_ref)]
    pub async fn gather(&self, ids: Vec<u32>) -> Result<Vec<f32>, Failure> {
        if self.backend == "cpu" {
            let inner = self.inner.try_borrow().map_err(|_| busy())?;
            return match &*inner {
                CacheInner::Local(c) => c.gather(&ids, Bounds::Error).await.map_err(err),
                CacheInner::Remote(c) => c.gather(&ids, Bounds::Error).await.map_err(err),
            };
        }
        let mut inner = self.inner.try_borrow_mut().map_err(|_| busy())?;
        match &mut *inner {
            CacheInner::Local(c) => c.gather(&ids, Bounds::Error).await.map_err(err),
            CacheInner::Remote(c) => c.gather(&ids, Bounds::Error).await.map_err(err),
        }
    }

    /// Stages the rows of the next batch that are not cached (call it while the current one is
    /// used): on WebGPU uploaded beside the cache, on the CPU path fetched and kept beside it. The
    /// next `gather` takes them instead of loading them; a `gather` on the CPU path that misses a
    /// row this prefetch is still fetching waits for that fetch. Returns how many rows.
    #[allow(clippy::await_holding_refcell_ref)] // as in `gather`
    pub async fn prefetch(&self, ids: Vec<u32>) -> Result<usize, Failure> {
        if self.backend == "cpu" {
            let inner = self.inner.try_borrow().map_err(|_| busy())?;
            return match &*inner {
                CacheInner::Local(c) => c.prefetch(&ids).await.map_err(err),
                CacheInner::Remote(c) => c.prefetch(&ids).await.map_err(err),
            };
        }
        let mut inner = self.inner.try_borrow_mut().map_err(|_| busy())?;
        match &mut *inner {
            CacheInner::Local(c) => c.prefetch(&ids).await.map_err(err),
            CacheInner::Remote(c) => c.prefetch(&ids).await.map_err(err),
        }
    }

    /// Hits, misses, evictions, bytes loaded into the cache (`bytesUploaded`), hit rate,
    /// capacity, rows cached, rows prefetches staged (`prefetched`) and misses served from them
    /// (`servedFromStaging`) and — on the CPU path — ids whose row came from another overlapping
    /// lookup's fetch (`sharedReads`, per id), as JSON; a remote table's requests and bytes
    /// fetched too.
    #[wasm_bindgen(getter)]
    pub fn stats(&self) -> Result<String, Failure> {
        let inner = self.inner.try_borrow().map_err(|_| busy())?;
        /// The cache's figures; a GPU cache being rebuilt after a device loss has none yet.
        fn figures<S: edo::cache::RowSource + Clone + 'static>(c: &Placed<GpuCache<S>>, traffic: Option<(u64, u64)>) -> Result<String, Failure> {
            if let Placed::Gpu(g) = c {
                g.latest().ok_or_else(|| Failure { code: "DEVICE_LOST", message: "the cache is being rebuilt after a device loss".into() })?;
            }
            let (s, (cached, capacity)) = (c.stats(), c.occupancy());
            let traffic = traffic.map_or(String::new(), |(r, b)| format!(r#","requests":{r},"bytesFetched":{b}"#));
            Ok(format!(
                r#"{{"hits":{},"misses":{},"evictions":{},"bytesUploaded":{},"hitRate":{},"capacity":{capacity},"cachedRows":{cached},"sharedReads":{},"prefetched":{},"servedFromStaging":{}{traffic}}}"#,
                s.hits,
                s.misses,
                s.evictions,
                s.bytes_uploaded,
                s.hit_rate(),
                s.shared_reads,
                s.prefetched,
                s.served_from_staging
            ))
        }
        match &*inner {
            CacheInner::Local(c) => figures(c, None),
            CacheInner::Remote(c) => figures(c, Some(c.host().source.traffic())),
        }
    }
}
