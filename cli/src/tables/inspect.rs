//! `edo inspect`: what a table or model file holds, its error against FP32, and GGUF listings.

use super::*;

#[derive(Args)]
pub struct InspectArgs {
    /// The .edo table file (or a .gguf model file, to list its tensors).
    file: PathBuf,
    /// The table it was made from, to measure the error against (default: the source recorded
    /// in the file by `edo quantize`, when it still exists).
    #[arg(long)]
    source: Option<PathBuf>,
    #[command(flatten)]
    read: SourceArgs,
    /// Where to write the picture (default: the file's name with .png).
    #[arg(long)]
    png: Option<PathBuf>,
    /// Write no picture.
    #[arg(long, conflicts_with = "png")]
    no_png: bool,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn inspect(a: InspectArgs) -> Result<(), Failure> {
    if FileKind::from_path(&a.file) == Some(FileKind::Gguf) {
        return inspect_gguf(&a.file, a.json);
    }
    // A reordered table's file is described as stored: rows in stored order, with its id map.
    require_edo(&a.file)?;
    let file = TableFile::open_stored(&a.file)?;
    let t = file.table();
    let id_map = file.id_map();
    let file_bytes = std::fs::metadata(&a.file).map(|m| m.len()).unwrap_or(0);
    let checksums = file.verify();
    let meta = file.metadata();

    // The source: given, or recorded (with how it was read) and still there.
    let (source_path, read) = match &a.source {
        Some(p) => (Some(p.clone()), a.read.clone()),
        None => {
            let recorded = meta.get("source").map(PathBuf::from).filter(|p| p.is_file());
            let read = SourceArgs {
                tensor: meta.get("source.tensor").cloned(),
                layout: meta.get("source.layout").cloned(),
                dim: meta.get("source.dim").and_then(|d| d.parse().ok()),
                partial: meta.get("source.partial").is_some_and(|v| v == "true"),
            };
            (recorded, read)
        }
    };
    let mut source_note = None;
    let source = match &source_path {
        Some(p) => {
            let imported = read.read(p)?;
            if (imported.rows(), imported.dim()) != (t.rows(), t.dim()) {
                return Err(Failure::new(
                    exit::DATA,
                    format!("{} is {} × {}, the table is {} × {}", p.display(), imported.rows(), imported.dim(), t.rows(), t.dim()),
                ));
            }
            Some(imported)
        }
        None => {
            source_note = Some(match meta.get("source") {
                Some(s) => format!("source {s} is not there any more; pass --source to compare"),
                None => "no source recorded; pass --source to compare".to_string(),
            });
            None
        }
    };
    // Codes made through a transform are compared with the transformed source, a reordered
    // table with the source's rows put in its stored order.
    let source_values = match (source.as_ref().map(|s| s.values()), file.code_transform()) {
        (Some(v), Some(ct)) => Some(std::borrow::Cow::Owned(ct.apply(&v)?)),
        (v, _) => v,
    };
    let source_values = match (source_values, id_map) {
        (Some(v), Some(map)) => {
            let dim = t.dim();
            let mut stored = vec![0f32; v.len()];
            for (id, &row) in map.iter().enumerate() {
                stored[row as usize * dim..][..dim].copy_from_slice(&v[id * dim..][..dim]);
            }
            Some(std::borrow::Cow::Owned(stored))
        }
        (v, _) => v,
    };
    let stats: Option<ErrorStats> = source_values.as_ref().map(|v| {
        let bound = source.as_ref().is_some_and(|s| s.format() == Format::F32).then_some(t.format());
        let mut stats = table_error_stats(v, t, bound);
        // The worst row named by its id, as the user looks it up.
        if let Some(map) = id_map {
            stats.worst_row = map.iter().position(|&row| row as usize == stats.worst_row).unwrap_or(stats.worst_row);
        }
        stats
    });

    let png = if a.no_png { None } else { Some(a.png.clone().unwrap_or_else(|| a.file.with_extension("png"))) };
    let legend = match &png {
        Some(path) => {
            let (img, legend) = picture(t, source_values.as_deref());
            img.save(path).map_err(|e| Failure::new(exit::CANT_CREATE, format!("{}: {e}", path.display())))?;
            Some(legend)
        }
        None => None,
    };

    let ratio = t.bytes() as f64 / t.f32_bytes().max(1) as f64;
    let model = if file.is_model() { Some(edo::model::StaticModel::from_edo(&file)?) } else { None };
    if a.json {
        let out = json!({
            "file": a.file, "format": t.format().name(), "rows": t.rows(), "dim": t.dim(),
            "packed_bytes": t.bytes(), "f32_bytes": t.f32_bytes(), "file_bytes": file_bytes, "ratio_to_fp32": ratio,
            "checksums_ok": checksums.is_ok(), "vocab": file.vocab().map(|v| v.len()), "metadata": meta,
            "codes": file.code_transform().map(|c| c.kind()), "reordered": id_map.is_some(),
            "row_alignment": t.row_alignment(), "gpu_bytes": t.gpu_bytes(),
            "source": source_path, "error": stats, "png": png, "picture": legend,
            "model": model.as_ref().map(|m| json!({
                "vocab_size": m.vocab_size(), "normalize": m.normalize(), "max_length": m.max_length(), "mapping": m.mapping().is_some(),
                "truncation": m.truncation().map(|t| json!({ "max_length": t.max_length, "keep_last": t.keep_last })),
            })),
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
    } else {
        println!("{}", a.file.display());
        let version = if file.keys().is_some() {
            edo::file::KEYS_VERSION
        } else if file.code_transform().is_some() {
            edo::file::CODE_TRANSFORM_VERSION
        } else if file.id_map().is_some() {
            edo::file::ID_MAP_VERSION
        } else {
            edo::file::VERSION
        };
        println!("  format      {} (edo table file v{version})", t.format());
        if let Some(keys) = file.keys() {
            println!("  keys        {} 64-bit keys, one a row (a live table's snapshot: `edo lookup --ids KEY`)", keys.len());
        }
        if let Some(ct) = file.code_transform() {
            let how = if ct.rotation().is_some() { "centred and rotated by ITQ: the signs of (x − mean)·R" } else { "centred: the signs of x − mean" };
            println!("  codes       {} ({how}; search with queries through the same)", ct.kind());
        }
        println!("  shape       {} rows × {} dim", t.rows(), t.dim());
        if id_map.is_some() {
            println!("  reordered   rows stored most looked-up first (`edo reorder`); an id map keeps the ids: look rows up with `edo lookup`");
        }
        println!("  size        {} packed, {} as fp32{}", mib(t.bytes()), mib(t.f32_bytes()), size_ratio(t.bytes(), t.f32_bytes()));
        println!("  file        {} on disk; checksums {}", mib(file_bytes), if checksums.is_ok() { "OK" } else { "FAILED" });
        if t.row_alignment() != edo::format::NO_ROW_ALIGNMENT {
            println!("  on a GPU    rows aligned to {} bytes: {}", t.row_alignment(), gpu_rows(t));
        }
        if let Some(m) = &model {
            println!(
                "  model       static embedding model: {}-token tokenizer, {}, {}",
                m.vocab_size(),
                match (m.max_length(), m.truncation()) {
                    (Some(l), _) => format!("first {l} tokens"),
                    (None, Some(t)) => format!("{} {} tokens (the tokenizer's truncation)", if t.keep_last { "last" } else { "first" }, t.max_length),
                    (None, None) => "no token limit".to_string(),
                },
                if m.normalize() { "L2-normalised" } else { "not normalised" }
            );
            if m.mapping().is_some() {
                println!(
                    "  mapping     its {} token ids → the table's {} rows (a quantised vocabulary's clusters, or rows reordered by `edo reorder`)",
                    m.vocab_size(),
                    t.rows()
                );
            }
        }
        if let Some(v) = file.vocab() {
            let dup = v.duplicates();
            println!("  vocabulary  {} tokens{}", v.len(), if dup > 0 { format!(" ({dup} repeated; a repeat maps to its first row)") } else { String::new() });
        }
        if !meta.is_empty() {
            println!("  metadata");
            for (k, v) in meta {
                println!("    {k:<24} {v}");
            }
        }
        match (&stats, &source_path) {
            (Some(_), Some(p)) if t.rows() == 0 => println!("error against {}: no rows to compare", p.display()),
            (Some(s), Some(p)) => {
                let transformed = if file.code_transform().is_some() { " through the code transform" } else { "" };
                println!("error against {}{}{transformed}:", p.display(), read.tensor.as_ref().map_or(String::new(), |t| format!(" [{t}]")));
                println!("  max |x − x̂|        {:.4e}", s.max_abs);
                println!("  mean |x − x̂|       {:.4e}", s.mean_abs);
                println!("  RMSE               {:.4e}", s.rmse);
                let q = &s.row_relative;
                println!("  row ‖x − x̂‖/‖x‖    median {:.4} · p90 {:.4} · p99 {:.4} · max {:.4} (row {})", q.p50, q.p90, q.p99, q.max, s.worst_row);
                println!("  cosine(x, x̂)       mean {:.6} · min {:.6}", s.mean_cosine, s.min_cosine);
                if let Some(n) = s.rows_beyond_bound {
                    println!("  documented bound   {} of {} rows within it", t.rows() - n, t.rows());
                }
            }
            // (Not "error:": nothing failed, there was nothing to compare with.)
            _ => println!("quantisation error not measured: {}", source_note.unwrap_or_default()),
        }
        if let (Some(path), Some(l)) = (&png, &legend) {
            let order = if id_map.is_some() { ", rows in stored order" } else { "" };
            println!("picture: {} ({} × {} px{order})", path.display(), l.width, l.height);
            println!("  left: values, blue −{0:.3} · white 0 · red +{0:.3} (99th percentile of |x|)", l.value_scale);
            if let Some(e) = l.error_scale {
                println!("  right: |x − x̂|, black 0 · red · yellow {e:.3e} (the largest among the rows shown)");
            }
            if l.rows_per_pixel > 1.0 {
                println!("  one pixel row per {:.1} table rows (rows sampled evenly, not averaged)", l.rows_per_pixel);
            }
            if l.cols_per_pixel > 1 {
                println!("  {} neighbouring columns averaged per pixel", l.cols_per_pixel);
            }
        }
    }
    checksums.map_err(Failure::from)
}

/// `edo inspect model.gguf`: the header's key-values and the tensors, with their ggml types and
/// whether edo reads them as tables.
pub(crate) fn inspect_gguf(path: &Path, json: bool) -> Result<(), Failure> {
    use edo::file::gguf::Gguf;
    require_input(path)?;
    let g = Gguf::open(path)?;
    let readable = |t: &edo::file::gguf::TensorInfo| g.is_table(t);
    if json {
        let tensors: Vec<_> = g
            .tensors
            .iter()
            .map(|t| {
                json!({ "name": t.name, "type": t.type_name(), "shape": t.shape(), "bytes": t.bytes, "offset": g.data_start + t.offset,
                        "table": readable(t), "rows_in_file": (t.dims.len() == 2).then(|| g.present_rows(t)) })
            })
            .collect();
        let meta: serde_json::Map<String, serde_json::Value> = g.metadata.iter().map(|(k, v)| (k.clone(), json!(v.to_string()))).collect();
        println!("{}", serde_json::to_string_pretty(&json!({ "file": path, "gguf_version": g.version, "metadata": meta, "tensors": tensors })).expect("JSON"));
        return Ok(());
    }
    println!("{}", path.display());
    println!("  GGUF v{}, {} key-values, {} tensors, data from byte {}", g.version, g.metadata.len(), g.tensors.len(), g.data_start);
    println!("  metadata");
    for (k, v) in &g.metadata {
        println!("    {k:<40} {v}");
    }
    println!("  tensors (* = a table edo reads: `edo quantize {} --tensor NAME`)", path.display());
    let mut cut = 0;
    for t in &g.tensors {
        let shape: Vec<String> = t.shape().iter().map(u64::to_string).collect();
        let size = t.bytes.map_or_else(|| "?".to_string(), mib);
        let rows = t.shape().first().copied().unwrap_or(0);
        let present = g.present_rows(t);
        let note = if t.dims.len() == 2 && present < rows { format!("  cut short: {present} of {rows} rows in this file") } else { String::new() };
        cut += usize::from(!note.is_empty());
        let mark = if readable(t) && note.is_empty() { "*" } else { " " };
        println!("  {mark} {:<40} {:<8} {:<16} {size}{note}", t.name, t.type_name(), shape.join(" × "));
    }
    if cut > 0 {
        println!("  {cut} tensors run past the end of the file: it is a split part or a truncated download");
    }
    Ok(())
}
