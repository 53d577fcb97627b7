//! A soak test: threads sharing one engine mix gathers (five formats), bags, hashed bags, cached
//! lookups and Hamming searches for a given time, with bad ids among the good; every result is
//! checked against the CPU path, and the process's resident memory and the engine's allocated
//! bytes are sampled. Exits 1 on any wrong row, unexpected error, or memory growth beyond the
//! slack; prints what it ran and the memory it saw. The idle buffers an engine keeps for its next
//! lookups are counted apart: at most `EngineOptions::pool_bytes`, which on a CPU device
//! (lavapipe) is host memory too.
//!
//! With `--lose-every S` the device is destroyed every S seconds, as a driver reset would, while
//! the threads run: everything is uploaded through a `RecoveringEngine`, so every operation must
//! still give the CPU path's result, each loss must cost one rebuild, and memory must stay flat
//! across rebuilds. (Each new device brings new driver threads, and glibc may give each a malloc
//! arena: with `MALLOC_ARENA_MAX=2`, as `scripts/test.sh` runs it, those arenas are not counted
//! as growth. Measured on lavapipe with one arena: +29 MiB after 12 losses, +32 MiB after 39.)
//!
//!   cargo run --release --example soak -- [--seconds 30] [--threads 4] [--slack-mib 64] [--lose-every 0]
//!
//! Without a GPU adapter it prints `SKIPPED: no adapter` (a failure with `EDO_REQUIRE_GPU=1`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Seconds every thread runs before the baseline is taken.
const WARM_SECONDS: u64 = 5;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use edo::cache::PolicyKind;
use edo::gpu::CacheSpec;
use edo::hash::{HashSpec, HashedBags};
use edo::synth::{embedding_table, zipf_ids, Rng};
use edo::{
    block_on, AsyncLookup, Bags, Bounds, Engine, Format, GpuCache, GpuCodes, GpuHashedTables, GpuTable, Layout, PackedTable, Pooling, Recoverable,
    RecoveringEngine, RecoveryEvent,
};

const ROWS: usize = 20_000;
const DIM: usize = 64;
const FORMATS: [Format; 5] = [Format::Int8, Format::F16, Format::Q4K, Format::Fp8E4M3, Format::Int4Zp32];
const OPS: [&str; 5] = ["gather", "bag", "hashed bags", "cached gather", "hamming top-k"];

/// Everything on the GPU through the recovering engine; each keeps the host copy the CPU path
/// checks it against.
struct Fixture {
    tables: Vec<Recoverable<GpuTable>>,
    hashed: Recoverable<GpuHashedTables>,
    cache: Recoverable<GpuCache<PackedTable>>,
    codes: Recoverable<GpuCodes>,
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name} takes a number, not {v:?}")))
}

/// Resident memory of this process (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).map_or(0, |pages| pages * 4096)
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
}

/// Ids with about one in ten out of range.
fn ids(rng: &mut Rng, n: usize, rows: usize) -> Vec<u32> {
    (0..n).map(|_| if rng.below(10) == 0 { rows as u32 + rng.below(1000) } else { rng.below(rows as u32) }).collect()
}

fn offsets(rng: &mut Rng, bags: usize, ids: usize) -> Vec<u32> {
    let mut cuts: Vec<u32> = (0..bags - 1).map(|_| rng.below(ids as u32 + 1)).collect();
    cuts.push(0);
    cuts.push(ids as u32);
    cuts.sort_unstable();
    cuts
}

fn close(got: &[f32], want: &[f32], terms: f32, max_abs: f32) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} values, want {}", got.len(), want.len()));
    }
    let tol = 4.0 * terms * f32::EPSILON * terms * max_abs;
    match got.iter().zip(want).position(|(g, w)| (g - w).abs() > tol) {
        Some(i) => Err(format!("value {i}: GPU {} vs CPU {} (tolerance {tol})", got[i], want[i])),
        None => Ok(()),
    }
}

fn exact(got: &[f32], want: &[f32]) -> Result<(), String> {
    match got.iter().zip(want).position(|(g, w)| g.to_bits() != w.to_bits()).or((got.len() != want.len()).then_some(got.len().min(want.len()))) {
        Some(i) => Err(format!("value {i}: GPU {:?} vs CPU {:?}", got.get(i), want.get(i))),
        None => Ok(()),
    }
}

