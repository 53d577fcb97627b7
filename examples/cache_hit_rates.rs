//! Hit rates of edo's cache policies, with and without W-TinyLFU admission, beside `moka` (Caffeine's
//! design in Rust) and Belady's offline bound, on the same streams and capacities, in one run:
//! a stationary Zipf stream, Zipf with a scan mixed in, Zipf whose hot set moves, and any trace files
//! given (one id a line, or a 1-D `.npy` of ids; `scripts/fixtures/make_trace.py` makes one from real text).
//!
//!     cargo run --release --example cache_hit_rates -- [TRACE …] [--quick]
//!
//! edo's policies serve batches of 4 096 ids (as `edo bench cache` does); moka and Belady see the
//! same ids one by one. Only ids after the warm-up count.
//!
//! The `static` column keeps, fixed, the rows most often looked up during the warm-up: where each
//! id is an independent draw from a fixed popularity (the stationary Zipf stream) keeping the most
//! popular rows is the best an online policy can do on average, and the warm-up's counts are a
//! close estimate of them; a scan mixed in, whose rows come once each, adds nothing a policy could
//! keep. Where popularity moves (the drifting stream, a short real trace) it falls behind.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use edo::cache::{belady, parse_trace, simulate, PolicyKind, SlotMap};
use edo::synth;

/// The system allocator, counting the bytes live: what a cache's bookkeeping holds, measured.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only a counter is updated.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes per cached row that a full cache's bookkeeping holds after serving `ids`: edo's slot
/// map (its row → slot hash index, slot arrays and policy; no rows), and moka's cache of `()`.
fn memory_per_row(ids: &[u32], capacity: usize, batch: usize) -> Result<(), Box<dyn std::error::Error>> {
    println!("\nbookkeeping bytes per cached row, a cache of {capacity} rows after {} ids (measured by a counting allocator):", ids.len());
    // The batch buffers, allocated before anything is counted.
    let mut rows = Vec::with_capacity(batch);
    let mut slots = Vec::with_capacity(batch);
    for k in PolicyKind::ALL {
        let before = LIVE.load(Ordering::Relaxed);
        let mut map = SlotMap::new(capacity, 0, k.build())?;
        for chunk in ids.chunks(batch) {
            rows.clear();
            rows.extend(chunk.iter().map(|&id| Some(id)));
            map.lookup(&rows, &mut slots);
        }
        let bytes = LIVE.load(Ordering::Relaxed) - before;
        println!("  {:<14} {:>6.1} B  ({} rows cached)", k.name(), bytes as f64 / map.len() as f64, map.len());
        drop(map);
    }
    let before = LIVE.load(Ordering::Relaxed);
    let cache: moka::sync::Cache<u32, ()> = moka::sync::Cache::builder().max_capacity(capacity as u64).build();
    for chunk in ids.chunks(batch) {
        for &id in chunk {
            if cache.get(&id).is_none() {
                cache.insert(id, ());
            }
        }
        cache.run_pending_tasks();
    }
    let bytes = LIVE.load(Ordering::Relaxed) - before;
    println!("  {:<14} {:>6.1} B  ({} rows cached)", "moka", bytes as f64 / cache.entry_count() as f64, cache.entry_count());
    println!("  (edo's include 12 B a slot of slot arrays and the row → slot index; a table of up to 4 M rows can use a");
    println!("  dense index instead, 4 B per row of the table.)");
    Ok(())
}

struct Stream {
    name: String,
    ids: Vec<u32>,
    rows: usize,
    warmup: usize,
}

