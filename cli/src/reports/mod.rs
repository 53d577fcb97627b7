//! What the command line reports — the demo and gather benchmark, search evaluation, error
//! statistics and pictures, the cache benchmark — built on edo's public API and `edo_bench::measure`.

pub mod bench;
pub mod cache_bench;
pub mod eval;
pub mod inspect;
