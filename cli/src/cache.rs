//! `edo bench cache`.

use crate::reports::cache_bench::{self as bench, CacheBenchConfig, Stream};
use clap::Args;
use edo::cache::PolicyKind;
use edo::{Engine, Format};

use crate::bench::human_bytes;
use crate::{exit, Failure, FormatParser};

#[derive(Args)]
pub struct CacheBenchArgs {
    /// Rows of the synthetic table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: usize,
    /// Values per row.
    #[arg(long, default_value_t = 64)]
    dim: usize,
    /// Format of the host table and the cache.
    #[arg(long, default_value = "int8", value_parser = FormatParser)]
    format: Format,
    /// Zipf exponent of the id stream.
    #[arg(long, default_value_t = 1.05)]
    zipf: f64,
    /// Ids per lookup.
    #[arg(long, default_value_t = 4096)]
    batch: usize,
    /// Batches that warm the caches first (not counted).
    #[arg(long, default_value_t = 1000)]
    warmup: usize,
    /// Timed batches.
    #[arg(long, default_value_t = 250)]
    batches: usize,
    /// Cache sizes as fractions of the rows, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "0.25,0.1")]
    fractions: Vec<f64>,
    /// Policies, comma separated (lru, lfu, arc; lru+tinylfu, lfu+tinylfu, arc+tinylfu behind
    /// W-TinyLFU admission). Default: all.
    #[arg(long, value_delimiter = ',', value_parser = parse_policy)]
    policies: Option<Vec<PolicyKind>>,
    /// The synthetic id stream: zipf (stationary), scan (Zipf with 20 % of the ids a scan of the
    /// whole table) or drift (Zipf whose hot set moves every eighth of the stream).
    #[arg(long, default_value = "zipf", value_parser = ["zipf", "scan", "drift"])]
    stream: String,
    /// Replay a trace of real lookups instead: one id a line, or a 1-D .npy of ids
    /// (scripts/fixtures/make_trace.py makes one). Its first half warms the caches; --warmup and --batches
    /// do not apply. Every id must be below --rows.
    #[arg(long, conflicts_with = "stream")]
    trace: Option<std::path::PathBuf>,
    /// No GPU: the CPU path's row cache (in host memory) beside the resident table's CPU gather.
    #[arg(long)]
    cpu: bool,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

fn parse_policy(s: &str) -> Result<PolicyKind, String> {
    PolicyKind::from_name(s).ok_or_else(|| format!("unknown policy {s:?} ({})", PolicyKind::ALL.map(|k| k.name()).join(", ")))
}

pub fn cache_bench(a: CacheBenchArgs) -> Result<(), Failure> {
    if a.fractions.iter().any(|f| !(*f > 0.0 && *f <= 1.0)) {
        return Err(Failure::new(exit::USAGE, "--fractions must lie in (0, 1]"));
    }
    if !(a.zipf > 0.0 && a.zipf.is_finite()) {
        return Err(Failure::new(exit::USAGE, "--zipf must be a finite exponent > 0"));
    }
    if a.rows == 0 || a.dim == 0 || a.batch == 0 || a.batches == 0 || a.rows > u32::MAX as usize {
        return Err(Failure::new(exit::USAGE, "--rows (≤ 2^32 − 1), --dim, --batch and --batches must be at least 1"));
    }
    let engine = if a.cpu {
        None
    } else {
        match Engine::new_blocking(Default::default()) {
            Ok(e) => Some(e),
            Err(e) => {
                if !a.json {
                    eprintln!("edo: no GPU ({e}); measuring the CPU path's row cache");
                }
                None
            }
        }
    };
    let n = (a.warmup + a.batches) * a.batch;
    let stream = match (&a.trace, a.stream.as_str()) {
        (Some(path), _) => {
            let bytes = std::fs::read(path).map_err(|e| Failure::new(exit::USAGE, format!("{}: {e}", path.display())))?;
            let ids = edo::cache::parse_trace(&bytes, Some(a.rows)).map_err(|e| Failure::new(exit::USAGE, format!("{}: {e}", path.display())))?;
            Stream::Trace(path.display().to_string(), ids)
        }
        (None, "scan") => Stream::Scan(0.2),
        (None, "drift") => Stream::Drift(n.div_ceil(8)),
        (None, _) => Stream::Zipf,
    };
    let config = CacheBenchConfig {
        rows: a.rows,
        dim: a.dim,
        format: a.format,
        zipf: a.zipf,
        batch: a.batch,
        warmup_batches: a.warmup,
        batches: a.batches,
        fractions: a.fractions,
        policies: a.policies.unwrap_or_else(|| PolicyKind::ALL.to_vec()),
        stream,
    };
    let quiet = a.json;
    let b = bench::run(&config, engine.as_ref(), |step| {
        if !quiet {
            eprintln!("  … {step}");
        }
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&b).expect("JSON"));
    } else {
        print(&b);
    }
    if b.equals_resident == Some(false) {
        return Err(Failure::new(exit::FAILURE, "a cached lookup differs from the resident table's"));
    }
    Ok(())
}