/// The hit rate, after `warmup`, of a cache that holds, fixed, the `capacity` rows looked up most
/// often before `warmup`.
fn static_hit_rate(ids: &[u32], capacity: usize, warmup: usize) -> f64 {
    let (seen, measured) = ids.split_at(warmup.min(ids.len()));
    let mut counts = std::collections::HashMap::<u32, u64>::new();
    for &id in seen {
        *counts.entry(id).or_default() += 1;
    }
    let mut counts: Vec<(u64, u32)> = counts.into_iter().map(|(id, n)| (n, id)).collect();
    // Most frequent first; ties by id, so the run is the same every time.
    counts.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let kept: std::collections::HashSet<u32> = counts.iter().take(capacity).map(|&(_, id)| id).collect();
    measured.iter().filter(|id| kept.contains(id)).count() as f64 / measured.len().max(1) as f64
}

fn moka_hit_rate(ids: &[u32], capacity: usize, warmup: usize, batch: usize) -> f64 {
    let cache: moka::sync::Cache<u32, ()> = moka::sync::Cache::builder().max_capacity(capacity as u64).build();
    let (mut hits, mut lookups) = (0u64, 0u64);
    for (b, chunk) in ids.chunks(batch).enumerate() {
        for (i, &id) in chunk.iter().enumerate() {
            let hit = cache.get(&id).is_some();
            if !hit {
                cache.insert(id, ());
            }
            if b * batch + i >= warmup {
                lookups += 1;
                hits += hit as u64;
            }
        }
        // moka applies its admissions and evictions in the background; settle them per batch,
        // so its size stays at the capacity as edo's does.
        cache.run_pending_tasks();
    }
    hits as f64 / lookups.max(1) as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let (rows, n, warmup) = if quick { (100_000, 600_000, 400_000) } else { (1_000_000, 4_000_000, 3_000_000) };
    let mut streams = vec![
        Stream { name: "zipf 1.05".into(), ids: synth::zipf_ids(n, rows, 1.05, 1), rows, warmup },
        Stream { name: "zipf + 20 % scan".into(), ids: synth::scan_mixed_zipf_ids(n, rows, 1.05, 0.2, 2), rows, warmup },
        Stream { name: format!("drifting (every {}k)", n / 8000), ids: synth::drifting_zipf_ids(n, rows, 1.05, n / 8, 3), rows, warmup },
    ];
    let paths = args.iter().enumerate().filter(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--batch")).map(|(_, a)| a);
    for path in paths {
        let ids = parse_trace(&std::fs::read(path)?, None)?;
        let rows = ids.iter().max().map_or(1, |&m| m as usize + 1);
        let name = std::path::Path::new(path).file_name().map_or(path.clone(), |f| f.to_string_lossy().into_owned());
        streams.push(Stream { name, warmup: ids.len() / 2, ids, rows });
    }
    let batch = args.iter().position(|a| a == "--batch").and_then(|i| args.get(i + 1)).map_or(Ok(4096), |b| b.parse())?;
    let kinds = PolicyKind::ALL;
    for fraction in [0.1, 0.01] {
        println!("\ncache = {:.0} % of the rows; hit rate after the warm-up", fraction * 100.0);
        print!("{:<24}", "stream");
        for k in kinds {
            print!(" {:>12}", k.name());
        }
        println!(" {:>8} {:>8} {:>8}", "moka", "static", "belady");
        for s in &streams {
            let capacity = ((s.rows as f64 * fraction) as usize).max(1);
            print!("{:<24}", s.name);
            for k in kinds {
                let st = simulate(k, capacity, &s.ids, batch, s.warmup)?;
                print!(" {:>12.4}", st.hit_rate());
            }
            let t = Instant::now();
            let moka = moka_hit_rate(&s.ids, capacity, s.warmup, batch);
            let moka_s = t.elapsed().as_secs_f64();
            let fixed = static_hit_rate(&s.ids, capacity, s.warmup);
            let opt = belady(&s.ids, capacity, s.warmup).hit_rate();
            println!(" {:>8.4} {:>8.4} {:>8.4}   ({} ids, {} rows, moka {:.1} s)", moka, fixed, opt, s.ids.len(), s.rows, moka_s);
        }
    }
    memory_per_row(&streams[0].ids, streams[0].rows / 10, batch)?;
    Ok(())
}
