//! A soak test: threads sharing one engine mix gathers (five formats), bags, hashed bags, cached
//! lookups and Hamming searches for a given time, with bad ids among the good, and live tables
//! changing under them (updates read on the CPU path and from a GPU copy, inserts that evict,
//! snapshot swaps); every result is checked against the CPU path or the live tables' oracle, and the process's resident memory and the engine's allocated
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
use edo::live::{LiveOptions, LiveTable, Missing};
use edo::synth::{embedding_table, zipf_ids, Rng};
use edo::{
    block_on, AsyncLookup, Bags, Bounds, Engine, Format, GpuCache, GpuCodes, GpuHashedTables, GpuTable, Layout, PackedTable, Pooling, Recoverable,
    RecoveringEngine, RecoveryEvent,
};

const ROWS: usize = 20_000;
const DIM: usize = 64;
const FORMATS: [Format; 5] = [Format::Int8, Format::F16, Format::Q4K, Format::Fp8E4M3, Format::Int4Zp32];
const OPS: [&str; 8] = ["gather", "bag", "hashed bags", "cached gather", "hamming top-k", "live update", "live insert", "live swap"];
/// Keys of the live table that threads update (each thread its own: key % threads) and read.
const LIVE_KEYS: u64 = 512;
/// The most keys of the table that takes new keys (and evicts past it).
const INSERT_LIMIT: usize = 1000;
/// Keys of the table that swaps snapshots.
const SWAP_KEYS: u64 = 300;

/// Everything on the GPU through the recovering engine; each keeps the host copy the CPU path
/// checks it against.
struct Fixture {
    tables: Vec<Recoverable<GpuTable>>,
    hashed: Recoverable<GpuHashedTables>,
    cache: Recoverable<GpuCache<PackedTable>>,
    codes: Recoverable<GpuCodes>,
    engine: RecoveringEngine,
    live: Live,
}

/// The live tables and what their oracle needs.
struct Live {
    /// F32 rows of `LIVE_KEYS` keys, each row one value `key + LIVE_KEYS · generation` (exact
    /// below 2²⁴: generations stop at `MAX_GENERATION`), with
    /// a GPU copy re-attached after a device loss.
    updated: LiveTable,
    /// The last generation each key was written with (by its thread, in order).
    generations: Vec<AtomicU64>,
    threads: u64,
    /// INT8, at most `INSERT_LIMIT` keys (LRU): new keys arrive, each reading zeros.
    inserted: LiveTable,
    next_key: AtomicU64,
    /// F16, swapped among snapshots whose every value is their version (1–4).
    swapped: LiveTable,
    snapshots: Vec<Vec<u8>>,
}

/// The last generation a live key is written with (its stamp stays below 2²⁴, exact in f32).
const MAX_GENERATION: u64 = (1 << 24) / LIVE_KEYS - 1;

