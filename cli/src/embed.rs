//! `edo embed`.

use std::path::PathBuf;

use clap::Args;
use edo::file::{export::Array, npy};
use edo::model::StaticModel;
use edo::{Engine, EngineOptions, Format, GpuStaticModel};
use indicatif::{ProgressBar, ProgressStyle};

use crate::{exit, Failure, FormatParser};

#[derive(Args)]
pub struct EmbedArgs {
    /// A static embedding model: an .edo model file (`edo quantize-model`), or a folder —
    /// model2vec's (config.json, tokenizer.json, model.safetensors) or sentence-transformers'
    /// StaticEmbedding.
    model: PathBuf,
    /// A text to embed; repeat for several.
    #[arg(long = "text")]
    texts: Vec<String>,
    /// A file of texts, one per line.
    #[arg(long, conflicts_with = "texts")]
    input: Option<PathBuf>,
    /// Hold the table in this format.
    #[arg(long, value_parser = FormatParser)]
    format: Option<Format>,
    /// Pool on the GPU (the tokenizer runs on the CPU either way).
    #[arg(long)]
    gpu: bool,
    /// Write the vectors to this .npy file (f32, texts × dim).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Print the vectors as JSON (one array per text).
    #[arg(long)]
    json: bool,
}

pub fn embed(a: EmbedArgs) -> Result<(), Failure> {
    let mut model = StaticModel::open(&a.model)?;
    if let Some(f) = a.format {
        model = model.quantize(f)?;
    }
    let lines;
    let texts: Vec<&str> = match &a.input {
        Some(path) => {
            lines = std::fs::read_to_string(path).map_err(|e| Failure::new(exit::NO_INPUT, format!("{}: {e}", path.display())))?;
            lines.lines().collect()
        }
        None if a.texts.is_empty() => return Err(Failure::new(exit::USAGE, "give texts with --text T (repeatable) or --input FILE")),
        None => a.texts.iter().map(String::as_str).collect(),
    };
    let started = std::time::Instant::now();
    let (vectors, path) = if a.gpu {
        let engine = Engine::new_blocking(EngineOptions::default())?;
        let gpu = edo::block_on(GpuStaticModel::upload(&engine, &model))?;
        let vectors = edo::block_on(gpu.encode(&texts))?.read_blocking()?;
        (vectors, format!("GPU ({})", engine.adapter()))
    } else {
        (model.encode(&texts)?, "CPU path".to_string())
    };
    let seconds = started.elapsed().as_secs_f64();
    let dim = model.dim();
    if let Some(out) = &a.output {
        let data: Vec<u8> = vectors.iter().flat_map(|x| x.to_le_bytes()).collect();
        let array = Array { dtype: npy::Dtype::F32, shape: vec![texts.len(), dim], data };
        std::fs::write(out, array.to_npy()).map_err(|e| Failure::new(exit::CANT_CREATE, format!("{}: {e}", out.display())))?;
    }
    if a.json {
        let rows: Vec<&[f32]> = vectors.chunks_exact(dim.max(1)).collect();
        println!("{}", serde_json::to_string(&rows).map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?);
        return Ok(());
    }
    println!(
        "{} texts → {} × {dim} vectors ({}, table {} in {}, {}) in {:.1} ms",
        texts.len(),
        texts.len(),
        if model.normalize() { "L2-normalised" } else { "not normalised" },
        crate::bench::human_bytes(model.table().bytes()),
        model.table().format(),
        path,
        seconds * 1e3
    );
    for (text, v) in texts.iter().zip(vectors.chunks_exact(dim.max(1))).take(10) {
        let shown: Vec<String> = v.iter().take(6).map(|x| format!("{x:+.4}")).collect();
        let text: String = text.chars().take(40).collect();
        println!("  {text:<40}  [{}{}]", shown.join(", "), if dim > 6 { ", …" } else { "" });
    }
    if texts.len() > 10 {
        println!("  … {} more", texts.len() - 10);
    }
    if let Some(out) = &a.output {
        println!("wrote {}", out.display());
    }
    Ok(())
}

