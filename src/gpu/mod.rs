//! The GPU path: a wgpu device, packed tables uploaded as storage-buffer shards, and the gather
//! kernels of `shaders/`.
//!
//! Everything that waits on the GPU is `async`, because the browser cannot block; on native,
//! [`crate::block_on`] (pollster) turns each future into a plain call. Work is submitted without
//! waiting: a gather returns as soon as its dispatches are queued, and its output stays in a GPU
//! buffer the caller can bind in its own pipelines, or read back with [`GpuRows::read`].

mod any;
mod bag;
mod cache;
mod context;
pub mod decoders;
mod engine;
mod hash;
mod job;
// Live tables keep GPU copies natively only (the browser's are CPU-only).
#[cfg(native)]
mod live;
mod lookup;
mod memory;
mod mixed;
mod model;
mod options;
mod prune;
mod qr;
mod readback;
mod recover;
mod search;
mod shaders;
mod table;

pub use any::AnyGpuTable;
pub use bag::GpuTableBatch;
pub use cache::GpuCache;
pub(crate) use context::*;
pub(crate) use engine::*;
pub use engine::{Engine, MAX_PREPARED_DIM, REQUIRED_LIMITS};
pub use hash::GpuHashedTables;
pub use job::{GpuRows, LookupJob};
#[cfg(native)]
pub(crate) use live::{GpuKeyIndex, ProbeMissing};
pub use lookup::GpuLookup;
pub(crate) use memory::Buffer;
pub use memory::{MemoryBuffer, MemoryEntry, MemoryReport};
pub use mixed::GpuMixedTable;
pub use model::GpuStaticModel;
pub use options::{AdapterSummary, EngineOptions, PressureStages};
pub use prune::GpuPrunedTable;
pub use qr::GpuQrTables;
pub(crate) use readback::*;
pub use recover::{CacheSpec, Recoverable, RecoveringEngine, RecoveryEvent, Reupload, WeakRecoveringEngine};
pub use search::{GpuCodes, MAX_CANDIDATES, ONE_PASS_MAX_K};
#[doc(hidden)] // for tests/shaders.rs, which validates every kernel
pub use shaders::{kernels, Binds, Decoder, Kernel, SearchKernel, ShaderId, Shape, Src};
pub use table::GpuTable;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::{Error, Format};
