//! # edo-core — packed embedding rows and the CPU path, with no GPU
//!
//! The bottom layer of [edo](https://docs.rs/edo): what a table is and how it is read on a CPU.
//! It has no wgpu, no tokenizer and no file reader, so it builds for every target edo runs on —
//! x86-64, aarch64, wasm32 in a browser or under WASI — and `edo` builds its GPU path, files,
//! caches and models on it (and re-exports all of this: `edo::format`, `edo::cpu`, …).
//!
//! - [`format`](mod@format) packs a row of f32 values into whole `u32` words in one of the formats (FP16,
//!   INT8 and INT4 row-wise, binary, FP8, ggml's blocks, …), the same words on the host, in files
//!   and on a GPU. Each format's scalar decoder is the oracle the fast paths are tested against.
//! - [`simd`] holds the instruction sets the decoders run on (AVX2, SSE4.1, NEON, WASM SIMD128,
//!   portable arrays), picked once at run time.
//! - [`cpu`] gathers rows and pools bags ([`Bags`]) on all cores ([`par`]).
//! - [`Bounds`] is chosen per call: refuse bad ids before any work, read them as zeros, or clamp.
//! - [`Error`] holds what can go wrong here; `edo::Error` has a variant of the same name for each.

#![warn(missing_docs)]

#[cfg(target_endian = "big")]
compile_error!("edo assumes a little-endian host: table files and GPU buffers are little-endian words");

pub mod alloc;
pub mod bags;
pub mod bounds;
pub mod cpu;
mod error;
pub mod format;
pub mod par;
pub mod request;
pub mod simd;
pub mod synth;

pub use bags::{Bags, Layout, Pooling};
pub use bounds::Bounds;
pub use error::{Cause, CauseError, Error, Unsupported};
pub use format::{Codec, Format, PackedTable};
pub use request::{Element, HostRows, IdSelect, Request, Select};
