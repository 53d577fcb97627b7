//! `edo embed`.

use std::path::PathBuf;

use clap::Args;
use edo::file::{export::Array, npy};
use edo::model::StaticModel;
use edo::{Engine, EngineOptions, Format, GpuStaticModel};

use crate::{exit, parse_format, Failure};

#[derive(Args)]
pub struct EmbedArgs {
    /// A static embedding model folder: model2vec's (config.json, tokenizer.json,
    /// model.safetensors) or sentence-transformers' StaticEmbedding.
    model: PathBuf,
    /// A text to embed; repeat for several.
    #[arg(long = "text")]
    texts: Vec<String>,
    /// A file of texts, one per line.
    #[arg(long, conflicts_with = "texts")]
    input: Option<PathBuf>,
    /// Hold the table in this format (fp32, fp16, int8, int4, binary, binary+scale, q8_0, q4_0,
    /// q4_1, q5_0, q5_1, q4_k, q6_k, fp8_e4m3, fp8_e5m2, int4_g64, int4_zp32 and the other
    /// group-wise formats).
    #[arg(long, value_parser = parse_format)]
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
    let mut model = StaticModel::from_dir(&a.model)?;
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