/// One operation, chosen by `op`, checked against the CPU path.
fn run(f: &Fixture, op: usize, rng: &mut Rng) -> Result<(), String> {
    let e = |e: edo::Error| e.to_string();
    let ec = |e: edo::CoreError| e.to_string();
    match op {
        0 => {
            let gpu = &f.tables[rng.below(f.tables.len() as u32) as usize];
            let n = 1 + rng.below(3000) as usize;
            let ids = ids(rng, n, ROWS);
            let got = block_on(gpu.gather(&ids, Bounds::Zero)).map_err(e)?;
            exact(&got, &edo::cpu::gather(gpu.host(), &ids, Bounds::Zero).map_err(ec)?)
        }
        1 => {
            let gpu = &f.tables[rng.below(f.tables.len() as u32) as usize];
            let n = 1 + rng.below(4000) as usize;
            let ids = ids(rng, n, ROWS);
            let bags = 1 + rng.below(200) as usize;
            let offsets = offsets(rng, bags, ids.len());
            let bags = Bags::new(&ids, &offsets).include_last_offset(true);
            let pooling = if rng.below(2) == 0 { Pooling::Sum } else { Pooling::Mean };
            let got = block_on(gpu.bag(&bags, pooling, Bounds::Zero)).map_err(e)?;
            let want = edo::cpu::embedding_bag(gpu.host(), &bags, pooling, Bounds::Zero).map_err(ec)?;
            close(&got, &want, ids.len() as f32, 2.0)
        }
        2 => {
            let tables: Vec<&PackedTable> = f.hashed.host().iter().map(|(t, _)| t).collect();
            let specs: Vec<HashSpec> = f.hashed.host().iter().map(|(_, s)| s.clone()).collect();
            let batch = 1 + rng.below(64) as usize;
            let ids: Vec<u64> = (0..batch * specs.len() * 8).map(|_| rng.next_u64()).collect();
            let n = ids.len();
            let offsets = offsets(rng, batch * specs.len(), n);
            let bags = HashedBags::new(&ids, &offsets).include_last_offset(true);
            let want = edo::hash::hashed_bags(&tables, &specs, batch, &bags, Pooling::Sum, Layout::Concat).map_err(e)?;
            let got = block_on(f.hashed.run(async |gpu| {
                let job = gpu.prepare_bags(batch, &bags, Pooling::Sum, Layout::Concat).await?;
                job.submit()?;
                job.into_output().read().await
            }))
            .map_err(e)?;
            close(&got, &want, 2.0 * ids.len() as f32, 2.0)
        }
        3 => {
            let (n, seed) = (1 + rng.below(2000) as usize, rng.next_u64());
            let mut ids = zipf_ids(n, ROWS, 1.05, seed);
            if ids.len() > 10 {
                ids[7] = u32::MAX;
            }
            let got = block_on(f.cache.gather(&ids, Bounds::Zero)).map_err(e)?;
            exact(&got, &edo::cpu::gather(&f.cache.host().source, &ids, Bounds::Zero).map_err(ec)?)
        }
        _ => {
            let bits = f.codes.host();
            let (first, w) = (rng.below(ROWS as u32 - 8) as usize, bits.row_words());
            let q = PackedTable::from_words(Format::Binary, 8, DIM, bits.words()[first * w..(first + 8) * w].to_vec()).map_err(ec)?;
            let got = block_on(f.codes.hamming_topk(&q, 10)).map_err(e)?;
            let want = edo::search::hamming_topk(bits, &q, 10).map_err(e)?;
            if (got.ids, got.distances) != (want.ids, want.distances) {
                return Err("Hamming neighbours differ from the CPU path's".into());
            }
            Ok(())
        }
    }
}

