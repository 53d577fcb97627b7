//! The GPU path against the CPU oracle. All GPU tests live in this one binary.
//!
//! Without an adapter every test prints `SKIPPED: no adapter` and returns; with
//! `EDO_REQUIRE_GPU=1` (CI, on lavapipe) a missing adapter fails the test instead.
//!
//! One binary (wgpu's `tests/tests/root.rs` pattern), one module per operation.

mod aligned;
mod backend;
mod bags;
mod cache;
mod device;
mod f16_output;
mod gather;
mod gguf;
mod hashing;
mod live;
mod lookup;
mod mixed;
mod model;
mod recover;
mod search;
mod tables;

use edo::hash::{HashSpec, HashedBags};
use edo::qr::QrCombine;
use edo::synth::{embedding_table, uniform_ids};
use edo::GpuHashedTables;
use edo::GpuQrTables;
use edo::{block_on, Bounds, Engine, EngineOptions, Error, Format, GpuLookup, GpuTable, Lookup, PackedTable};
use edo::{AnyGpuTable, AnyTable};
use edo::{Bags, GpuTableBatch, Layout, Pooling};
use edo::{GpuPrunedTable, PrunedTable};
use std::sync::OnceLock;

/// A value no kernel computes: outputs are pre-filled with it, so a row a kernel failed to write
/// cannot pass for a correct zero row.
const SENTINEL: f32 = -7777.25;

fn require_gpu() -> bool {
    std::env::var("EDO_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// An engine with these options, or `None` after a loud skip (a failure under EDO_REQUIRE_GPU=1).
fn engine_with(options: EngineOptions) -> Option<Engine> {
    match Engine::new_blocking(options) {
        Ok(e) => Some(e),
        Err(edo::gpu::Error::NoAdapter) if !require_gpu() => {
            eprintln!("SKIPPED: no adapter");
            None
        }
        Err(e) => panic!("no usable GPU ({e}); EDO_REQUIRE_GPU=1 makes this a failure"),
    }
}

/// The default engine, shared by the tests that need no special options.
fn engine() -> Option<Engine> {
    static ENGINE: OnceLock<Option<Engine>> = OnceLock::new();
    ENGINE.get_or_init(|| engine_with(EngineOptions::default())).clone()
}

/// Gathers on the GPU into a sentinel-filled output and reads it back.
fn gpu_gather(table: &GpuTable, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
    let job = block_on(table.prepare_gather(ids, bounds))?;
    job.output().fill(SENTINEL)?;
    job.submit()?;
    // The job's inputs go before the readback, as a caller's would: the budget tests count on it.
    Ok(job.into_output().read_blocking()?)
}

/// Bit-exact comparison, with the first difference in the message.
fn assert_bits_eq(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a.to_bits() != b.to_bits()) {
        let sentinels = got.iter().filter(|&&v| v == SENTINEL).count();
        panic!("{what}: first difference at value {i}: GPU {} vs CPU {} ({sentinels} values never written)", got[i], want[i]);
    }
}

/// Ids with some out of range (for Zero and Clamp) at varied positions.
fn ids_with_bad(n: usize, rows: usize, seed: u64) -> Vec<u32> {
    let mut ids = uniform_ids(n, rows, seed);
    for (k, id) in ids.iter_mut().enumerate() {
        if k % 97 == 13 {
            *id = rows as u32 + (k as u32 % 5);
        }
        if k % 331 == 7 {
            *id = u32::MAX;
        }
    }
    ids
}

/// Random bags over `rows` rows, some empty, some with bad indices when `bad` is set.
fn random_bags(n_bags: usize, rows: usize, max_len: u32, bad: bool, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let mut rng = edo::synth::Rng::new(seed);
    let mut indices = Vec::new();
    let mut offsets = Vec::new();
    for b in 0..n_bags {
        offsets.push(indices.len() as u32);
        let len = if b % 11 == 5 { 0 } else { rng.below(max_len + 1) };
        for _ in 0..len {
            let id = if bad && rng.below(13) == 0 { rows as u32 + rng.below(3) } else { rng.below(rows as u32) };
            indices.push(id);
        }
    }
    offsets.push(indices.len() as u32);
    (indices, offsets)
}

/// Pooled values agree within a documented tolerance: the GPU sums in the same order on one shard,
/// but a driver may fuse `acc + w·x`, and several shards add partial sums. |GPU − CPU| ≤
/// 4·n·ε·Σ|wᵢ·xᵢ|, bounded here by n·max|w|·max|x| per bag. Max pooling is exact (up to the
/// sign of a zero).
fn assert_pooled_close(got: &[f32], want: &[f32], max_len: f32, max_abs: f32, exact: bool, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let tol = 4.0 * max_len * f32::EPSILON * (max_len * max_abs);
    for (i, (&g, &c)) in got.iter().zip(want).enumerate() {
        assert!(g != SENTINEL, "{what}: value {i} never written");
        if exact {
            // Exact, but for the sign of a zero: max(−0, +0) may be either (IEEE 754 leaves it
            // open), and zero rows of bad ids or products with a zero row meet both.
            assert!(g == c, "{what}: value {i}: {g} vs {c} (max pooling is exact)");
        } else {
            assert!((g - c).abs() <= tol, "{what}: value {i}: GPU {g} vs CPU {c}, tolerance {tol}");
        }
    }
}

fn run_job(job: edo::LookupJob) -> Vec<f32> {
    job.output().fill(SENTINEL).unwrap();
    job.submit().unwrap();
    job.output().read_blocking().unwrap()
}
