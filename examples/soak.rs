//! A soak test: threads sharing one engine mix gathers (five formats), bags, hashed bags, cached
//! lookups and Hamming searches for a given time, with bad ids among the good; every result is
//! checked against the CPU path, and the process's resident memory and the engine's allocated
//! bytes are sampled. Exits 1 on any wrong row, unexpected error, or memory growth beyond the
//! slack; prints what it ran and the memory it saw.
//!
//!   cargo run --release --example soak -- [--seconds 30] [--threads 4] [--slack-mib 64]
//!
//! Without a GPU adapter it prints `SKIPPED: no adapter` (a failure with `EDO_REQUIRE_GPU=1`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use edo::cache::PolicyKind;
use edo::hash::{HashSpec, HashedBags};
use edo::synth::{embedding_table, zipf_ids, Rng};
use edo::{block_on, Bags, Bounds, Engine, Format, GpuCache, GpuCodes, GpuHashedTables, GpuLookup, GpuTable, Layout, PackedTable, Pooling};

const ROWS: usize = 20_000;
const DIM: usize = 64;
const FORMATS: [Format; 5] = [Format::Int8, Format::F16, Format::Q4K, Format::Fp8E4M3, Format::Int4Zp32];
const OPS: [&str; 5] = ["gather", "bag", "hashed bags", "cached gather", "hamming top-k"];

struct Fixture {
    tables: Vec<(PackedTable, GpuTable)>,
    hashed: (Vec<PackedTable>, Vec<HashSpec>, GpuHashedTables),
    cache: GpuCache<PackedTable>,
    bits: PackedTable,
    codes: GpuCodes,
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
    match op {
        0 => {
            let (table, gpu) = &f.tables[rng.below(f.tables.len() as u32) as usize];
            let n = 1 + rng.below(3000) as usize;
            let ids = ids(rng, n, ROWS);
            let got = block_on(gpu.gather(&ids, Bounds::Zero)).map_err(e)?.read_blocking().map_err(e)?;
            exact(&got, &edo::cpu::gather(table, &ids, Bounds::Zero).map_err(e)?)
        }
        1 => {
            let (table, gpu) = &f.tables[rng.below(f.tables.len() as u32) as usize];
            let n = 1 + rng.below(4000) as usize;
            let ids = ids(rng, n, ROWS);
            let bags = 1 + rng.below(200) as usize;
            let offsets = offsets(rng, bags, ids.len());
            let bags = Bags::new(&ids, &offsets).include_last_offset(true);
            let pooling = if rng.below(2) == 0 { Pooling::Sum } else { Pooling::Mean };
            let got = block_on(gpu.bag(&bags, pooling, Bounds::Zero)).map_err(e)?.read_blocking().map_err(e)?;
            let want = edo::cpu::embedding_bag(table, &bags, pooling, Bounds::Zero).map_err(e)?;
            close(&got, &want, ids.len() as f32, 2.0)
        }
        2 => {
            let (tables, specs, gpu) = &f.hashed;
            let batch = 1 + rng.below(64) as usize;
            let ids: Vec<u64> = (0..batch * specs.len() * 8).map(|_| rng.next_u64()).collect();
            let n = ids.len();
            let offsets = offsets(rng, batch * specs.len(), n);
            let bags = HashedBags::new(&ids, &offsets).include_last_offset(true);
            let refs: Vec<&PackedTable> = tables.iter().collect();
            let want = edo::hash::hashed_bags(&refs, specs, batch, &bags, Pooling::Sum, Layout::Concat).map_err(e)?;
            let job = block_on(gpu.prepare_bags(batch, &bags, Pooling::Sum, Layout::Concat)).map_err(e)?;
            job.submit().map_err(e)?;
            let got = job.output().read_blocking().map_err(e)?;
            close(&got, &want, 2.0 * ids.len() as f32, 2.0)
        }
        3 => {
            let (n, seed) = (1 + rng.below(2000) as usize, rng.next_u64());
            let mut ids = zipf_ids(n, ROWS, 1.05, seed);
            if ids.len() > 10 {
                ids[7] = u32::MAX;
            }
            let got = block_on(f.cache.gather(&ids, Bounds::Zero)).map_err(e)?.read_blocking().map_err(e)?;
            exact(&got, &edo::cpu::gather(&f.tables[0].0, &ids, Bounds::Zero).map_err(e)?)
        }
        _ => {
            let (first, w) = (rng.below(ROWS as u32 - 8) as usize, f.bits.row_words());
            let q = PackedTable::from_words(Format::Binary, 8, DIM, f.bits.words()[first * w..(first + 8) * w].to_vec()).map_err(e)?;
            let got = block_on(f.codes.hamming_topk(&q, 10)).map_err(e)?;
            let want = edo::search::hamming_topk(&f.bits, &q, 10).map_err(e)?;
            if (got.ids, got.distances) != (want.ids, want.distances) {
                return Err("Hamming neighbours differ from the CPU path's".into());
            }
            Ok(())
        }
    }
}

