//! # edo-bench — edo's benchmark suite and measurements
//!
//! What `edo bench …` and the browser page's benchmark run, in a crate of its own so the library
//! a user depends on carries only lookups, formats, files, caches, models and the GPU path:
//!
//! - [`measure`]: medians, the device's own copy, memcpy on the CPU path's threads — what
//!   benchmarks report their figures as ratios to, measured in the same run.
//! - [`suite`]: the versioned benchmark matrix, run on any engines and the CPU path with the same
//!   async code natively and in a browser tab, its results schema, and its charts (SVG).

#![warn(missing_docs)]

pub mod measure;
pub mod suite;
