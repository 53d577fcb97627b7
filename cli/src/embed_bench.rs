//! `edo bench embed`.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use edo::model::StaticModel;
use edo::{Engine, EngineOptions, Format, GpuStaticModel};
use edo_bench::measure::median;
use serde_json::json;

use crate::{exit, Failure, FormatParser};

#[derive(Args)]
pub struct EmbedBenchArgs {
    /// A static embedding model: an .edo model file (`edo quantize-model`) or a folder
    /// (model2vec, sentence-transformers StaticEmbedding).
    model: PathBuf,
    /// Table formats to time, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = FormatParser, default_value = "fp32,int8")]
    formats: Vec<Format>,
    /// Timed repetitions per batch (the median is reported).
    #[arg(long, default_value_t = 7, value_parser = crate::parse_iters)]
    iters: usize,
    /// Run the CPU path only, even when a GPU is present.
    #[arg(long)]
    cpu: bool,
    /// Write the 1024 texts, one per line, for a peer to time on the same texts
    /// (scripts/peers/model2vec_peer.py).
    #[arg(long)]
    texts_out: Option<PathBuf>,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
}

/// 1024 short texts of 4 to 15 common words, the same on every run.
pub fn texts() -> Vec<String> {
    const WORDS: [&str; 48] = [
        "the",
        "model",
        "embedding",
        "search",
        "quick",
        "table",
        "vector",
        "query",
        "fast",
        "small",
        "GPU",
        "browser",
        "memory",
        "token",
        "sentence",
        "retrieval",
        "similar",
        "document",
        "about",
        "with",
        "and",
        "for",
        "from",
        "that",
        "what",
        "how",
        "best",
        "river",
        "city",
        "music",
        "night",
        "green",
        "light",
        "water",
        "people",
        "time",
        "world",
        "learn",
        "cheap",
        "phone",
        "laptop",
        "server",
        "cafe",
        "naïve",
        "résumé",
        "東京",
        "🙂",
        "2026",
    ];
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    (0..1024).map(|_| (0..4 + next() % 12).map(|_| WORDS[(next() % WORDS.len() as u64) as usize]).collect::<Vec<_>>().join(" ")).collect()
}

pub fn embed_bench(a: EmbedBenchArgs) -> Result<(), Failure> {
    let base = StaticModel::open(&a.model)?;
    let texts = texts();
    if let Some(path) = &a.texts_out {
        std::fs::write(path, texts.join("\n") + "\n").map_err(|e| Failure::new(exit::CANT_CREATE, format!("{}: {e}", path.display())))?;
    }
    let all: Vec<&str> = texts.iter().map(String::as_str).collect();
    let tokens: usize = base.tokenize(&all)?.iter().map(Vec::len).sum();
    let engine = if a.cpu { None } else { Engine::new_blocking(EngineOptions::default()).ok() };
    let mut rows = Vec::new();
    for &format in &a.formats {
        let model = base.quantize(format)?;
        let gpu = match &engine {
            Some(e) => Some(edo::block_on(GpuStaticModel::upload(e, &model))?),
            None => None,
        };
        for batch in [1usize, 32, 1024] {
            let chunks: Vec<&[&str]> = all.chunks(batch).take((1024 / batch).clamp(1, 64)).collect();
            let n_texts: usize = chunks.iter().map(|c| c.len()).sum();
            let n_tokens: usize = chunks.iter().map(|c| model.tokenize(c).map(|t| t.iter().map(Vec::len).sum::<usize>())).sum::<Result<usize, _>>()?;
            let time = |run: &mut dyn FnMut() -> Result<(), Failure>| -> Result<f64, Failure> {
                run()?;
                let mut times = Vec::new();
                for _ in 0..a.iters {
                    let t = Instant::now();
                    run()?;
                    times.push(t.elapsed().as_secs_f64());
                }
                Ok(median(times))
            };
            let cpu = time(&mut || {
                for c in &chunks {
                    std::hint::black_box(model.encode(c)?);
                }
                Ok(())
            })?;
            let gpu_s = match &gpu {
                Some(g) => Some(time(&mut || {
                    for c in &chunks {
                        std::hint::black_box(edo::block_on(g.encode(c))?.read_blocking()?);
                    }
                    Ok(())
                })?),
                None => None,
            };
            rows.push(json!({
                "format": format.name(),
                "table_bytes": model.table().bytes(),
                "batch": batch,
                "texts": n_texts,
                "tokens": n_tokens,
                "cpu_texts_per_second": n_texts as f64 / cpu,
                "cpu_tokens_per_second": n_tokens as f64 / cpu,
                "gpu_texts_per_second": gpu_s.map(|s| n_texts as f64 / s),
            }));
        }
    }
    let report = json!({
        "model": a.model.display().to_string(),
        "dim": base.dim(),
        "vocab": base.vocab_size(),
        "tokens_per_text": tokens as f64 / texts.len() as f64,
        "threads": edo_bench::measure::threads(),
        "adapter": engine.as_ref().map(|e| e.adapter().to_string()),
        "runs": rows,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?);
        return Ok(());
    }
    println!();
    println!(
        "edo bench embed — {} (dim {}, vocab {}), 1024 short texts, {:.1} tokens each",
        a.model.display(),
        base.dim(),
        base.vocab_size(),
        tokens as f64 / 1024.0
    );
    match &report["adapter"] {
        serde_json::Value::String(s) => println!("GPU: {s}"),
        _ => println!("GPU: none — the CPU path only"),
    }
    println!("CPU path: {} threads (the tokenizer on all of them)", edo_bench::measure::threads());
    println!();
    println!("{:<8} {:>10} {:>6} {:>14} {:>15} {:>14}", "format", "table", "batch", "CPU texts/s", "CPU tokens/s", "GPU texts/s");
    for r in report["runs"].as_array().unwrap() {
        let gpu = r["gpu_texts_per_second"].as_f64().map_or("—".to_string(), |v| format!("{v:.0}"));
        println!(
            "{:<8} {:>10} {:>6} {:>14.0} {:>15.0} {:>14}",
            r["format"].as_str().unwrap(),
            crate::bench::human_bytes(r["table_bytes"].as_u64().unwrap()),
            r["batch"].as_u64().unwrap(),
            r["cpu_texts_per_second"].as_f64().unwrap(),
            r["cpu_tokens_per_second"].as_f64().unwrap(),
            gpu
        );
    }
    println!();
    println!("GPU texts/s include tokenizing on the host and reading the vectors back.");
    Ok(())
}
