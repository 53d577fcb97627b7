//! `edo update` (replay an update log into a table file) and `edo bench live` (inserts, updates,
//! lookups beside an update stream, and swaps of a live table, timed).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use edo::live::{KeyLookup, LiveOptions, LiveTable, Missing, UpdateLog};
use edo::Format;

use crate::{exit, Failure, FormatParser};

#[derive(Args)]
pub struct UpdateArgs {
    /// The table: an .edo file, keyed (a live table's snapshot) or plain (row i is key i).
    table: PathBuf,
    /// The update log to replay (the EDOUPDT1 format of `edo::live::UpdateLog`), batch by batch.
    updates: PathBuf,
    /// Where to write the updated table (a keyed .edo file) [default: over TABLE].
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// The most keys the table may hold; past it, new keys evict the least recently used.
    #[arg(long)]
    max_rows: Option<usize>,
}

pub fn update(a: UpdateArgs) -> Result<(), Failure> {
    let file = edo::file::TableFile::open_stored(&a.table)?;
    let (format, dim) = (file.table().format(), file.table().dim());
    let mut options = LiveOptions::new(format, dim).capacity(file.table().rows().max(1));
    if let Some(m) = a.max_rows {
        options = options.max_rows(m);
    }
    let table = LiveTable::from_file(&file, options)?;
    drop(file);
    let log = UpdateLog::read(&a.updates)?;
    let before = table.len();
    let reports = table.apply_log(&log)?;
    let (inserted, evicted): (usize, usize) = reports.iter().fold((0, 0), |(i, e), r| (i + r.inserted, e + r.evicted));
    let out = a.output.as_ref().unwrap_or(&a.table);
    table.snapshot()?.write(out)?;
    println!(
        "{}: {} batches, {} rows applied ({inserted} new keys, {evicted} evicted); {before} → {} keys of {format} dim {dim}, written to {}",
        a.updates.display(),
        reports.len(),
        log.batches().iter().map(|(k, _)| k.len()).sum::<usize>(),
        table.len(),
        out.display()
    );
    Ok(())
}

#[derive(Args)]
pub struct LiveBenchArgs {
    /// Keys the table holds before lookups are timed.
    #[arg(long, default_value_t = 1_000_000)]
    keys: usize,
    /// Values per row.
    #[arg(long, default_value_t = 64)]
    dim: usize,
    /// The rows' format.
    #[arg(long, default_value = "int8", value_parser = FormatParser)]
    format: Format,
    /// Keys per timed lookup.
    #[arg(long, default_value_t = 1024)]
    batch: usize,
    /// Seconds each latency phase runs.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// The share of the lookups' bandwidth (rows/s) the concurrent update stream writes.
    #[arg(long, default_value_t = 0.1)]
    update_share: f64,
    /// Run the CPU path only, even when a GPU is present.
    #[arg(long)]
    cpu: bool,
}

