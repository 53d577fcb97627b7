//! `edo eval` and `edo bench search`.

use std::path::PathBuf;

use crate::reports::eval::{self, EvalConfig};
use clap::Args;
use edo::{Engine, Format, PackedTable};

use crate::bench::human_bytes;
use crate::tables::SourceArgs;
use crate::{exit, Failure};

/// The engine, unless `--cpu`; without an adapter, the CPU path with a note.
fn engine(cpu: bool, quiet: bool) -> Option<Engine> {
    if cpu {
        return None;
    }
    match Engine::new_blocking(Default::default()) {
        Ok(e) => Some(e),
        Err(e) => {
            if !quiet {
                eprintln!("edo: no GPU ({e}); the CPU path only");
            }
            None
        }
    }
}

#[derive(Args)]
pub struct EvalArgs {
    /// A float table to evaluate on (any import: .safetensors, .npy, word2vec text, .edo); its
    /// last --queries rows are the queries. Default: synthetic clustered unit vectors.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Tensor to read from a safetensors --input.
    #[arg(long, requires = "input")]
    tensor: Option<String>,
    /// Rows of the synthetic corpus.
    #[arg(long, default_value_t = 50_000)]
    rows: usize,
    /// Values per row of the synthetic corpus.
    #[arg(long, default_value_t = 256)]
    dim: usize,
    /// Queries.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Candidates per result for rescoring.
    #[arg(long, default_value_t = 4)]
    multiplier: usize,
    /// Timed repetitions per method (the median is reported).
    #[arg(long, default_value_t = 3, value_parser = crate::parse_iters)]
    iters: usize,
    /// The CPU path only.
    #[arg(long)]
    cpu: bool,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn eval(a: EvalArgs) -> Result<(), Failure> {
    if a.multiplier == 0 {
        return Err(Failure::new(exit::USAGE, "--multiplier must be at least 1"));
    }
    let (mut corpus, rows, dim, queries) = match &a.input {
        Some(path) => {
            let imported = SourceArgs::default().with_tensor(a.tensor.clone()).read(path)?;
            let (rows, dim) = (imported.rows(), imported.dim());
            if rows <= a.queries {
                return Err(Failure::new(exit::USAGE, format!("{} has {rows} rows; --queries {} leaves none to search", path.display(), a.queries)));
            }
            let values = imported.values().into_owned();
            let split = (rows - a.queries) * dim;
            let queries = values[split..].to_vec();
            let mut corpus = values;
            corpus.truncate(split);
            (corpus, rows - a.queries, dim, queries)
        }
        None => {
            if a.rows == 0 || a.dim == 0 || a.queries == 0 {
                return Err(Failure::new(exit::USAGE, "--rows, --dim and --queries must be at least 1"));
            }
            let all = edo::synth::clustered(a.rows + a.queries, a.dim, 42);
            let split = a.rows * a.dim;
            (all[..split].to_vec(), a.rows, a.dim, all[split..].to_vec())
        }
    };
    // Cosine similarity: unit rows and queries.
    corpus.chunks_exact_mut(dim).for_each(edo::synth::normalize);
    let mut queries = queries;
    queries.chunks_exact_mut(dim).for_each(edo::synth::normalize);
    let engine = engine(a.cpu, a.json);
    if !a.json {
        eprintln!("  … evaluating {} queries on {rows} × {dim}", queries.len() / dim);
    }
    let config = EvalConfig { multiplier: a.multiplier, iters: a.iters };
    let report = eval::evaluate(&corpus, rows, dim, &queries, &config, engine.as_ref())?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("JSON"));
        return Ok(());
    }
    println!();
    println!("edo eval — {} × {} corpus, {} queries, cosine similarity; ground truth: exact FP32 top-100", report.rows, report.dim, report.queries);
    println!("GPU: {}", report.adapter.as_deref().unwrap_or("none (CPU path only)"));
    println!();
    println!("{:<36} {:>4} {:>11} {:>8} {:>10} {:>9} {:>9} {:>9}", "method", "path", "memory", "vs fp32", "ms/query", "recall@1", "@10", "@100");
    for m in &report.methods {
        println!(
            "{:<36} {:>4} {:>11} {:>8.3} {:>10.3} {:>9.3} {:>9.3} {:>9.3}",
            m.name,
            m.path,
            human_bytes(m.bytes),
            m.ratio_to_fp32,
            m.ms_per_query,
            m.recall_at_1,
            m.recall_at_10,
            m.recall_at_100
        );
    }
    println!();
    println!("recall@k: the share of the true top-k found among a method's first k. ms/query: the whole batch's");
    println!("wall time over the queries (median of runs). Rescoring takes k × {} Hamming candidates and ranks them", report.multiplier);
    println!("by the dot product with their INT8 rows; asymmetric search scores the float query against ±scale rows.");
    Ok(())
}

