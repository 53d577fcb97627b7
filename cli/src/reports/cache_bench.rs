//! The cache benchmark: a table several times larger than the cache under an id stream — Zipf,
//! Zipf with a scan mixed in, Zipf whose hot set moves, or a trace of real lookups — hit rate per
//! policy beside Belady's offline bound, lookups/s against the fully resident table in the same
//! run, and bytes uploaded per lookup.

use std::time::Instant;

use serde::Serialize;

use edo::cache::{belady, PolicyKind};
use edo::GpuLookup;
use edo::{Bounds, Engine, Error, Format, GpuCache, GpuTable, PackedTable};

use crate::{exit, Failure};

#[derive(Clone, Debug)]
/// What the cache benchmark runs.
pub struct CacheBenchConfig {
    /// Rows of the synthetic host table.
    pub rows: usize,
    /// Values per row.
    pub dim: usize,
    /// The table's format.
    pub format: Format,
    /// Zipf exponent of the id stream.
    pub zipf: f64,
    /// Ids per lookup.
    pub batch: usize,
    /// Batches that warm the cache before the timed ones (not counted).
    pub warmup_batches: usize,
    /// Timed batches.
    pub batches: usize,
    /// Cache sizes as fractions of the rows.
    pub fractions: Vec<f64>,
    /// Replacement policies to compare.
    pub policies: Vec<PolicyKind>,
    /// The id stream.
    pub stream: Stream,
}

/// The id stream of the cache benchmark.
#[derive(Clone, Debug)]
pub enum Stream {
    /// Zipf ids ([`edo::synth::zipf_ids`]).
    Zipf,
    /// Zipf ids with a share of them a scan of the whole table ([`edo::synth::scan_mixed_zipf_ids`]).
    Scan(f64),
    /// Zipf ids whose hot set moves every so many ids ([`edo::synth::drifting_zipf_ids`]).
    Drift(usize),
    /// A trace of real lookups (its name, its ids), replayed whole: its first half warms the
    /// caches, the rest is timed.
    Trace(String, Vec<u32>),
}

impl Stream {
    /// How the stream is named in reports.
    pub fn describe(&self, zipf: f64) -> String {
        match self {
            Stream::Zipf => format!("Zipf({zipf}) ids"),
            Stream::Scan(share) => format!("Zipf({zipf}) ids, {:.0} % of them a scan of the table", 100.0 * share),
            Stream::Drift(period) => format!("Zipf({zipf}) ids whose hot set moves every {period} ids"),
            Stream::Trace(name, ids) => format!("the trace {name} ({} ids)", ids.len()),
        }
    }
}

impl Default for CacheBenchConfig {
    fn default() -> Self {
        CacheBenchConfig {
            rows: 1_000_000,
            dim: 64,
            format: Format::Int8,
            zipf: 1.05,
            batch: 4096,
            warmup_batches: 1000,
            batches: 250,
            fractions: vec![0.25, 0.10],
            policies: PolicyKind::ALL.to_vec(),
            stream: Stream::Zipf,
        }
    }
}

/// One cache configuration's figures.
#[derive(Clone, Debug, Serialize)]
pub struct CacheRun {
    /// The policy's name.
    pub policy: String,
    /// Whether each batch's rows were prefetched during the one before.
    pub prefetch: bool,
    /// Slots, and their share of the rows.
    pub capacity: usize,
    /// The cache's share of the table's rows.
    pub fraction: f64,
    /// Bytes of the cache's slots.
    pub cache_bytes: u64,
    /// Ids served from the cache, over all ids.
    pub hit_rate: f64,
    /// Rows evicted.
    pub evictions: u64,
    /// Bytes uploaded per id looked up.
    pub bytes_uploaded_per_lookup: f64,
    /// Share of the misses a prefetch had staged (copied on the GPU, not read at lookup time).
    pub staged_share_of_misses: f64,
    /// Measured on the GPU, or without one on the CPU path's row cache in host memory
    /// ([`edo::cache::HostCache`]).
    pub lookups_per_second: Option<f64>,
    /// `lookups_per_second` over the fully resident table's on the same batches, each cached
    /// batch timed right after the resident table's gather of it.
    pub ratio_to_resident: Option<f64>,
    /// Median time of a cached batch (host bookkeeping, reads, upload and gather, waited for),
    /// in seconds.
    pub batch_p50_s: Option<f64>,
    /// 99th percentile of a cached batch's time, in seconds.
    pub batch_p99_s: Option<f64>,
    /// Median time of the resident table's gather of the same batches, in seconds.
    pub resident_batch_p50_s: Option<f64>,
    /// 99th percentile of the resident table's, in seconds.
    pub resident_batch_p99_s: Option<f64>,
}

