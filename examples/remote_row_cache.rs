//! The CPU path's row cache in front of a remote table: what a batch of Zipf lookups fetches and
//! costs with the cache and without it, on the same batches in the same run.
//!
//! The remote file is served from memory by a reader that counts requests and bytes and, with
//! `--rtt-ms`, waits that long per request (a network's round trip), so the figures are the
//! traffic a real server would see and the time without a network's noise.
//!
//! ```text
//! cargo run --release --example remote_row_cache -- [--rows N] [--chunk BYTES] [--rtt-ms MS] [--quick]
//! ```

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edo::cache::{CacheSpec, HostCache, PolicyKind};
use edo::file::remote::{RangeReader, RemoteTable};
use edo::file::TableFile;
use edo::{block_on, Bounds, Format, PackedTable};

/// A file in memory, read by ranges, counting requests and bytes; each request waits `rtt`.
struct Served {
    bytes: Arc<Vec<u8>>,
    requests: AtomicU64,
    served: AtomicU64,
    rtt: Duration,
}

impl RangeReader for &Served {
    async fn read(&self, range: Range<u64>) -> Result<(Vec<u8>, u64), edo::Error> {
        let len = self.bytes.len() as u64;
        let r = range.start.min(len) as usize..range.end.min(len) as usize;
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.served.fetch_add((r.end - r.start) as u64, Ordering::Relaxed);
        if !self.rtt.is_zero() {
            std::thread::sleep(self.rtt);
        }
        Ok((self.bytes[r].to_vec(), len))
    }
    fn name(&self) -> String {
        "memory".into()
    }
}

fn quantile(times: &[f64], q: f64) -> f64 {
    let mut t = times.to_vec();
    t.sort_by(f64::total_cmp);
    t[((q * t.len() as f64).ceil() as usize).clamp(1, t.len()) - 1]
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map_or(default, |v| v.parse().expect("a number"))
}

fn main() -> Result<(), edo::Error> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let rows = arg(&args, "--rows", if quick { 100_000 } else { 1_000_000 }) as usize;
    let chunk = arg(&args, "--chunk", 64 << 10) as usize;
    let rtt = Duration::from_millis(arg(&args, "--rtt-ms", 0));
    let (dim, batch, fraction, zipf) = (64, 4096, 0.10, 1.05);
    let (warm, timed) = if quick { (20, 20) } else { (200, 100) };
    let table = PackedTable::quantize(Format::Int8, &edo::synth::embedding_table(rows, dim, 1), rows, dim)?;
    let file = Served { bytes: Arc::new(TableFile::new(table.clone()).with_chunk_bytes(chunk)?.to_bytes()), requests: 0.into(), served: 0.into(), rtt };
    let ids = edo::synth::zipf_ids((warm + timed) * batch, rows, zipf, 2);
    let batches: Vec<&[u32]> = ids.chunks(batch).collect();
    println!(
        "{rows} × {dim} int8 table, a {} MiB file with {} KiB checksum chunks; Zipf({zipf}) batches of {batch} ids: {warm} warm-up, {timed} timed{}",
        file.bytes.len() >> 20,
        chunk >> 10,
        if rtt.is_zero() { String::new() } else { format!("; {} ms per request", rtt.as_millis()) }
    );

    let remote = block_on(RemoteTable::open(&file))?;
    let capacity = (fraction * rows as f64) as usize;
    let cache = HostCache::new(CacheSpec { source: &remote, capacity, policy: PolicyKind::Lfu })?;
    for b in &batches[..warm] {
        block_on(cache.gather(b, Bounds::Error))?;
    }
    cache.reset_stats();
    // Each timed batch: straight from the remote table, then through the cache.
    let (mut direct, mut cached) = ((0u64, 0u64, Vec::new()), (0u64, 0u64, Vec::new()));
    for b in &batches[warm..] {
        for (through_cache, acc) in [(false, &mut direct), (true, &mut cached)] {
            let (r0, s0) = (file.requests.load(Ordering::Relaxed), file.served.load(Ordering::Relaxed));
            let t = Instant::now();
            let out = if through_cache { block_on(cache.gather(b, Bounds::Error))? } else { block_on(remote.gather(b, Bounds::Error))? };
            acc.2.push(t.elapsed().as_secs_f64());
            std::hint::black_box(out);
            acc.0 += file.requests.load(Ordering::Relaxed) - r0;
            acc.1 += file.served.load(Ordering::Relaxed) - s0;
        }
    }
    let s = cache.stats();
    let last = batches[batches.len() - 1];
    assert_eq!(block_on(cache.gather(last, Bounds::Error))?, edo::cpu::gather(&table, last, Bounds::Error)?, "the cache returns the table's rows");
    println!("LFU cache of {capacity} rows ({} % of the rows) in host memory: hit rate {:.4}", (100.0 * fraction) as u32, s.hit_rate());
    println!("{:<16} {:>14} {:>18} {:>22}", "", "requests/batch", "bytes fetched/id", "ms per batch p50 / p99");
    for (name, (requests, bytes, times)) in [("remote, direct", &direct), ("through the cache", &cached)] {
        println!(
            "{name:<16} {:>14.1} {:>18.0} {:>13.2} / {:>6.2}",
            *requests as f64 / timed as f64,
            *bytes as f64 / (timed * batch) as f64,
            1e3 * quantile(times, 0.5),
            1e3 * quantile(times, 0.99)
        );
    }
    println!(
        "the cache fetches {:.1}× fewer bytes and answers {:.1}× faster (sums over the timed batches)",
        direct.1 as f64 / cached.1.max(1) as f64,
        direct.2.iter().sum::<f64>() / cached.2.iter().sum::<f64>()
    );
    Ok(())
}
