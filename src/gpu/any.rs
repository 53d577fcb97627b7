//! [`AnyGpuTable`]: the closed enum over the GPU table kinds of [`GpuLookup`], for code that
//! picks a kind at run time. It forwards the trait's two methods; the verbs come with them.

use super::lookup::Reupload;
use std::sync::Arc;

use super::job::LookupJob;
use super::lookup::GpuLookup;
use super::{Engine, GpuCache, GpuMixedTable, GpuPrunedTable, GpuRows, GpuTable};
use crate::lookup::AnyTable;
use crate::request::Request;
use crate::Error;

/// Any of the GPU table kinds of [`GpuLookup`], for code that chooses one at run time (a
/// planner's choice, a file's contents): a closed enum, so no `dyn` and no boxing.
#[derive(Clone)]
pub enum AnyGpuTable {
    /// A packed table of one format.
    Dense(GpuTable),
    /// A compact table of kept rows and its remap.
    Pruned(GpuPrunedTable),
    /// Hot rows in one format, cold rows in another.
    Mixed(GpuMixedTable),
    /// Rows of a host table cached on the GPU (shared: lookups take `&self`).
    Cached(Arc<GpuCache>),
}

/// `$e` with `$t` bound to the table inside `$self`, whichever kind it is.
macro_rules! each_gpu_kind {
    ($self:expr, $t:ident => $e:expr) => {
        match $self {
            AnyGpuTable::Dense(t) => {
                let $t: &GpuTable = t;
                $e
            }
            AnyGpuTable::Pruned(t) => {
                let $t: &GpuPrunedTable = t;
                $e
            }
            AnyGpuTable::Mixed(t) => {
                let $t: &GpuMixedTable = t;
                $e
            }
            AnyGpuTable::Cached(t) => {
                let $t: &GpuCache = t;
                $e
            }
        }
    };
}

impl AnyGpuTable {
    /// Uploads `table` to `engine` as the matching GPU kind.
    pub async fn upload(engine: &Engine, table: &AnyTable) -> Result<AnyGpuTable, Error> {
        Ok(match table {
            AnyTable::Dense(t) => GpuTable::upload(engine, t).await?.into(),
            AnyTable::Pruned(t) => GpuPrunedTable::upload(engine, t).await?.into(),
            AnyTable::Mixed(t) => GpuMixedTable::upload(engine, t).await?.into(),
        })
    }
}

impl GpuLookup for AnyGpuTable {
    fn rows(&self) -> usize {
        each_gpu_kind!(self, t => GpuLookup::rows(t))
    }
    fn dim(&self) -> usize {
        each_gpu_kind!(self, t => GpuLookup::dim(t))
    }
    fn bytes(&self) -> u64 {
        each_gpu_kind!(self, t => GpuLookup::bytes(t))
    }
    fn set_name(&self, name: &str) {
        each_gpu_kind!(self, t => GpuLookup::set_name(t, name))
    }
    fn engine(&self) -> Engine {
        each_gpu_kind!(self, t => GpuLookup::engine(t))
    }
    async fn prepare(&self, request: &Request<'_>) -> Result<LookupJob, Error> {
        each_gpu_kind!(self, t => GpuLookup::prepare(t, request).await)
    }
    async fn lookup(&self, request: &Request<'_>) -> Result<GpuRows, Error> {
        each_gpu_kind!(self, t => GpuLookup::lookup(t, request).await)
    }
    async fn lookup_host(&self, request: &Request<'_>) -> Result<crate::HostRows, Error> {
        each_gpu_kind!(self, t => GpuLookup::lookup_host(t, request).await)
    }
}

impl From<GpuTable> for AnyGpuTable {
    fn from(t: GpuTable) -> Self {
        AnyGpuTable::Dense(t)
    }
}
impl From<GpuPrunedTable> for AnyGpuTable {
    fn from(t: GpuPrunedTable) -> Self {
        AnyGpuTable::Pruned(t)
    }
}
impl From<GpuMixedTable> for AnyGpuTable {
    fn from(t: GpuMixedTable) -> Self {
        AnyGpuTable::Mixed(t)
    }
}
impl From<GpuCache> for AnyGpuTable {
    // In a browser nothing runs on another thread; the Arc only shares the cache.
    #[cfg_attr(web, allow(clippy::arc_with_non_send_sync))]
    fn from(t: GpuCache) -> Self {
        AnyGpuTable::Cached(Arc::new(t))
    }
}

impl Reupload for AnyGpuTable {
    type Host = AnyTable;
    async fn reupload(engine: &Engine, host: &AnyTable, _: Option<&Self>) -> Result<Self, Error> {
        AnyGpuTable::upload(engine, host).await
    }
}

super::lookup::placed_as_is!(AnyGpuTable);