/// The `q` quantile (0..=1) of `times`, by rank.
fn quantile(times: &[f64], q: f64) -> Option<f64> {
    let mut t = times.to_vec();
    t.sort_by(f64::total_cmp);
    t.get(((q * t.len() as f64).ceil() as usize).clamp(1, t.len().max(1)) - 1).copied()
}

#[derive(Clone, Debug, Serialize)]
/// The cache benchmark's figures.
pub struct CacheBench {
    /// Rows of the host table.
    pub rows: usize,
    /// Values per row.
    pub dim: usize,
    /// The table's format.
    pub format: String,
    /// Zipf exponent of the id stream.
    pub zipf: f64,
    /// The id stream, in words.
    pub stream: String,
    /// Ids per batch.
    pub batch: usize,
    /// Batches that warmed the caches first.
    pub warmup_batches: usize,
    /// Timed batches.
    pub batches: usize,
    /// Bytes of the whole table in its format.
    pub table_bytes: u64,
    /// The adapter the lookup rates come from (None: the CPU path).
    pub adapter: Option<String>,
    /// Lookups per second of the fully resident table on the same batches.
    pub resident_lookups_per_second: Option<f64>,
    /// Whether every cached lookup's last batch equals the resident table's, bit for bit.
    pub equals_resident: Option<bool>,
    /// Per fraction: the expected hit rate of a static cache of the most probable rows, the
    /// best a cache can do on an independent Zipf stream (a stationary Zipf stream only).
    pub static_optimum: Vec<(f64, f64)>,
    /// Per fraction: Belady's offline bound on the timed ids of this very stream (it knows the
    /// future: no online policy reaches it).
    pub belady: Vec<(f64, f64)>,
    /// One run per policy, cache size and prefetch setting.
    pub runs: Vec<CacheRun>,
}