fn stamp(key: u64, generation: u64) -> f32 {
    (key + LIVE_KEYS * generation) as f32
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

/// One operation, chosen by `op`, checked against the CPU path. `thread` owns the live keys
/// `key % threads == thread`.
fn run(f: &Fixture, op: usize, rng: &mut Rng, thread: u64) -> Result<(), String> {
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
                Ok(job.into_output().read().await?)
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
        5 => live_update(f, rng, thread),
        6 => {
            // New keys: each reads zeros; the table stays within its limit by evicting.
            let n = 1 + rng.below(100) as u64;
            let first = f.live.next_key.fetch_add(n, Ordering::Relaxed);
            let keys: Vec<u64> = (first..first + n).collect();
            let got = f.live.inserted.find_or_insert(&keys).map_err(e)?;
            if got.iter().any(|&v| v != 0.0) {
                return Err("a new key read a row that was not zeros".into());
            }
            if f.live.inserted.len() > INSERT_LIMIT {
                return Err(format!("{} keys, past the limit of {INSERT_LIMIT}", f.live.inserted.len()));
            }
            Ok(())
        }
        7 => {
            let t = &f.live.swapped;
            if rng.below(8) == 0 {
                let v = rng.below(4) as usize;
                t.swap_bytes(f.live.snapshots[v].clone()).map_err(e)?;
                return Ok(());
            }
            let keys: Vec<u64> = (0..SWAP_KEYS).collect();
            let got = t.gather(&keys, Missing::Error).map_err(e)?;
            // Every row from one version: the lookup ran on one table.
            if got.iter().any(|&v| v != got[0]) || !(1.0..=4.0).contains(&got[0]) {
                return Err("a lookup read rows of two snapshots".into());
            }
            Ok(())
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

/// A live-table update of the thread's own keys, or a read of any keys on the CPU path or from
/// the GPU copy: every row whole, of its key, and no older than the last generation read of it.
fn live_update(f: &Fixture, rng: &mut Rng, thread: u64) -> Result<(), String> {
    let live = &f.live;
    if rng.below(3) == 0 {
        let keys: Vec<u64> = (0..1 + rng.below(20) as u64)
            .map(|i| (thread + live.threads * (rng.below(1 << 16) as u64 + i)) % LIVE_KEYS)
            .filter(|k| k % live.threads == thread)
            .collect();
        let mut seen = rustc_hash::FxHashSet::default();
        let keys: Vec<u64> = keys.into_iter().filter(|k| seen.insert(*k) && live.generations[*k as usize].load(Ordering::Relaxed) < MAX_GENERATION).collect();
        let gens: Vec<u64> = keys.iter().map(|&k| live.generations[k as usize].load(Ordering::Relaxed) + 1).collect();
        let values: Vec<f32> = keys.iter().zip(&gens).flat_map(|(&k, &g)| vec![stamp(k, g); DIM]).collect();
        match live.updated.update(&keys, &values) {
            // A device lost under the GPU copy: the host applied the batch and dropped the copy.
            Ok(_) | Err(edo::Error::DeviceLost(_)) => {}
            Err(other) => return Err(other.to_string()),
        }
        for (&k, &g) in keys.iter().zip(&gens) {
            live.generations[k as usize].store(g, Ordering::Release);
        }
        return Ok(());
    }
    let keys: Vec<u64> = (0..1 + rng.below(300) as u64).map(|_| rng.below(LIVE_KEYS as u32) as u64).collect();
    // The generations written before the read began: the read must see at least those.
    let floor: Vec<u64> = keys.iter().map(|&k| live.generations[k as usize].load(Ordering::Acquire)).collect();
    let on_gpu = rng.below(2) == 0;
    let rows = if on_gpu {
        match live.updated.gather_gpu(&keys, Missing::Error).and_then(|r| Ok(r.read_blocking()?)) {
            Ok(rows) => rows,
            Err(edo::Error::DeviceLost(_) | edo::Error::Unsupported(edo::Unsupported::LiveTableWithoutGpu)) => {
                // Copy the table to the engine as it is now (rebuilt or not: a failure here is
                // tried again later), and read on the CPU path meanwhile.
                let _ = block_on(f.engine.recover()).map(|_| live.updated.attach_gpu(&f.engine.engine()));
                live.updated.gather(&keys, Missing::Error).map_err(|e| e.to_string())?
            }
            Err(other) => return Err(other.to_string()),
        }
    } else {
        live.updated.gather(&keys, Missing::Error).map_err(|e| e.to_string())?
    };
    for ((&k, row), &low) in keys.iter().zip(rows.chunks_exact(DIM)).zip(&floor) {
        if row.iter().any(|&v| v != row[0]) {
            return Err(format!("a torn row of key {k} ({})", if on_gpu { "GPU" } else { "CPU path" }));
        }
        let v = row[0] as u64;
        if v % LIVE_KEYS != k || v / LIVE_KEYS < low {
            return Err(format!("key {k} read {v}: another key's row, or generation {} older than {low} already written", v / LIVE_KEYS));
        }
    }
    Ok(())
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
    let updated = LiveTable::new(LiveOptions::new(Format::F32, DIM)).expect("live table");
    let keys: Vec<u64> = (0..LIVE_KEYS).collect();
    updated.update(&keys, &keys.iter().flat_map(|&k| vec![stamp(k, 0); DIM]).collect::<Vec<_>>()).expect("first rows");
    updated.attach_gpu(&engine.engine()).expect("a GPU copy of the live table");
    let swap_keys: Vec<u64> = (0..SWAP_KEYS).collect();
    let snapshots: Vec<Vec<u8>> = (1..=4u64)
        .map(|v| {
            let t = LiveTable::new(LiveOptions::new(Format::F16, DIM)).unwrap();
            t.update(&swap_keys, &vec![v as f32; swap_keys.len() * DIM]).unwrap();
            t.snapshot().unwrap().to_bytes()
        })
        .collect();
    let swapped = LiveTable::new(LiveOptions::new(Format::F16, DIM)).unwrap();
    swapped.swap_bytes(snapshots[0].clone()).expect("first snapshot");
    let live = Live {
        updated,
        generations: (0..LIVE_KEYS).map(|_| AtomicU64::new(0)).collect(),
        threads: threads as u64,
        inserted: LiveTable::new(LiveOptions::new(Format::Int8, DIM).capacity(64).max_rows(INSERT_LIMIT)).unwrap(),
        next_key: AtomicU64::new(1 << 40),
        swapped,
        snapshots,
    };
    let fixture = Fixture { tables, hashed, cache, codes, engine: engine.clone(), live };

    // Warm up: every operation once (pipelines compiled, the cache's pages allocated), then the
    // baseline.
    let mut rng = Rng::new(99);
    for (op, name) in OPS.iter().enumerate() {
        for _ in 0..3 {
            run(&fixture, op, &mut rng, 0).unwrap_or_else(|m| panic!("warm-up {name}: {m}"));
        }
    }
    // The cache grows page by page as it fills: fill it, so that what it holds is in the baseline.
    let all: Vec<u32> = (0..fixture.cache.host().capacity as u32).collect();
    block_on(fixture.cache.gather(&all, Bounds::Error)).expect("fill the cache");
    if lose_every > 0 {
        // One loss in the warm-up, so the baseline is that of a rebuilt engine.
        engine.engine().destroy_device();
        for (op, name) in OPS.iter().enumerate() {
            run(&fixture, op, &mut rng, 0).unwrap_or_else(|m| panic!("warm-up {name} after a device loss: {m}"));
        }
        block_on(fixture.cache.gather(&all, Bounds::Error)).expect("fill the rebuilt cache");
        fixture.live.updated.attach_gpu(&engine.engine()).expect("the live table's copy on the rebuilt engine");
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
                    run(fixture, op, &mut rng, t as u64).unwrap_or_else(|m| panic!("warm-up thread {t}, {}: {m}", OPS[op]));
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
                    if let Err(m) = run(fixture, op, &mut rng, t as u64) {
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
    // The live table's copy, on the engine as it is now (as after the warm-up).
    fixture.live.updated.attach_gpu(&engine.engine()).expect("the live table's copy at the end");
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