fn main() {
    let (seconds, threads, slack) = (arg("--seconds", 30), arg("--threads", 4) as usize, arg("--slack-mib", 64) << 20);
    let engine = match Engine::new_blocking(Default::default()) {
        Ok(engine) => engine,
        Err(err) => {
            println!("SKIPPED: no adapter ({err})");
            std::process::exit(if std::env::var("EDO_REQUIRE_GPU").is_ok_and(|v| v == "1") { 1 } else { 0 });
        }
    };
    println!("edo soak: {threads} threads × {seconds} s on {}", engine.adapter());
    let data = embedding_table(ROWS, DIM, 1);
    let tables = FORMATS
        .iter()
        .map(|&format| {
            let t = PackedTable::quantize(format, &data, ROWS, DIM).expect("quantise");
            let gpu = block_on(GpuTable::upload(&engine, &t)).expect("upload");
            (t, gpu)
        })
        .collect::<Vec<_>>();
    let specs = vec![HashSpec::new(5000, 2), HashSpec::new(3000, 1).with_hot(vec![1, 2, 3])];
    let hashed_tables: Vec<PackedTable> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| PackedTable::quantize(Format::Int8, &embedding_table(s.rows(), DIM, 10 + i as u64), s.rows(), DIM).unwrap())
        .collect();
    let pairs: Vec<(&PackedTable, HashSpec)> = hashed_tables.iter().zip(specs.iter().cloned()).collect();
    let hashed_gpu = block_on(GpuHashedTables::upload(&engine, &pairs)).expect("upload hashed tables");
    let cache = block_on(GpuCache::new(&engine, tables[0].0.clone(), 2000, PolicyKind::Lru.build())).expect("cache");
    let bits = PackedTable::quantize(Format::Binary, &data, ROWS, DIM).unwrap();
    let codes = block_on(GpuCodes::upload(&engine, &bits)).expect("upload codes");
    let fixture = Fixture { tables, hashed: (hashed_tables, specs, hashed_gpu), cache, bits, codes };

    // Warm up: every operation once (pipelines compiled, the cache's pages allocated), then the
    // baseline.
    let mut rng = Rng::new(99);
    for (op, name) in OPS.iter().enumerate() {
        for _ in 0..3 {
            run(&fixture, op, &mut rng).unwrap_or_else(|m| panic!("warm-up {name}: {m}"));
        }
    }
    // The cache grows page by page as it fills: fill it, so that what it holds is in the baseline.
    let all: Vec<u32> = (0..fixture.cache.max_capacity() as u32).collect();
    block_on(fixture.cache.gather(&all, Bounds::Error)).and_then(|rows| rows.read_blocking()).expect("fill the cache");
    engine.wait_idle().expect("idle");
    let (rss0, alloc0) = (rss_bytes(), engine.allocated_bytes());
    let counts: Vec<AtomicU64> = (0..OPS.len()).map(|_| AtomicU64::new(0)).collect();
    let failures = Mutex::new(Vec::<String>::new());
    let stop = AtomicBool::new(false);
    let (mut rss_max, mut alloc_max) = (rss0, alloc0);
    let start = Instant::now();
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
            alloc_max = alloc_max.max(engine.allocated_bytes());
        }
        stop.store(true, Ordering::Relaxed);
    });
    engine.wait_idle().expect("idle");
    let (rss1, alloc1) = (rss_bytes(), engine.allocated_bytes());
    let secs = start.elapsed().as_secs_f64();
    let total: u64 = counts.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    println!("{total} operations in {secs:.1} s ({:.0} per second):", total as f64 / secs);
    for (name, c) in OPS.iter().zip(&counts) {
        println!("  {name:<14} {}", c.load(Ordering::Relaxed));
    }
    println!("resident memory: {} after warm-up, {} at most, {} at the end (slack {})", mib(rss0), mib(rss_max), mib(rss1), mib(slack));
    println!("engine allocations: {} after warm-up, {} at most, {} at the end", mib(alloc0), mib(alloc_max), mib(alloc1));
    let mut failures = failures.into_inner().unwrap();
    if rss1 > rss0 + slack {
        failures.push(format!("resident memory grew by {} (slack {})", mib(rss1 - rss0), mib(slack)));
    }
    if alloc1 > alloc0 {
        failures.push(format!("the engine holds {} more than after warm-up with no lookup in flight", mib(alloc1 - alloc0)));
    }
    if total == 0 {
        failures.push("no operation ran".into());
    }
    if failures.is_empty() {
        println!("PASS: every result equal to the CPU path's, memory flat");
    } else {
        for f in &failures {
            eprintln!("FAIL: {f}");
        }
        std::process::exit(1);
    }
}