/// Runs the benchmark; `progress` hears what is being measured.
/// Fails with a usage error when the shape leaves nothing to measure (a zero size, or warm-up
/// batches that take every batch), and with edo's error when a lookup fails.
pub fn run(config: &CacheBenchConfig, engine: Option<&Engine>, mut progress: impl FnMut(&str)) -> Result<CacheBench, Failure> {
    let (rows, dim) = (config.rows, config.dim);
    if rows == 0 || dim == 0 || config.batch == 0 || config.batches == 0 {
        return Err(Failure::new(exit::USAGE, "a cache benchmark needs rows, dim, batch and batches ≥ 1"));
    }
    progress("generating and quantising the table");
    let data = edo::synth::embedding_table(rows, dim, 1);
    let table = PackedTable::quantize(config.format, &data, rows, dim)?;
    drop(data);
    let n = (config.warmup_batches + config.batches) * config.batch;
    let ids = match &config.stream {
        Stream::Zipf => edo::synth::zipf_ids(n, rows, config.zipf, 2),
        Stream::Scan(share) => edo::synth::scan_mixed_zipf_ids(n, rows, config.zipf, *share, 2),
        Stream::Drift(period) => edo::synth::drifting_zipf_ids(n, rows, config.zipf, *period, 2),
        Stream::Trace(_, ids) => {
            if let Some((index, &id)) = ids.iter().enumerate().find(|(_, &id)| id as usize >= rows) {
                return Err(Error::IdOutOfRange { index, id, rows }.into());
            }
            ids.clone()
        }
    };
    let batches: Vec<&[u32]> = ids.chunks(config.batch).collect();
    // A trace is replayed whole: its first half of batches warms, the rest is timed.
    let warmup_batches = match config.stream {
        Stream::Trace(..) => batches.len() / 2,
        _ => config.warmup_batches,
    };
    if warmup_batches >= batches.len() {
        return Err(Failure::new(exit::USAGE, format!("a cache benchmark needs more batches than the {warmup_batches} it warms up with")));
    }
    let warm = (warmup_batches * config.batch).min(ids.len());
    let timed_batches = &batches[warmup_batches..];

    let timed_ids = (ids.len() - warm) as f64;
    // A static cache of the most probable rows: the best expected hit rate on an independent
    // Zipf stream (a finite stream's own most frequent rows would overfit it).
    let static_optimum = if matches!(config.stream, Stream::Zipf) {
        let weights: Vec<f64> = (1..=rows).map(|k| (k as f64).powf(-config.zipf)).collect();
        let total: f64 = weights.iter().sum();
        config.fractions.iter().map(|&f| (f, weights[..capacity_of(f, rows)].iter().sum::<f64>() / total)).collect()
    } else {
        Vec::new()
    };
    progress("Belady's offline bound");
    let belady = config.fractions.iter().map(|&f| (f, belady(&ids, capacity_of(f, rows), warm).hit_rate())).collect();

    let mut bench = CacheBench {
        rows,
        dim,
        format: config.format.name().to_string(),
        zipf: config.zipf,
        stream: config.stream.describe(config.zipf),
        batch: config.batch,
        warmup_batches,
        batches: timed_batches.len(),
        table_bytes: table.bytes(),
        adapter: engine.map(|e| e.adapter().to_string()),
        resident_lookups_per_second: None,
        equals_resident: None,
        static_optimum,
        belady,
        runs: Vec::new(),
    };

    let Some(engine) = engine else {
        // The CPU path: a row cache in host memory (what `Backend::place` makes of a cache without
        // a GPU), each batch timed beside the resident table's gather of it.
        let want = edo::cpu::gather(&table, timed_batches.last().expect("batches ≥ 1"), Bounds::Error)?;
        let (mut equal, mut resident_seconds) = (true, 0.0);
        for &fraction in &config.fractions {
            for &policy in &config.policies {
                progress(&format!("{policy} at {:.0} % of the rows, in host memory (the CPU path)", 100.0 * fraction));
                let capacity = capacity_of(fraction, rows);
                let cache = edo::cache::HostCache::new(edo::cache::CacheSpec { source: &table, capacity, policy })?;
                for b in &batches[..warmup_batches] {
                    edo::block_on(cache.gather(b, Bounds::Error))?;
                }
                cache.reset_stats();
                let (mut cached_each, mut resident_each, mut last_out) = (Vec::new(), Vec::new(), None);
                for b in timed_batches {
                    let t = Instant::now();
                    std::hint::black_box(edo::cpu::gather(&table, b, Bounds::Error)?);
                    resident_each.push(t.elapsed().as_secs_f64());
                    let t = Instant::now();
                    last_out = Some(std::hint::black_box(edo::block_on(cache.gather(b, Bounds::Error))?));
                    cached_each.push(t.elapsed().as_secs_f64());
                }
                equal &= last_out.as_deref().is_some_and(|got| got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()));
                resident_seconds += resident_each.iter().sum::<f64>();
                let run = Timed { cached: &cached_each, resident: &resident_each, ids: timed_ids };
                bench.runs.push(run.into_run(policy, false, capacity, fraction, cache.bytes(), cache.stats()));
            }
        }
        bench.resident_lookups_per_second = Some(timed_ids * bench.runs.len() as f64 / resident_seconds);
        bench.equals_resident = Some(equal);
        return Ok(bench);
    };

    progress("the fully resident table");
    let resident = edo::block_on(GpuTable::upload(engine, &table))?;
    let last = *timed_batches.last().expect("batches ≥ 1");
    let want = edo::block_on(resident.gather(last, Bounds::Error))?.read_blocking()?;
    for b in &batches[..warmup_batches.min(3)] {
        edo::block_on(resident.gather(b, Bounds::Error))?;
    }
    engine.wait_idle()?;

    // Each cached batch is timed next to the resident table's gather of the same batch, so the
    // ratio compares the two under the same conditions even on a busy, drifting machine.
    let mut equal = true;
    let mut resident_seconds = 0.0;
    for &fraction in &config.fractions {
        let capacity = capacity_of(fraction, rows);
        let mut variants: Vec<(PolicyKind, bool)> = config.policies.iter().map(|&p| (p, false)).collect();
        if let Some(&best) = config.policies.iter().find(|&&p| p == PolicyKind::Lfu).or(config.policies.first()) {
            variants.push((best, true));
        }
        for (policy, prefetch) in variants {
            progress(&format!("{policy}{} at {:.0} % of the rows", if prefetch { " + prefetch" } else { "" }, 100.0 * fraction));
            let cache = edo::block_on(GpuCache::new(engine, &table, capacity, policy.build()))?;
            for b in &batches[..warmup_batches] {
                edo::block_on(cache.gather(b, Bounds::Error))?;
                engine.wait_idle()?;
            }
            cache.reset_stats();
            let (mut cached_each, mut resident_each) = (Vec::new(), Vec::new());
            let mut last_out = None;
            for (i, b) in timed_batches.iter().enumerate() {
                let t = Instant::now();
                edo::block_on(resident.gather(b, Bounds::Error))?;
                engine.wait_idle()?;
                resident_each.push(t.elapsed().as_secs_f64());
                let t = Instant::now();
                let out = edo::block_on(cache.gather(b, Bounds::Error))?;
                if prefetch {
                    if let Some(next) = timed_batches.get(i + 1) {
                        edo::block_on(cache.prefetch(next))?;
                    }
                }
                engine.wait_idle()?;
                cached_each.push(t.elapsed().as_secs_f64());
                if i + 1 == timed_batches.len() {
                    last_out = Some(out);
                }
            }
            resident_seconds += resident_each.iter().sum::<f64>();
            let s = cache.stats();
            let got = last_out.expect("batches ≥ 1").read_blocking()?;
            equal &= got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()) && got.len() == want.len();
            let run = Timed { cached: &cached_each, resident: &resident_each, ids: timed_ids };
            bench.runs.push(run.into_run(policy, prefetch, capacity, fraction, cache.bytes(), s));
        }
    }
    bench.resident_lookups_per_second = Some(timed_ids * bench.runs.len() as f64 / resident_seconds);
    bench.equals_resident = Some(equal);
    Ok(bench)
}

