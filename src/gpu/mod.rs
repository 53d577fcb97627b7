//! The GPU path: edo-gpu's engine, tables and kernels (re-exported here), and the table kinds
//! edo builds on them — caches, hashed, quotient-remainder, pruned and mixed tables, static
//! models, the Hamming search — with [`GpuLookup`] over them all and [`Recoverable`] around
//! them.
//!
//! Everything that waits on the GPU is `async`, because the browser cannot block; on native,
//! [`crate::block_on`] (pollster) turns each future into a plain call.

mod any;
mod cache;
mod hash;
mod lookup;
mod mixed;
mod model;
mod prune;
mod qr;
mod recover;
mod search;

pub use any::AnyGpuTable;
pub use cache::GpuCache;
pub use edo_gpu::decoders;
#[doc(hidden)] // for tests that name kernels
pub use edo_gpu::{kernels, Binds, Decoder, Kernel, SearchKernel, ShaderId, Shape, Src};
pub use edo_gpu::{
    AdapterSummary, Engine, EngineOptions, GpuRows, GpuTable, GpuTableBatch, LookupJob, MemoryBuffer, MemoryEntry, MemoryReport, PressureStages,
    MAX_PREPARED_DIM, REQUIRED_LIMITS,
};
/// The GPU path's own errors (what the engine, its tables and jobs return); `?` and `.into()`
/// make each the [`crate::Error`] variant of the same name.
pub use edo_gpu::{Error, Unsupported};
pub use hash::{GpuHashedTable, GpuHashedTables};
pub use lookup::{GpuLookup, Placeable, Reupload};
pub use mixed::GpuMixedTable;
pub use model::GpuStaticModel;
pub use prune::GpuPrunedTable;
pub use qr::{GpuQrTable, GpuQrTables};
pub use recover::{CacheSpec, Recoverable, RecoveringEngine, RecoveryEvent, WeakRecoveringEngine};
pub use search::{GpuCodes, MAX_CANDIDATES, ONE_PASS_MAX_K};

// The engine's building blocks the kinds here are written with.
#[cfg(native)]
pub(crate) use edo_gpu::live::{GpuKeyIndex, ProbeMissing};
pub(crate) use edo_gpu::memory::Buffer;
pub(crate) use edo_gpu::{bag, job, shaders, table};
pub(crate) use edo_gpu::{context::*, readback::*};