#[derive(Args)]
pub struct QuantizeModelArgs {
    /// The model: a folder (model2vec's, sentence-transformers' StaticEmbedding), an .edo model
    /// file, or with --wordllama WordLlama's weights (.safetensors with embedding.weight).
    source: PathBuf,
    /// The table's format in the file.
    #[arg(long, default_value = "int8", value_parser = FormatParser)]
    format: Format,
    /// The .edo model file to write: table, tokenizer, mapping, weights and settings in one file.
    #[arg(short, long)]
    output: PathBuf,
    /// The source is a WordLlama model: its weights file, with --tokenizer.
    #[arg(long, requires = "tokenizer")]
    wordllama: bool,
    /// WordLlama's tokenizer.json (its wheel's tokenizers/l2_supercat_tokenizer_config.json).
    #[arg(long, requires = "wordllama")]
    tokenizer: Option<PathBuf>,
    /// WordLlama: keep the first DIM dimensions (Matryoshka truncation: 64, 128, 256, …).
    #[arg(long, requires = "wordllama")]
    dim: Option<usize>,
    /// Normalise the sentence vectors (WordLlama's are not by default; model2vec's config says).
    #[arg(long)]
    normalize: Option<bool>,
}

pub fn quantize_model(a: QuantizeModelArgs) -> Result<(), Failure> {
    if a.output.extension().and_then(|e| e.to_str()) != Some("edo") {
        return Err(Failure::new(exit::USAGE, format!("{}: the output of quantize-model is an .edo model file", a.output.display())));
    }
    let read = |p: &PathBuf| std::fs::read(p).map_err(|e| Failure::new(exit::NO_INPUT, format!("{}: {e}", p.display())));
    let started = std::time::Instant::now();
    let mut source = if a.wordllama {
        let tokenizer = read(a.tokenizer.as_ref().expect("clap requires --tokenizer"))?;
        StaticModel::from_wordllama(&tokenizer, &read(&a.source)?, a.dim)?
    } else {
        StaticModel::open(&a.source)?
    };
    if let Some(n) = a.normalize {
        source = source.with_normalize(n);
    }
    let bar = ProgressBar::new_spinner().with_style(ProgressStyle::with_template("{spinner} {msg}").expect("a valid template"));
    bar.set_message(format!("quantising {} × {} to {}", source.table().rows(), source.dim(), a.format));
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    let model = source.quantize(a.format)?;
    bar.set_message("checking the sentence vectors against the source's");
    // How much the format changes the sentence vectors: 1024 short texts, source against file.
    let texts = crate::embed_bench::texts();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (exact, got) = (source.encode(&texts)?, model.encode(&texts)?);
    bar.set_message(format!("writing {}", a.output.display()));
    let file = model.to_edo();
    file.write(&a.output)?;
    bar.finish_and_clear();
    let dim = model.dim().max(1);
    let cosines: Vec<f64> = exact
        .chunks_exact(dim)
        .zip(got.chunks_exact(dim))
        .filter_map(|(x, y)| {
            let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(p, q)| *p as f64 * *q as f64).sum::<f64>();
            let n = (dot(x, x) * dot(y, y)).sqrt();
            (n > 0.0).then(|| dot(x, y) / n)
        })
        .collect();
    let size = std::fs::metadata(&a.output).map(|m| m.len()).unwrap_or(0);
    println!(
        "{} → {} in {:.1} s: {}-token vocabulary, {} × {} table, {} {} → {} {}, {}",
        a.source.display(),
        a.output.display(),
        started.elapsed().as_secs_f64(),
        model.vocab_size(),
        model.table().rows(),
        model.dim(),
        source.table().format(),
        crate::bench::human_bytes(source.table().bytes()),
        model.table().format(),
        crate::bench::human_bytes(model.table().bytes()),
        if model.normalize() { "L2-normalised" } else { "not normalised" },
    );
    if let (Some(min), false) = (cosines.iter().copied().reduce(f64::min), cosines.is_empty()) {
        println!(
            "sentence vectors against the source's, {} texts: mean cosine {:.6}, least {:.6}",
            cosines.len(),
            cosines.iter().sum::<f64>() / cosines.len() as f64,
            min
        );
    }
    println!("file: {} (embed with `edo embed {} --text …`)", crate::bench::human_bytes(size), a.output.display());
    Ok(())
}
