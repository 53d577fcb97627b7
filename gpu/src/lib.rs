//! edo's GPU path: a wgpu device ([`Engine`]), packed tables uploaded as storage-buffer shards
//! ([`GpuTable`]), and the kernels of the workspace's `shaders/`, with their bags, jobs and
//! readbacks. `edo` builds its table kinds (caches, hashed, pruned, mixed tables, models, the
//! Hamming search) on this crate and re-exports it as `edo::gpu`.
//!
//! Everything that waits on the GPU is `async`, because the browser cannot block; natively the
//! `*_blocking` forms and `edo::block_on` (pollster) turn each future into a plain call. Work is
//! submitted without waiting: a gather returns as soon as its dispatches are queued, and its
//! output stays in a GPU buffer the caller can bind in its own pipelines, or read back with
//! [`GpuRows::read`].
//!
//! The modules hidden from the documentation (`context`, `job`, `table`, `bag`, …) are the
//! building blocks `edo`'s table kinds are written with — public for that, not a stable API.

#![warn(missing_docs)]

/// A WGSL file of `shaders/`, as written natively; in the browser build without its comments and
/// indentation (build.rs writes those copies), since the .wasm carries every kernel's text.
#[cfg(native)]
macro_rules! wgsl {
    ($file:literal) => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../shaders/", $file))
    };
}
#[cfg(web)]
macro_rules! wgsl {
    ($file:literal) => {
        include_str!(concat!(env!("OUT_DIR"), "/shaders/", $file))
    };
}

#[doc(hidden)]
pub mod bag;
#[doc(hidden)]
pub mod context;
pub mod decoders;
#[doc(hidden)]
pub mod engine;
mod error;
#[doc(hidden)]
pub mod job;
// Live tables keep GPU copies natively only (the browser's are CPU-only).
#[cfg(native)]
#[doc(hidden)]
pub mod live;
#[doc(hidden)]
pub mod memory;
#[doc(hidden)]
pub mod oneshot;
mod options;
#[doc(hidden)]
pub mod readback;
#[doc(hidden)]
pub mod shaders;
#[doc(hidden)]
pub mod table;

pub use bag::GpuTableBatch;
pub use engine::{Engine, MAX_PREPARED_DIM, REQUIRED_LIMITS};
pub use error::{Error, Unsupported};
pub use job::{GpuRows, LookupJob};
pub use memory::{MemoryBuffer, MemoryEntry, MemoryReport};
pub use options::{AdapterSummary, EngineOptions, PressureStages};
#[doc(hidden)] // for tests/shaders.rs, which validates every kernel
pub use shaders::{kernels, Binds, Decoder, Kernel, SearchKernel, ShaderId, Shape, Src};
pub use table::GpuTable;

pub use context::*;
pub use engine::*;
pub use memory::Buffer;
pub use readback::*;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use edo_core::{bags, bounds, format, request, Bounds, Cause, Element, Format, HostRows, Layout, PackedTable};