/// The times of one cache's timed batches and of the resident table's gathers of the same
/// batches, over `ids` looked-up ids: the figures of a run, on the GPU or the CPU path.
struct Timed<'a> {
    cached: &'a [f64],
    resident: &'a [f64],
    ids: f64,
}

impl Timed<'_> {
    fn into_run(self, policy: PolicyKind, prefetch: bool, capacity: usize, fraction: f64, cache_bytes: u64, s: edo::cache::CacheStats) -> CacheRun {
        let (cached_s, resident_s) = (self.cached.iter().sum::<f64>(), self.resident.iter().sum::<f64>());
        CacheRun {
            policy: policy.name().into(),
            prefetch,
            capacity,
            fraction,
            cache_bytes,
            hit_rate: s.hit_rate(),
            evictions: s.evictions,
            bytes_uploaded_per_lookup: s.bytes_uploaded as f64 / s.lookups.max(1) as f64,
            staged_share_of_misses: s.served_from_staging as f64 / s.misses.max(1) as f64,
            lookups_per_second: Some(self.ids / cached_s),
            ratio_to_resident: Some(resident_s / cached_s),
            batch_p50_s: quantile(self.cached, 0.5),
            batch_p99_s: quantile(self.cached, 0.99),
            resident_batch_p50_s: quantile(self.resident, 0.5),
            resident_batch_p99_s: quantile(self.resident, 0.99),
        }
    }
}

fn capacity_of(fraction: f64, rows: usize) -> usize {
    ((fraction * rows as f64).round() as usize).clamp(1, rows)
}