/// A key of the benchmark's table (spread over 64 bits, as item ids and hashes are).
fn key(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Lookup latencies (ms, sorted) of `batch` random keys of the first `keys`, for `seconds`.
fn latencies(t: &LiveTable, keys: usize, batch: usize, seconds: f64, seed: u64) -> Result<Vec<f64>, Failure> {
    let mut rng = edo::synth::Rng::new(seed);
    let mut out = Vec::new();
    let start = Instant::now();
    let mut lookup: Vec<u64> = vec![0; batch];
    while start.elapsed().as_secs_f64() < seconds || out.len() < 20 {
        for k in lookup.iter_mut() {
            *k = key(rng.below(keys as u32) as u64);
        }
        let t0 = Instant::now();
        std::hint::black_box(t.gather(&lookup, Missing::Error)?);
        out.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    out.sort_by(f64::total_cmp);
    Ok(out)
}

pub fn live_bench(a: LiveBenchArgs) -> Result<(), Failure> {
    if a.keys == 0
        || a.dim == 0
        || a.batch == 0
        || a.keys > u32::MAX as usize / 2
        || a.seconds.is_nan()
        || a.seconds <= 0.0
        || !(0.0..=1.0).contains(&a.update_share)
    {
        return Err(Failure::new(exit::USAGE, "--keys (≤ 2^31 − 1), --dim, --batch and --seconds must be positive, --update-share in [0, 1]"));
    }
    let (dim, format) = (a.dim, a.format);
    let t = LiveTable::new(LiveOptions::new(format, dim))?;
    println!("edo bench live: {} keys of {format} dim {dim} on the CPU path, {} threads; lookups of {} keys", a.keys, edo_bench::measure::threads(), a.batch);

    // Filling the table: inserts through updates, in batches of 100 000.
    let rows = edo::synth::embedding_table(100_000, dim, 1);
    let t0 = Instant::now();
    let mut done = 0;
    while done < a.keys {
        let n = (a.keys - done).min(100_000);
        let keys: Vec<u64> = (done..done + n).map(|i| key(i as u64)).collect();
        t.update(&keys, &rows[..n * dim])?;
        done += n;
    }
    let fill = t0.elapsed().as_secs_f64();
    println!("fill: {:.2} M new rows/s (updates of 100 000 keys, growing the table from 1 024 slots)", a.keys as f64 / fill / 1e6);

    // Inserts and updates by batch size.
    println!("{:>8}  {:>14}  {:>14}  {:>14}", "batch", "inserts/s", "updates/s", "lookups/s (keys)");
    let mut next = a.keys as u64;
    for batch in [1usize, 1000, 100_000] {
        let reps = (200_000 / batch).clamp(3, 2000);
        let new_keys: Vec<Vec<u64>> = (0..reps).map(|r| (0..batch as u64).map(|i| key(next + r as u64 * batch as u64 + i)).collect()).collect();
        next += (reps * batch) as u64;
        let t0 = Instant::now();
        for k in &new_keys {
            std::hint::black_box(t.find_or_insert(k)?);
        }
        let inserts = (reps * batch) as f64 / t0.elapsed().as_secs_f64();
        let values = &rows[..batch.min(100_000) * dim];
        let old: Vec<Vec<u64>> = (0..reps).map(|r| (0..batch as u64).map(|i| key((r as u64 * 7919 + i * 104_729) % a.keys as u64)).collect()).collect();
        let t0 = Instant::now();
        for k in &old {
            t.update(k, values)?;
        }
        let updates = (reps * batch) as f64 / t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        for k in &old {
            std::hint::black_box(t.gather(k, Missing::Error)?);
        }
        let lookups = (reps * batch) as f64 / t0.elapsed().as_secs_f64();
        println!("{batch:>8}  {:>14.0}  {:>14.0}  {:>14.0}", inserts, updates, lookups);
    }

    // Lookup latency, quiet and beside an update stream.
    let quiet = latencies(&t, a.keys, a.batch, a.seconds, 11)?;
    let (p50, p99) = (percentile(&quiet, 0.5), percentile(&quiet, 0.99));
    let rows_per_s = a.batch as f64 / (quiet.iter().sum::<f64>() / quiet.len() as f64 / 1e3);
    let update_rows_per_s = rows_per_s * a.update_share;
    let stop = AtomicBool::new(false);
    let (busy, written) = std::thread::scope(|s| -> Result<(Vec<f64>, usize), Failure> {
        let updater = s.spawn(|| -> Result<usize, edo::Error> {
            // Batches of 100 rows, paced to the target rate.
            let start = Instant::now();
            let mut written = 0usize;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let due = (start.elapsed().as_secs_f64() * update_rows_per_s) as usize;
                if written + 100 > due {
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                }
                let keys: Vec<u64> = (0..100u64).map(|j| key((i * 100 + j) * 7 % a.keys as u64)).collect();
                t.update(&keys, &rows[..100 * dim])?;
                written += 100;
                i += 1;
            }
            Ok(written)
        });
        let busy = latencies(&t, a.keys, a.batch, a.seconds, 12);
        stop.store(true, Ordering::Relaxed);
        let written = updater.join().map_err(|_| Failure::new(exit::FAILURE, "the updater panicked"))??;
        Ok((busy?, written))
    })?;
    let (b50, b99) = (percentile(&busy, 0.5), percentile(&busy, 0.99));
    println!(
        "lookups of {} keys: quiet P50 {p50:.3} ms, P99 {p99:.3} ms; beside {:.0} updated rows/s ({:.0} % of the lookups' {:.2} M rows/s; {written} written): P50 {b50:.3} ms, P99 {b99:.3} ms — P99 {:.2}× the quiet one (goal ≤ 1.5×)",
        a.batch,
        written as f64 / a.seconds,
        a.update_share * 100.0,
        rows_per_s / 1e6,
        b99 / p99
    );

    // Swaps: the longest lookup while whole tables are swapped in.
    let snapshot = t.snapshot()?.to_bytes();
    let snapshot_mb = snapshot.len() as f64 / 1e6;
    let stop = AtomicBool::new(false);
    let (during, swaps, swap_ms, pause_ms) = std::thread::scope(|s| -> Result<(Vec<f64>, usize, f64, f64), Failure> {
        let swapper = s.spawn(|| -> Result<(usize, f64, f64), edo::Error> {
            let (mut n, mut total, mut pause) = (0, 0.0, 0.0f64);
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                let report = t.swap_bytes(snapshot.clone())?;
                total += t0.elapsed().as_secs_f64() * 1e3;
                pause = pause.max(report.pause.as_secs_f64() * 1e3);
                n += 1;
            }
            Ok((n, total, pause))
        });
        let during = latencies(&t, a.keys, a.batch, a.seconds, 13);
        stop.store(true, Ordering::Relaxed);
        let (n, total, pause) = swapper.join().map_err(|_| Failure::new(exit::FAILURE, "the swapper panicked"))??;
        Ok((during?, n, total / n.max(1) as f64, pause))
    })?;
    let longest = during.last().copied().unwrap_or(f64::NAN);
    println!(
        "swaps of a {snapshot_mb:.0} MB snapshot ({swaps} swaps, {swap_ms:.0} ms each to load, verify and install): the longest pause of lookups {pause_ms:.3} ms = {:.2}× the quiet P50 lookup (goal ≤ 1 lookup: the lookups running, then the exchange); lookups meanwhile P50 {:.3} ms, P99 {:.3} ms, longest {longest:.3} ms (the load's CPU work shares the cores)",
        pause_ms / p50,
        percentile(&during, 0.5),
        percentile(&during, 0.99),
    );
    if !a.cpu {
        gpu_part(&t, &a)?;
    }
    Ok(())
}