#[derive(Args)]
pub struct SearchBenchArgs {
    /// Corpus rows (random codes).
    #[arg(long, default_value_t = 1_000_000)]
    rows: usize,
    /// Bits per code.
    #[arg(long, default_value_t = 256)]
    bits: usize,
    /// Queries.
    #[arg(long, default_value_t = 100)]
    queries: usize,
    /// Neighbours per query.
    #[arg(long, short, default_value_t = 10)]
    k: usize,
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = crate::parse_iters)]
    iters: usize,
    /// Corpus codes from a .npy of packbits bytes (u8 [rows, bits/8]) instead of random ones.
    #[arg(long, requires = "query_codes")]
    codes: Option<PathBuf>,
    /// Query codes from a .npy of packbits bytes.
    #[arg(long, requires = "codes")]
    query_codes: Option<PathBuf>,
    /// The CPU path only.
    #[arg(long)]
    cpu: bool,
    /// Print the report (with the CPU path's ids and distances) as JSON on stdout.
    #[arg(long)]
    json: bool,
}

fn read_codes(path: &std::path::Path) -> Result<PackedTable, Failure> {
    let imported = SourceArgs::default().with_layout("packbits").read(path)?;
    Ok(imported.to_format(Format::Binary)?)
}

pub fn search_bench(a: SearchBenchArgs) -> Result<(), Failure> {
    if a.k == 0 || a.k > edo::search::MAX_K {
        return Err(Failure::new(exit::USAGE, format!("-k {}: a search returns 1 to {} results", a.k, edo::search::MAX_K)));
    }
    let (corpus, queries) = match (&a.codes, &a.query_codes) {
        (Some(c), Some(q)) => (read_codes(c)?, read_codes(q)?),
        _ => {
            if a.rows == 0 || a.bits == 0 || a.queries == 0 {
                return Err(Failure::new(exit::USAGE, "--rows, --bits and --queries must be at least 1"));
            }
            (edo::synth::random_codes(a.rows, a.bits, 1), edo::synth::random_codes(a.queries, a.bits, 2))
        }
    };
    let engine = engine(a.cpu, a.json);
    let b = eval::search_bench(&corpus, &queries, a.k, a.iters, engine.as_ref())?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&b).expect("JSON"));
        return Ok(());
    }
    let code_bytes = (corpus.rows() * corpus.format().code_bytes(corpus.dim())) as u64;
    println!();
    println!("edo bench search — Hamming top-{} of {} queries against {} codes of {} bits ({})", b.k, b.queries, b.rows, b.bits, human_bytes(code_bytes));
    println!("{:<5} {:>12} {:>14} {:>14}", "path", "ms (batch)", "queries/s", "scan GB/s");
    println!("{:<5} {:>12.2} {:>14.1} {:>14.2}   ({} threads)", "CPU", 1e3 * b.cpu_seconds, b.cpu_queries_per_second, b.cpu_scan_gbps, b.threads);
    match (b.gpu_seconds, b.gpu_queries_per_second, b.gpu_scan_gbps) {
        (Some(s), Some(qps), Some(scan)) => {
            println!("{:<5} {:>12.2} {:>14.1} {:>14.2}   ({})", "GPU", 1e3 * s, qps, scan, b.adapter.as_deref().unwrap_or(""));
            println!();
            println!(
                "GPU scan rate: {:.3} of the device's own copy ({:.1} GB/s, measured now); GPU/CPU: {:.2}×; results equal the CPU path's: {}",
                b.gpu_scan_ratio_to_copy.unwrap_or(f64::NAN),
                b.gpu_copy_gbps.unwrap_or(f64::NAN),
                b.cpu_seconds / s,
                if b.gpu_equals_cpu == Some(true) { "yes" } else { "NO" }
            );
            if let (Some(reads), Some(ratio)) = (b.gpu_corpus_reads, b.gpu_read_ratio_to_copy) {
                println!(
                    "GPU reads of the corpus per batch: {reads} ({:.2} queries a read); bytes read {ratio:.3} of the device's copy",
                    b.queries as f64 / reads.max(1) as f64
                );
            }
            if b.gpu_equals_cpu != Some(true) {
                return Err(Failure::new(exit::FAILURE, "the GPU's neighbours differ from the CPU path's"));
            }
        }
        _ => println!("GPU   none"),
    }
    println!("scan GB/s: code bytes × queries per second. Timings include query upload and readback, not the corpus upload.");
    println!("Peer: scripts/peers/faiss_peer.py runs faiss IndexBinaryFlat on the same codes and prints the ratio.");
    Ok(())
}
