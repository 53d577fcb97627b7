//! # edo — a portable embedding engine
//!
//! Embedding tables stored compressed (FP16, INT8 and INT4 row-wise, binary) in packed GPU storage
//! buffers, looked up by WGSL compute kernels through wgpu — Vulkan, Metal, DX12 natively and
//! WebGPU in the browser — with a pure-Rust CPU path that computes the same results.
//!
//! Design, in the order of the modules:
//! - [`format`](mod@format) is pure Rust: each format packs a row into whole `u32` words (codes, then the
//!   row's scale and bias), the same words on the host, in files and on the GPU. The format's
//!   scalar decoder is the oracle. Dequantisation is `code * scale + bias` with a product that is
//!   exact in f32, so GPU and CPU results are equal bit for bit, fused multiply-add or not.
//! - [`cpu`] runs the lookups on all cores; it is the test oracle and the fallback when there is
//!   no GPU.
//! - [`gpu`] uploads a table as one or more storage-buffer shards within the device's binding
//!   limit and gathers rows with one kernel per format. Every call is `async` (a browser cannot
//!   block); native code gets blocking wrappers through pollster.
//! - [`Bounds`] is chosen per call: refuse bad ids before any work, read them as zeros, or clamp.
//!
//! The README's example (a doctest) shows the whole API: quantise, upload, gather, read back; the
//! [`guide`] pages (`docs/*.md`) go through each part, with examples that run as doctests.

#![warn(missing_docs)]

#[cfg(target_endian = "big")]
compile_error!("edo assumes a little-endian host: table files and GPU buffers are little-endian words");

#[cfg(feature = "gpu")]
mod backend;
pub mod cache;
mod error;
pub mod file;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod hash;
pub mod live;
mod lookup;
pub mod mixed;
pub mod model;
pub mod plan;
pub mod prune;
pub mod qr;
mod request;
pub mod search;
mod source;

// The layer below: formats, SIMD levels, the CPU path (edo-core, no GPU). Its modules keep the
// paths they had in this crate (`edo::format`, `edo::cpu`, `edo::par`).
use edo_core::{alloc, bags, bounds};
pub use edo_core::{cpu, format, par};

/// (Feature `synth`, on by default; the planner uses it inside either way.)
#[cfg(feature = "synth")]
pub use edo_core::synth;
#[cfg(not(feature = "synth"))]
use edo_core::synth;

#[cfg(feature = "gpu")]
pub use backend::{Backend, Placed};
pub use bags::{Bags, Layout, Pooling};
pub use bounds::Bounds;
/// The errors of edo-core's own calls (quantising, the CPU path's lookups), before they become
/// an [`Error`] (`?` and `.into()` convert each to the variant of the same name).
pub use edo_core::{Error as CoreError, Unsupported as CoreUnsupported};
pub use error::{Cause, CauseError, Error, Unsupported};
pub use format::{Codec, Format, PackedTable};
#[cfg(feature = "gpu")]
pub use gpu::{
    AdapterSummary, AnyGpuTable, Engine, EngineOptions, GpuCache, GpuCodes, GpuHashedTable, GpuHashedTables, GpuLookup, GpuMixedTable, GpuPrunedTable,
    GpuQrTable, GpuQrTables, GpuRows, GpuStaticModel, GpuTable, GpuTableBatch, LookupJob, MemoryReport, Placeable, PressureStages, Recoverable,
    RecoveringEngine, RecoveryEvent,
};
pub use hash::HashedTable;
pub use lookup::{AnyTable, Lookup};
pub use mixed::MixedTable;
pub use prune::PrunedTable;
pub use qr::QrTable;
pub use request::{AsyncLookup, Element, HostRows, IdSelect, Request, Select};

/// Runs a future to completion on the current thread (native only; the browser awaits instead).
#[cfg(native)]
pub use pollster::block_on;

/// The README's examples run as doctests, so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The guides of `docs/`, here so that their examples run as doctests and they read as pages of
/// the API documentation.
pub mod guide {
    #[doc = include_str!("../docs/lookups.md")]
    pub mod lookups {}
    #[cfg(not(target_arch = "wasm32"))]
    #[doc = include_str!("../docs/models.md")]
    pub mod models {}
    #[doc = include_str!("../docs/files.md")]
    pub mod files {}
    #[doc = include_str!("../docs/search.md")]
    pub mod search {}
    #[doc = include_str!("../docs/caches.md")]
    pub mod caches {}
    #[doc = include_str!("../docs/live.md")]
    pub mod live {}
    #[doc = include_str!("../docs/formats.md")]
    pub mod formats {}
    #[doc = include_str!("../docs/browser.md")]
    pub mod browser {}
    #[doc = include_str!("../docs/benchmarks.md")]
    pub mod benchmarks {}
    #[doc = include_str!("../docs/edge.md")]
    pub mod edge {}
}