fn gpu_part(t: &LiveTable, a: &LiveBenchArgs) -> Result<(), Failure> {
    let engine = match edo::Engine::new_blocking(Default::default()) {
        Ok(e) => e,
        Err(e) => {
            println!("GPU: none ({e})");
            return Ok(());
        }
    };
    t.attach_gpu(&engine)?;
    println!("GPU: {} — a copy of the table attached ({:.0} MB)", engine.adapter(), t.bytes() as f64 / 1e6);
    // Each lookup size both ways: keys translated on the host (their rows uploaded), and the
    // kernel probing the GPU's index (the keys uploaded); unknown keys read zeros, as the probe
    // needs (an unknown key that is an error is always the host's to refuse).
    println!(
        "{:>8}  {:>14}  {:>14}  {:>14}  {:>14}  {:>12}  {:>12}",
        "keys", "host: build", "host: whole", "probe: build", "probe: whole", "inserts/s", "updates/s"
    );
    let rows = edo::synth::embedding_table(1000, a.dim, 3);
    let mut next = u32::MAX as u64;
    let mut slowest_insert = f64::INFINITY;
    for n in [1usize, 1000, 100_000] {
        let keys: Vec<u64> = (0..n as u64).map(|i| key(i * 13 % a.keys as u64)).collect();
        let reps = (100_000 / n).clamp(5, 200);
        // [host build, host whole, probe build, probe whole], alternating the two ways.
        let mut times: [Vec<f64>; 4] = Default::default();
        for _ in 0..reps {
            for (way, how) in [KeyLookup::Host, KeyLookup::Gpu].into_iter().enumerate() {
                t.set_key_lookup(how);
                let t0 = Instant::now();
                t.gather_gpu_with(&keys, Missing::Zero, |job| Ok(std::hint::black_box(job).output().rows()))?;
                times[2 * way].push(t0.elapsed().as_secs_f64() * 1e3);
                let t0 = Instant::now();
                std::hint::black_box(t.gather_gpu(&keys, Missing::Zero)?.read_blocking()?);
                times[2 * way + 1].push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        t.set_key_lookup(KeyLookup::Auto);
        let [host_build, host_whole, probe_build, probe_whole] = times.map(edo_bench::measure::median);
        // Inserts and updates of up to 1 000 keys a call, the median of 20 calls (a call that
        // grows the table uploads it again: the slowest, reported apart).
        let batch = n.min(1000);
        let (mut ins, mut upd) = (Vec::new(), Vec::new());
        for _ in 0..20 {
            let inserts: Vec<u64> = (0..batch as u64).map(|i| key(next + i)).collect();
            next += batch as u64;
            let t0 = Instant::now();
            t.find_or_insert(&inserts)?;
            ins.push(batch as f64 / t0.elapsed().as_secs_f64());
            let t0 = Instant::now();
            t.update(&keys[..batch], &rows[..batch * a.dim])?;
            upd.push(batch as f64 / t0.elapsed().as_secs_f64());
        }
        slowest_insert = slowest_insert.min(ins.iter().copied().fold(f64::INFINITY, f64::min) / batch as f64);
        let (ins, upd) = (edo_bench::measure::median(ins), edo_bench::measure::median(upd));
        println!("{n:>8}  {host_build:>11.3} ms  {host_whole:>11.3} ms  {probe_build:>11.3} ms  {probe_whole:>11.3} ms  {ins:>12.0}  {upd:>12.0}");
    }
    println!(
        "inserts and updates: the median of 20 calls of min(keys, 1 000); the slowest call {:.1} ms (a call that grows the slots uploads the whole table again under the write lock)",
        1e3 / slowest_insert
    );
    Ok(())
}

#[derive(Args)]
pub struct TieringBenchArgs {
    /// A float table to tier (safetensors, .npy; WordLlama's `weights.safetensors`, …) instead
    /// of a synthetic one.
    #[arg(long)]
    table: Option<PathBuf>,
    /// The tensor of --table to read, when it holds several.
    #[arg(long)]
    tensor: Option<String>,
    /// Rows of the synthetic table.
    #[arg(long, default_value_t = 200_000)]
    rows: usize,
    /// Values per row of the synthetic table.
    #[arg(long, default_value_t = 256)]
    dim: usize,
    /// The synthetic id stream: zipf (stationary) or drift (Zipf whose hot set moves every
    /// eighth of the stream).
    #[arg(long, default_value = "drift", value_parser = ["zipf", "drift"])]
    stream: String,
    /// Zipf exponent of the synthetic stream.
    #[arg(long, default_value_t = 1.05)]
    zipf: f64,
    /// Ids in the synthetic stream.
    #[arg(long, default_value_t = 2_000_000)]
    ids: usize,
    /// Replay a trace of real lookups instead (one id a line, or a 1-D .npy: scripts/fixtures/make_trace.py).
    #[arg(long, conflicts_with = "stream")]
    trace: Option<PathBuf>,
    /// Ids per lookup.
    #[arg(long, default_value_t = 4096)]
    batch: usize,
    /// Re-tier after every so many lookups.
    #[arg(long, default_value_t = 4)]
    retier_every: usize,
    /// Rows promoted per re-tiering at most [default: 1 % of the rows].
    #[arg(long)]
    max_moves: Option<usize>,
    /// Lookups after which the counts halve [default: 4 × the rows].
    #[arg(long)]
    half_life: Option<u64>,
    /// Tierings to compare, most precise format first, each as formats joined by `/`.
    #[arg(long, value_delimiter = ',', default_value = "fp16/q6_k,fp16/q5_1,fp16/q4_k,fp16/int8/q4_k,fp16/int4")]
    tiers: Vec<String>,
}

/// Per looked-up row: ‖read − source‖ / ‖source‖, summed, and the squared errors and norms.
#[derive(Default, Clone, Copy)]
struct ErrorSum {
    relative: f64,
    squared: f64,
    norm: f64,
    rows: usize,
}

impl ErrorSum {
    fn add(&mut self, source: &[f32], dim: usize, ids: &[u32], got: &[f32]) {
        for (&id, row) in ids.iter().zip(got.chunks_exact(dim)) {
            let (mut e, mut n) = (0.0f64, 0.0f64);
            for (g, s) in row.iter().zip(&source[id as usize * dim..(id as usize + 1) * dim]) {
                e += ((g - s) as f64).powi(2);
                n += (*s as f64).powi(2);
            }
            if n > 0.0 {
                self.relative += (e / n).sqrt();
            }
            self.squared += e;
            self.norm += n;
            self.rows += 1;
        }
    }
    fn mean(&self) -> f64 {
        self.relative / self.rows.max(1) as f64
    }
    fn mse(&self) -> f64 {
        self.squared / self.norm.max(f64::MIN_POSITIVE)
    }
}

pub fn tiering_bench(a: TieringBenchArgs) -> Result<(), Failure> {
    use edo::live::{TierOptions, TieredTable};
    use edo::{Bounds, PackedTable};
    if a.batch == 0 || a.retier_every == 0 || a.rows == 0 || a.dim == 0 {
        return Err(Failure::new(exit::USAGE, "--batch, --retier-every, --rows and --dim must be at least 1"));
    }
    let tiers: Vec<Vec<Format>> = a
        .tiers
        .iter()
        .map(|t| {
            t.split('/').map(|f| crate::parse_format(f).map_err(|m| Failure::new(exit::USAGE, format!("--tiers {t}: {m}")))).collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<_, _>>()?;
    let (source, name) = match &a.table {
        Some(path) => {
            let imported = edo::file::import::path(path, a.tensor.as_deref(), edo::file::import::FileLayout::Dense)?;
            (imported.to_format(Format::F32)?, path.display().to_string())
        }
        None => (PackedTable::quantize(Format::F32, &edo::synth::embedding_table(a.rows, a.dim, 1), a.rows, a.dim)?, "synthetic".to_string()),
    };
    let (rows, dim) = (source.rows(), source.dim());
    let (ids, stream, warm) = match &a.trace {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| Failure::new(exit::NO_INPUT, format!("{}: {e}", path.display())))?;
            let ids = edo::cache::parse_trace(&bytes, Some(rows)).map_err(|e| Failure::new(exit::DATA, format!("{}: {e}", path.display())))?;
            let warm = ids.len() / 2;
            (ids, format!("the trace {} (first half warm-up)", path.display()), warm)
        }
        None if a.stream == "zipf" => (edo::synth::zipf_ids(a.ids, rows, a.zipf, 2), format!("Zipf({}) ids (first quarter warm-up)", a.zipf), a.ids / 4),
        None => (
            edo::synth::drifting_zipf_ids(a.ids, rows, a.zipf, a.ids.div_ceil(8), 2),
            format!("Zipf({}) ids whose hot set moves every {} ids (first quarter warm-up)", a.zipf, a.ids.div_ceil(8)),
            a.ids / 4,
        ),
    };
    let values = source.dequantize();
    let int8 = source.requantize(Format::Int8)?;
    let budget = int8.bytes();
    let max_moves = a.max_moves.unwrap_or((rows / 100).max(1));
    println!("edo bench tiering: {name} table, {rows} × {dim}; {} ids of {stream}; lookups of {}", ids.len(), a.batch);
    println!(
        "budget: all-INT8's {:.1} MB; re-tiering every {} lookups, at most {max_moves} promotions each; errors of the rows looked up after the warm-up",
        budget as f64 / 1e6,
        a.retier_every
    );
    let mut int8_error = ErrorSum::default();
    for batch in ids[warm..].chunks(a.batch) {
        int8_error.add(&values, dim, batch, &edo::cpu::gather(&int8, batch, Bounds::Error)?);
    }
    println!(
        "{:<18} {:>9} {:>14} {:>12} {:>12} {:>10} {:>12} {:>10}",
        "tiers", "MB", "upper rows", "following", "static plan", "÷ INT8", "MSE follow.", "÷ INT8"
    );
    println!(
        "{:<18} {:>9.1} {:>14} {:>12.3e} {:>12} {:>10} {:>12.3e} {:>10}",
        "int8",
        budget as f64 / 1e6,
        "-",
        int8_error.mean(),
        "-",
        "1.00",
        int8_error.mse(),
        "1.00"
    );
    for formats in tiers {
        let label = formats.iter().map(|f| f.name()).collect::<Vec<_>>().join("/");
        let options = TierOptions { formats: formats.clone(), budget, half_life: a.half_life };
        let (following, fixed) = match (TieredTable::new(source.clone(), options.clone()), TieredTable::new(source.clone(), options)) {
            (Ok(f), Ok(s)) => (f, s),
            (Err(e), _) | (_, Err(e)) => {
                println!("{label:<18} does not fit: {e}");
                continue;
            }
        };
        // The static plan: the warm-up's counts, once.
        let mut counts = vec![0f32; rows];
        for &id in &ids[..warm] {
            counts[id as usize] += 1.0;
        }
        fixed.retier_with_counts(&counts, usize::MAX)?;
        let (mut e_follow, mut e_fixed) = (ErrorSum::default(), ErrorSum::default());
        for (i, batch) in ids.chunks(a.batch).enumerate() {
            let got = following.gather(batch, Bounds::Error)?;
            if (i + 1) % a.retier_every == 0 {
                following.retier(max_moves)?;
            }
            if i * a.batch < warm {
                continue;
            }
            e_follow.add(&values, dim, batch, &got);
            e_fixed.add(&values, dim, batch, &fixed.gather(batch, Bounds::Error)?);
        }
        let upper = following.tier_slots().iter().map(usize::to_string).collect::<Vec<_>>().join("+");
        println!(
            "{label:<18} {:>9.1} {:>14} {:>12.3e} {:>12.3e} {:>10.2} {:>12.3e} {:>10.2}",
            following.bytes() as f64 / 1e6,
            upper,
            e_follow.mean(),
            e_fixed.mean(),
            e_follow.mean() / int8_error.mean(),
            e_follow.mse(),
            e_follow.mse() / int8_error.mse()
        );
    }
    println!("(error: the mean over looked-up rows of ‖read − source‖ / ‖source‖; MSE: Σ‖read − source‖² / Σ‖source‖²)");
    Ok(())
}