fn main() {
    let (seconds, threads, slack) = (arg("--seconds", 30), arg("--threads", 4) as usize, arg("--slack-mib", 64) << 20);
    let lose_every = arg("--lose-every", 0);
    let engine = match Engine::new_blocking(Default::default()) {
        Ok(engine) => engine,
        Err(err) => {
            println!("SKIPPED: no adapter ({err})");
            std::process::exit(if std::env::var("EDO_REQUIRE_GPU").is_ok_and(|v| v == "1") { 1 } else { 0 });
        }
    };
    let losses = if lose_every > 0 { format!(", the device lost every {lose_every} s") } else { String::new() };
    println!("edo soak: {threads} threads × {seconds} s on {}{losses}", engine.adapter());
    let engine = RecoveringEngine::new(engine);
    let rebuilds = std::sync::Arc::new(Mutex::new(Vec::<f64>::new()));
    {
        let rebuilds = rebuilds.clone();
        engine.on_event(move |event| match event {
            RecoveryEvent::Recovered { millis, .. } => rebuilds.lock().unwrap().push(*millis),
            RecoveryEvent::Failed { reason } => eprintln!("rebuild failed: {reason}"),
            RecoveryEvent::Lost { .. } => {}
        });
    }
    let data = embedding_table(ROWS, DIM, 1);
    let tables = FORMATS
        .iter()
        .map(|&format| {
            let t = PackedTable::quantize(format, &data, ROWS, DIM).expect("quantise");
            block_on(engine.upload(t)).expect("upload")
        })
        .collect::<Vec<Recoverable<GpuTable>>>();
    let specs = vec![HashSpec::new(5000, 2), HashSpec::new(3000, 1).with_hot(vec![1, 2, 3])];
    let hashed_tables: Vec<PackedTable> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| PackedTable::quantize(Format::Int8, &embedding_table(s.rows(), DIM, 10 + i as u64), s.rows(), DIM).unwrap())
        .collect();
    let hashed = block_on(engine.upload(hashed_tables.into_iter().zip(specs).collect())).expect("upload hashed tables");
    let cache = block_on(engine.upload(CacheSpec { source: tables[0].host().clone(), capacity: 2000, policy: PolicyKind::Lru })).expect("cache");
    let bits = PackedTable::quantize(Format::Binary, &data, ROWS, DIM).unwrap();
    let codes = block_on(engine.upload(bits)).expect("upload codes");
    let fixture = Fixture { tables, hashed, cache, codes };

    // Warm up: every operation once (pipelines compiled, the cache's pages allocated), then the
    // baseline.
    let mut rng = Rng::new(99);
    for (op, name) in OPS.iter().enumerate() {
        for _ in 0..3 {
            run(&fixture, op, &mut rng).unwrap_or_else(|m| panic!("warm-up {name}: {m}"));
        }
    }
    // The cache grows page by page as it fills: fill it, so that what it holds is in the baseline.
    let all: Vec<u32> = (0..fixture.cache.host().capacity as u32).collect();
    block_on(fixture.cache.gather(&all, Bounds::Error)).expect("fill the cache");
    if lose_every > 0 {
        // One loss in the warm-up, so the baseline is that of a rebuilt engine.
        engine.engine().destroy_device();
        for (op, name) in OPS.iter().enumerate() {
            run(&fixture, op, &mut rng).unwrap_or_else(|m| panic!("warm-up {name} after a device loss: {m}"));
        }
        block_on(fixture.cache.gather(&all, Bounds::Error)).expect("fill the rebuilt cache");
    }
    // Then every thread for a few seconds: the first calls from each thread grow the driver's and
    // the allocator's per-thread state (on lavapipe by ~55 MiB with 4 threads, measured flat from
    // 30 s to 90 s without losses: warm-up, not a leak, which would keep growing).
    std::thread::scope(|s| {
        for t in 0..threads {
            let fixture = &fixture;
            s.spawn(move || {
                let mut rng = Rng::new(500 + t as u64);
                let begun = Instant::now();
                while begun.elapsed() < Duration::from_secs(WARM_SECONDS) {
                    let op = rng.below(OPS.len() as u32) as usize;
                    run(fixture, op, &mut rng).unwrap_or_else(|m| panic!("warm-up thread {t}, {}: {m}", OPS[op]));
                }
            });
        }
    });
    engine.engine().wait_idle().expect("idle");
    // Bytes the engine holds for its tables, cache and work, not counting the idle buffers it keeps
    // for its next lookups (at most `pool_bytes`, checked on their own).
    let held = |e: &edo::Engine| e.allocated_bytes() - e.idle_bytes();
    let pool_bytes = edo::EngineOptions::default().pool_bytes;
    let (rss0, alloc0) = (rss_bytes(), held(&engine.engine()));
    let counts: Vec<AtomicU64> = (0..OPS.len()).map(|_| AtomicU64::new(0)).collect();
    let failures = Mutex::new(Vec::<String>::new());
    let stop = AtomicBool::new(false);
    let (mut rss_max, mut alloc_max) = (rss0, alloc0);
    let start = Instant::now();
    let (mut lost, mut last_loss) = (0u64, Instant::now());
    std::thread::scope(|s| {
        for t in 0..threads {
            let (fixture, counts, failures, stop) = (&fixture, &counts, &failures, &stop);
            s.spawn(move || {
                let mut rng = Rng::new(1000 + t as u64);
                while !stop.load(Ordering::Relaxed) {
                    let op = rng.below(OPS.len() as u32) as usize;
                    if let Err(m) = run(fixture, op, &mut rng) {
                        failures.lock().unwrap().push(format!("thread {t}, {}: {m}", OPS[op]));
                        stop.store(true, Ordering::Relaxed);
                    }
                    counts[op].fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        while start.elapsed() < Duration::from_secs(seconds) && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(250));
            rss_max = rss_max.max(rss_bytes());
            alloc_max = alloc_max.max(held(&engine.engine()));
            if lose_every > 0
                && last_loss.elapsed() >= Duration::from_secs(lose_every)
                && start.elapsed() + Duration::from_secs(1) < Duration::from_secs(seconds)
            {
                engine.engine().destroy_device();
                (lost, last_loss) = (lost + 1, Instant::now());
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    // A loss near the end may not have met a call yet: rebuild now, so the memory compared is
    // the new engine's with everything on it.
    block_on(engine.recover()).expect("rebuild after the last loss");
    engine.engine().wait_idle().expect("idle");
    let (rss1, alloc1, idle1) = (rss_bytes(), held(&engine.engine()), engine.engine().idle_bytes());
    let secs = start.elapsed().as_secs_f64();
    let total: u64 = counts.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    println!("{total} operations in {secs:.1} s ({:.0} per second):", total as f64 / secs);
    for (name, c) in OPS.iter().zip(&counts) {
        println!("  {name:<14} {}", c.load(Ordering::Relaxed));
    }
    println!(
        "resident memory: {} after warm-up, {} at most, {} at the end (slack {}, and the pool's {})",
        mib(rss0),
        mib(rss_max),
        mib(rss1),
        mib(slack),
        mib(pool_bytes)
    );
    println!("engine allocations held: {} after warm-up, {} at most, {} at the end; {} idle in its pool", mib(alloc0), mib(alloc_max), mib(alloc1), mib(idle1));
    // (Less the warm-up's.)
    let rebuilds: Vec<f64> = rebuilds.lock().unwrap().iter().skip(1).cloned().collect();
    let mut failures = failures.into_inner().unwrap();
    if lose_every > 0 {
        let slowest = rebuilds.iter().cloned().fold(0.0, f64::max);
        println!("device losses: {lost}, rebuilds: {} (slowest {slowest:.0} ms)", rebuilds.len());
        if rebuilds.len() as u64 != lost || engine.generation() != lost + 1 {
            failures.push(format!("{lost} device losses but {} rebuilds (generation {})", rebuilds.len(), engine.generation()));
        }
        if lost == 0 {
            failures.push("the run was too short to lose the device".into());
        }
    }
    // On a CPU device (lavapipe) the pool's idle buffers are host memory.
    if rss1 > rss0 + slack + pool_bytes {
        failures.push(format!("resident memory grew by {} (slack {} and the pool's {})", mib(rss1 - rss0), mib(slack), mib(pool_bytes)));
    }
    if idle1 > pool_bytes {
        failures.push(format!("{} idle in the pool, over its {}", mib(idle1), mib(pool_bytes)));
    }
    if alloc1 > alloc0 {
        failures.push(format!("the engine holds {} more than after warm-up with no lookup in flight", mib(alloc1 - alloc0)));
    }
    if total == 0 {
        failures.push("no operation ran".into());
    }
    if failures.is_empty() {
        println!("PASS: every result equal to the CPU path's, memory flat{}", if lose_every > 0 { ", through every device loss" } else { "" });
    } else {
        for f in &failures {
            eprintln!("FAIL: {f}");
        }
        std::process::exit(1);
    }
}