fn print(b: &bench::CacheBench) {
    println!();
    println!(
        "edo bench cache — {} × {} {} table ({}), {}, batches of {}: {} warm-up, {} timed",
        b.rows,
        b.dim,
        b.format,
        human_bytes(b.table_bytes),
        b.stream,
        b.batch,
        b.warmup_batches,
        b.batches
    );
    match (&b.adapter, b.resident_lookups_per_second) {
        (Some(adapter), Some(lps)) => println!("GPU: {adapter}; fully resident table: {:.2} M lookups/s", lps / 1e6),
        (None, Some(lps)) => {
            println!("no GPU: the CPU path's row cache in host memory (edo::cache::HostCache); resident table (edo::cpu::gather): {:.2} M lookups/s", lps / 1e6)
        }
        _ => println!("no lookup rates"),
    }
    println!();
    println!(
        "{:<24} {:>7} {:>11} {:>9} {:>8} {:>8} {:>13} {:>12} {:>12}",
        "policy", "cache", "bytes", "hit rate", "optimum", "belady", "uploaded/id", "M lookups/s", "vs resident"
    );
    for r in &b.runs {
        let name = if r.prefetch { format!("{} + prefetch", r.policy) } else { r.policy.clone() };
        let of = |v: &[(f64, f64)]| v.iter().find(|(f, _)| *f == r.fraction).map_or("—".to_string(), |(_, o)| format!("{o:.4}"));
        let rate = r.lookups_per_second.map(|l| format!("{:.2}", l / 1e6)).unwrap_or_else(|| "—".into());
        let ratio = r.ratio_to_resident.map(|x| format!("{x:.2}")).unwrap_or_else(|| "—".into());
        println!(
            "{:<24} {:>6.0}% {:>11} {:>9.4} {:>8} {:>8} {:>11.1} B {:>12} {:>12}",
            name,
            100.0 * r.fraction,
            human_bytes(r.cache_bytes),
            r.hit_rate,
            of(&b.static_optimum),
            of(&b.belady),
            r.bytes_uploaded_per_lookup,
            rate,
            ratio
        );
    }
    println!();
    println!("hit rate: lookups served from the cache after the warm-up (a repeat within a batch is a hit). optimum: the");
    println!("expected hit rate of a cache that always holds the most probable rows, the best any policy can do on a stationary");
    println!("Zipf stream. belady: the offline bound on these very ids (it knows the future; no online policy reaches it).");
    if b.adapter.is_some() {
        println!("uploaded/id: packed bytes sent to the GPU per looked-up id. Lookup rates include the host-side mapping,");
        println!("reading rows, the upload and the gather, and wait for the GPU after each batch; each cached batch is timed right");
        println!("after the resident table's gather of the same batch, and \"vs resident\" is the ratio of the two sums.");
    } else {
        println!("uploaded/id: packed bytes read from the source into the cache per looked-up id. Lookup rates include the");
        println!("mapping, copying hits, reading misses from the source (here a table in memory: the cost of a slow source is");
        println!("not in them) and decoding; each cached batch is timed right after the resident table's gather of the same");
        println!("batch, and \"vs resident\" is the ratio of the two sums.");
    }
    for r in b.runs.iter().filter(|r| r.prefetch) {
        println!(
            "{} + prefetch at {:.0} %: each batch's rows are staged on the GPU while the previous batch runs; {:.1} % of the misses came from the staging.",
            r.policy,
            100.0 * r.fraction,
            100.0 * r.staged_share_of_misses
        );
    }
    if b.runs.iter().any(|r| r.batch_p50_s.is_some()) {
        println!();
        println!("time per batch of {} ids, median / 99th percentile (the resident table's, timed beside each):", b.batch);
        let ms = |s: Option<f64>| s.map_or("—".to_string(), |s| format!("{:.2}", s * 1e3));
        for r in &b.runs {
            let name = if r.prefetch { format!("{} + prefetch", r.policy) } else { r.policy.clone() };
            println!(
                "  {:<24} {:>4.0} %   cached {:>8} / {:>8} ms   resident {:>8} / {:>8} ms",
                name,
                100.0 * r.fraction,
                ms(r.batch_p50_s),
                ms(r.batch_p99_s),
                ms(r.resident_batch_p50_s),
                ms(r.resident_batch_p99_s)
            );
        }
    }
    if let Some(eq) = b.equals_resident {
        println!("every cache's last batch equals the resident table's, bit for bit: {}", if eq { "yes" } else { "NO" });
    }
}
