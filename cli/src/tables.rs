//! `edo quantize`, `inspect`, `lookup` and `export`: table files from a shell.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::reports::inspect::{picture, table_error_stats, ErrorStats};
use clap::Args;
use edo::file::import::{self, FileKind, FileLayout, Imported};
use edo::file::{export as exp, TableFile};
use edo::GpuLookup;
use edo::{Bounds, Error, Format, PackedTable};
use serde_json::json;

use crate::bench::human_bytes as mib;
use crate::{exit, Failure, FormatParser};

/// Where a table comes from: a file, and how to read it.
#[derive(Args, Clone, Default)]
pub struct SourceArgs {
    /// Tensor to read from a safetensors file (e.g. embeddings.word_embeddings.weight); may be
    /// left out when the file has one 2-D tensor.
    #[arg(long)]
    tensor: Option<String>,
    /// How a byte (uint8/int8) array is laid out: fbgemm8, fbgemm4, packbits (numpy /
    /// sentence-transformers, MSB-first), packbits-lsb (faiss), or the name of the format `edo
    /// export` wrote it in (q8_0, int4_g32, q4_k, …). Float arrays need no layout, nor does a
    /// .safetensors file `edo export` wrote (it names its format).
    #[arg(long)]
    layout: Option<String>,
    /// Values per row, for a byte array whose width fits several: fbgemm4 (an odd dim), packbits
    /// (not a multiple of 8), a format's rows (a ggml row is whole blocks).
    #[arg(long)]
    dim: Option<usize>,
    /// For a GGUF file cut short (one part of a split model, a truncated download): read the
    /// tensor's rows that are in the file instead of refusing the tensor.
    #[arg(long)]
    partial: bool,
}

impl SourceArgs {
    fn layout(&self) -> Result<FileLayout, Failure> {
        match &self.layout {
            None => Ok(FileLayout::Dense),
            Some(name) => FileLayout::from_name(name, self.dim).ok_or_else(|| {
                Failure::new(exit::USAGE, format!("unknown --layout {name:?} (dense, fbgemm8, fbgemm4, packbits, packbits-lsb, or a format's name)"))
            }),
        }
    }

    /// The same, reading tensor `tensor` of a safetensors file.
    pub fn with_tensor(mut self, tensor: Option<String>) -> SourceArgs {
        self.tensor = tensor;
        self
    }

    /// The same, reading byte arrays in `layout`.
    pub fn with_layout(mut self, layout: &str) -> SourceArgs {
        self.layout = Some(layout.to_string());
        self
    }

    pub fn read(&self, path: &Path) -> Result<Imported, Failure> {
        require_input(path)?;
        if FileKind::from_path(path).is_none() {
            // An input of the wrong kind is malformed input, as a damaged file is.
            return Err(Failure::new(
                exit::DATA,
                format!("{}: edo reads .safetensors, .npy, .txt/.vec (word2vec, GloVe, fastText), .gguf and .edo files", path.display()),
            ));
        }
        if self.partial {
            if FileKind::from_path(path) != Some(FileKind::Gguf) {
                return Err(Failure::new(exit::USAGE, format!("{}: --partial reads the rows present in a GGUF file cut short", path.display())));
            }
            let name = self.tensor.as_deref().unwrap_or(edo::file::gguf::EMBEDDING_TENSOR);
            return Ok(edo::file::gguf::Gguf::read_present_rows(path, name)?);
        }
        let layout = self.layout()?;
        if let Ok(Err(_)) = open_table_or_reordered(path) {
            // A reordered table (`edo reorder`): the table its ids name, its rows in id order.
            return Ok(Imported { table: import::Table::Packed(open_table(path)?.into_table()), vocab: None, lossy_tokens: 0 });
        }
        let imported = import::path(path, self.tensor.as_deref(), layout)?;
        // (A layout is for arrays: an .edo or GGUF input knows its dim.)
        let array = matches!(FileKind::from_path(path), Some(FileKind::Npy | FileKind::Safetensors));
        if let (
            true,
            FileLayout::Fbgemm4 { dim: None } | FileLayout::Packbits { dim: None } | FileLayout::PackbitsLsb { dim: None },
            import::Table::Packed(t),
        ) = (array, layout, &imported.table)
        {
            // The width alone fits several dims: the most it holds was read. Say so.
            let (format, dim) = (t.format(), t.dim());
            let fewest = (1..dim).rev().take_while(|&d| format.unpadded_row_bytes(d) == format.unpadded_row_bytes(dim)).last();
            if let Some(fewest) = fewest {
                let fewer = if fewest + 1 == dim { fewest.to_string() } else { format!("{fewest} to {}", dim - 1) };
                eprintln!(
                    "edo: note: {}: read as {dim} values a row, the most its {} bytes a row hold; if the table has {fewer} a row, pass --dim",
                    path.display(),
                    format.unpadded_row_bytes(dim)
                );
            }
        }
        Ok(imported)
    }
}

fn require_input(path: &Path) -> Result<(), Failure> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(Failure::new(exit::NO_INPUT, format!("{}: not a file", path.display()))),
        Err(e) => Err(Failure::new(exit::NO_INPUT, format!("{}: {e}", path.display()))),
    }
}

/// " (0.266 of fp32, 3.8× smaller)", or nothing for a table of no rows.
fn size_ratio(packed: u64, f32_bytes: u64) -> String {
    if packed == 0 || f32_bytes == 0 {
        return String::new();
    }
    let ratio = packed as f64 / f32_bytes as f64;
    format!(" ({ratio:.3} of fp32, {:.1}× smaller)", 1.0 / ratio)
}

/// The table file at `path`; a reordered table's (`edo reorder`) with its rows back in id order,
/// the table its ids name, with the file's metadata and checksum chunk.
fn open_table(path: &Path) -> Result<TableFile, Failure> {
    match open_table_or_reordered(path)? {
        Ok(file) => Ok(file),
        Err(_) => {
            let stored = TableFile::open_stored(path)?;
            let mut file = TableFile::new(edo::PrunedTable::open(path)?.original_order()?).with_chunk_bytes(stored.chunk_bytes())?;
            for (k, v) in stored.metadata() {
                file.set_metadata(k.clone(), v.clone())?;
            }
            Ok(file)
        }
    }
}

/// That `path` exists and is named as an .edo file.
fn require_edo(path: &Path) -> Result<(), Failure> {
    require_input(path)?;
    if FileKind::from_path(path) != Some(FileKind::Edo) {
        return Err(Failure::new(exit::DATA, format!("{}: expected an .edo table file (make one with `edo quantize`)", path.display())));
    }
    Ok(())
}

/// The table file at `path`, or (inside) that it is a reordered table (`edo reorder`), which
/// only `edo lookup` reads.
fn open_table_or_reordered(path: &Path) -> Result<Result<TableFile, edo::Unsupported>, Failure> {
    require_edo(path)?;
    match TableFile::open(path) {
        Err(Error::Unsupported(edo::Unsupported::ReorderedTableFile)) => Ok(Err(edo::Unsupported::ReorderedTableFile)),
        other => Ok(Ok(other?)),
    }
}

/// The text of `edo lookup --ids-file` (`-`: standard input), and what to call it in messages.
fn ids_file_text(path: &Path) -> Result<(String, String), Failure> {
    let stdin = path.as_os_str() == "-";
    let name = if stdin { "standard input".to_string() } else { path.display().to_string() };
    let text = if stdin { std::io::read_to_string(std::io::stdin()) } else { std::fs::read_to_string(path) };
    let text = text.map_err(|e| Failure::new(exit::NO_INPUT, format!("{name}: {e}")))?;
    Ok((name, text))
}

/// The ids of `edo lookup` from --ids or --ids-file (`-`: standard input).
fn lookup_ids(a: &LookupArgs) -> Result<Vec<u32>, Failure> {
    match &a.ids_file {
        Some(path) => {
            let (name, text) = ids_file_text(path)?;
            let ids = parse_ids(text.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()), exit::DATA)?;
            if ids.is_empty() {
                return Err(Failure::new(exit::DATA, format!("{name}: no ids in it (row ids separated by commas, spaces or newlines)")));
            }
            Ok(ids)
        }
        None => parse_ids(a.ids.iter().map(String::as_str), exit::USAGE),
    }
}

fn write_failure(e: Error) -> Failure {
    let mut f = Failure::from(e);
    f.code = exit::CANT_CREATE;
    f
}

#[derive(Args)]
pub struct QuantizeArgs {
    /// Input table: .safetensors, .npy, .txt/.vec (word2vec, GloVe), .gguf (token_embd.weight
    /// unless --tensor names another) or .edo.
    input: PathBuf,
    #[command(flatten)]
    source: SourceArgs,
    /// Format to store (docs/formats.md describes each: row-wise, group-wise, ggml's blocks, FP8,
    /// ONNX Runtime's zero-point blocks).
    #[arg(long, short, value_parser = FormatParser)]
    format: Format,
    /// Output .edo file.
    #[arg(long, short)]
    output: PathBuf,
    /// Extra metadata to store, as key=value (repeatable).
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    meta: Vec<String>,
    /// KiB of rows per checksum (default 1024). Small chunks (4) suit files served over HTTP and
    /// read row by row: a remote reader fetches whole chunks.
    #[arg(long, value_name = "KIB")]
    chunk_kib: Option<usize>,
    /// Choose each group's scale and bias for least squared error (a search, as ggml's k-quants
    /// do) instead of from its minimum and maximum: for the group-wise formats (int4_g64 …),
    /// whose outliers it may clip; other formats are unchanged.
    #[arg(long)]
    min_error: bool,
    /// Binary codes of the rows minus their mean (--format binary): more of each bit is spent
    /// telling rows apart. Queries go through the same centring (the mean is stored in the file).
    #[arg(long, conflicts_with = "itq")]
    center: bool,
    /// Binary codes of the centred rows rotated by ITQ (iterative quantisation, trained on the
    /// table; --format binary). The mean and the dim × dim rotation are stored in the file, and
    /// queries go through them too.
    #[arg(long)]
    itq: bool,
    /// Training iterations of --itq.
    #[arg(long, default_value_t = 50, requires = "itq")]
    itq_iterations: usize,
    /// Start each row on a multiple of BYTES once uploaded to a GPU (FBGEMM's row_alignment; a
    /// power of two from 4 to 256): rows there are padded, the file's stay packed. 16 lets the
    /// GPU read rows of 8-bit codes (INT8, FP8, q8_0) of a dim that is a multiple of 16 sixteen
    /// codes a load. Default: an .edo input's own (4, packed, for other inputs).
    #[arg(long, value_name = "BYTES")]
    row_alignment: Option<usize>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn quantize(a: QuantizeArgs) -> Result<(), Failure> {
    if FileKind::from_path(&a.output) != Some(FileKind::Edo) {
        return Err(Failure::new(
            exit::USAGE,
            format!("{}: the output of quantize is an .edo table file (use `edo export` for .npy / .safetensors)", a.output.display()),
        ));
    }
    if let Some(bytes) = a.row_alignment {
        edo::format::check_row_alignment(bytes).map_err(|e| Failure::new(exit::USAGE, format!("--row-alignment: {e}")))?;
    }
    let started = Instant::now();
    // Codes made through a transform are not values to quantise (checked from the header, before
    // the rows are read).
    if FileKind::from_path(&a.input) == Some(FileKind::Edo) {
        if let Ok(Ok(f)) = open_table_or_reordered(&a.input) {
            if let Some(t) = f.code_transform() {
                return Err(Failure::new(
                    exit::DATA,
                    format!("{} holds {} codes (signs of transformed rows): quantise the table they were made from instead", a.input.display(), t.kind()),
                ));
            }
        }
    }
    let imported = a.source.read(&a.input)?;
    let (rows, dim) = (imported.rows(), imported.dim());
    if rows == 0 {
        eprintln!("edo: warning: {} has no rows: the table written holds none, and every id is out of its range", a.input.display());
    }
    if imported.lossy_tokens > 0 {
        eprintln!("edo: warning: {} tokens were not valid UTF-8; they are stored with U+FFFD in place of the bad bytes", imported.lossy_tokens);
    }
    if a.min_error && !a.format.has_min_error_search() {
        eprintln!("edo: warning: --min-error changes nothing for {}: only the group-wise int4_g* and int8_g* formats search", a.format);
    }
    let group = a.format.group();
    // Bits a value in rows of whole groups, and in these rows.
    let bits = |d: usize| 8.0 * a.format.row_bytes(d) as f64 / d as f64;
    if group > 0 && dim > 0 && bits(dim) >= 1.25 * bits(group) {
        // A quarter more bytes than whole groups take (a short row's last block, its parameters
        // or its codes, is a larger share of it: q8_0 at dim 8, k-quants at small dims).
        eprintln!(
            "edo: warning: {} keeps parameters per {group} values, so a row of {dim} takes {} bytes, {:.3} of fp32: {:.2} bits a value against {:.2} in rows of whole groups",
            a.format,
            a.format.row_bytes(dim),
            a.format.row_bytes(dim) as f64 / (4 * dim) as f64,
            bits(dim),
            bits(group)
        );
    }
    if (a.center || a.itq) && a.format != Format::Binary {
        return Err(Failure::new(exit::USAGE, format!("--center and --itq make binary codes: use them with --format binary, not {}", a.format)));
    }
    // Decoded once (a packed source): the values to quantise and to measure the error against.
    let values = imported.values();
    let transform = if a.itq {
        let options = edo::search::ItqOptions { iterations: a.itq_iterations, ..Default::default() };
        if !a.json {
            eprintln!("  … training an ITQ rotation ({dim} × {dim}, {} iterations)", options.iterations);
        }
        Some(edo::search::CodeTransform::itq(&values, dim, &options)?)
    } else if a.center {
        Some(edo::search::CodeTransform::centered(&values, dim)?)
    } else {
        None
    };
    // With a transform, the codes are the transformed rows' signs, and the error is against those.
    let values = match &transform {
        Some(t) => std::borrow::Cow::Owned(t.apply(&values)?),
        None => values,
    };
    let table = match &imported.table {
        import::Table::Packed(t) if t.format() == a.format && transform.is_none() => t.clone(),
        _ => quantize_with_progress(&values, rows, dim, a.format, a.min_error)?,
    };
    // --row-alignment, else an .edo input's own.
    let inherited = match &imported.table {
        import::Table::Packed(t) => t.row_alignment(),
        _ => edo::format::NO_ROW_ALIGNMENT,
    };
    let table = table.with_row_alignment(a.row_alignment.unwrap_or(inherited)).map_err(|e| Failure::new(exit::USAGE, format!("--row-alignment: {e}")))?;
    // The documented bound holds for tables edo quantised from floats by minimum and maximum.
    let bound = (matches!(imported.table, import::Table::Dense { .. }) && !a.min_error).then_some(a.format);
    let stats = table_error_stats(&values, &table, bound);
    drop(values);

    let mut file = TableFile::new(table);
    if let Some(t) = transform {
        file = file.with_code_transform(t)?;
    }
    if let Some(kib) = a.chunk_kib {
        if kib == 0 || kib > 1 << 20 {
            return Err(Failure::new(exit::USAGE, "--chunk-kib must be between 1 and 1048576"));
        }
        file = file.with_chunk_bytes(kib << 10)?;
    }
    if let Some(v) = imported.vocab.clone() {
        file = file.with_vocab(v)?;
    }
    let source = std::fs::canonicalize(&a.input).unwrap_or_else(|_| a.input.clone());
    file.set_metadata("source", source.display().to_string())?;
    if let Some(t) = &a.source.tensor {
        file.set_metadata("source.tensor", t)?;
    }
    if let Some(l) = &a.source.layout {
        file.set_metadata("source.layout", l)?;
    }
    if let Some(d) = a.source.dim {
        file.set_metadata("source.dim", d.to_string())?;
    }
    if a.source.partial {
        file.set_metadata("source.partial", "true")?;
    }
    if a.min_error && a.format.has_min_error_search() {
        file.set_metadata("quantize.min_error", "true")?;
    }
    file.set_metadata("quantize.max_abs_error", format!("{:e}", stats.max_abs))?;
    file.set_metadata("quantize.rmse", format!("{:e}", stats.rmse))?;
    file.set_metadata("quantize.mean_cosine", format!("{}", stats.mean_cosine))?;
    for kv in &a.meta {
        let (k, v) = kv.split_once('=').ok_or_else(|| Failure::new(exit::USAGE, format!("--meta {kv:?} is not KEY=VALUE")))?;
        file.set_metadata(k, v).map_err(|e| Failure::new(exit::USAGE, e.to_string()))?;
    }
    file.write(&a.output).map_err(write_failure)?;
    let file_bytes = std::fs::metadata(&a.output).map(|m| m.len()).unwrap_or(0);
    let t = file.table();
    if a.json {
        let out = json!({
            "output": a.output, "format": t.format().name(), "rows": rows, "dim": dim,
            "packed_bytes": t.bytes(), "f32_bytes": t.f32_bytes(), "file_bytes": file_bytes,
            "ratio_to_fp32": t.bytes() as f64 / t.f32_bytes().max(1) as f64,
            "vocab": file.vocab().map(|v| v.len()), "error": stats, "seconds": started.elapsed().as_secs_f64(),
            "codes": file.code_transform().map(|t| t.kind()),
            "row_alignment": t.row_alignment(), "gpu_bytes": t.gpu_bytes(),
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
    } else {
        println!(
            "wrote {}: {} {rows} × {dim}, {} packed{}{}",
            a.output.display(),
            t.format(),
            mib(t.bytes()),
            size_ratio(t.bytes(), t.f32_bytes()),
            file.vocab().map_or(String::new(), |v| format!(", {} tokens", v.len())),
        );
        if t.row_alignment() != edo::format::NO_ROW_ALIGNMENT {
            println!(
                "rows on a GPU: aligned to {} bytes, {} bytes each ({} packed), {} in all",
                t.row_alignment(),
                4 * t.gpu_row_words(),
                4 * t.row_words(),
                mib(t.gpu_bytes())
            );
        }
        if let Some(t) = file.code_transform() {
            println!("codes: {} (the signs of (x − mean){}; queries go through the same)", t.kind(), if t.rotation().is_some() { "·R" } else { "" });
        }
        let against = if file.code_transform().is_some() { "the transformed source" } else { "the source" };
        println!("error against {against}: max |x − x̂| {:.3e}, RMSE {:.3e}, mean cosine {:.6}", stats.max_abs, stats.rmse, stats.mean_cosine);
        println!("took {:.2} s; see it with: edo inspect {}", started.elapsed().as_secs_f64(), a.output.display());
    }
    Ok(())
}

/// Quantises in blocks of rows, with a progress bar on a terminal.
fn quantize_with_progress(values: &[f32], rows: usize, dim: usize, format: Format, min_error: bool) -> Result<PackedTable, Failure> {
    let block = (rows / 100).max(4096);
    let bar = indicatif::ProgressBar::new(rows as u64);
    bar.set_style(indicatif::ProgressStyle::with_template("quantising {bar:40} {pos}/{len} rows ({eta})").expect("template"));
    if rows < 4 * block {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut words = Vec::with_capacity(rows * format.row_words(dim));
    for start in (0..rows).step_by(block) {
        let n = block.min(rows - start);
        let quantize = if min_error { PackedTable::quantize_min_error } else { PackedTable::quantize };
        let part = quantize(format, &values[start * dim..(start + n) * dim], n, dim).map_err(|e| match Error::from(e) {
            Error::NonFinite { row, col, value } => Error::NonFinite { row: row + start, col, value },
            Error::OutOfRange { row, col, value, format } => Error::OutOfRange { row: row + start, col, value, format },
            e => e,
        })?;
        words.extend_from_slice(part.words());
        bar.inc(n as u64);
    }
    bar.finish_and_clear();
    Ok(PackedTable::from_words(format, rows, dim, words)?)
}

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
            println!(
                "  on a GPU    rows aligned to {} bytes: {} bytes each ({} packed), {} in all",
                t.row_alignment(),
                4 * t.gpu_row_words(),
                4 * t.row_words(),
                mib(t.gpu_bytes())
            );
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
fn inspect_gguf(path: &Path, json: bool) -> Result<(), Failure> {
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

#[derive(Args)]
#[command(group(clap::ArgGroup::new("rows").required(true).args(["ids", "ids_file", "tokens"])))]
pub struct LookupArgs {
    /// The .edo table file (or model file: its ids are token ids, read from their rows as
    /// `edo embed` reads them).
    file: PathBuf,
    /// Row ids (a model's: token ids), comma separated.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    ids: Vec<String>,
    /// A file of row ids separated by commas, spaces or newlines (`-`: standard input), for more
    /// ids than a command line holds.
    #[arg(long)]
    ids_file: Option<PathBuf>,
    /// Tokens, comma separated (needs a table with a vocabulary).
    #[arg(long, value_delimiter = ',')]
    tokens: Vec<String>,
    /// Gather on the GPU (the table is uploaded from the memory-mapped file shard by shard).
    #[arg(long)]
    gpu: bool,
    /// Values printed per row (all with --json).
    #[arg(long, default_value_t = 8)]
    show: usize,
    /// Print the rows as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Row ids from text: each a number from 0 to 2³² − 1. A negative or malformed one is an error
/// with exit status `code` that says which.
fn parse_ids<'a>(items: impl Iterator<Item = &'a str>, code: u8) -> Result<Vec<u32>, Failure> {
    items
        .enumerate()
        .map(|(i, s)| match s.trim().parse::<i64>() {
            Ok(v) if v < 0 => Err(Failure::new(code, format!("ids[{i}] = {v} is negative: ids are rows, counted from 0"))),
            Ok(v) if v > u32::MAX as i64 => Err(Failure::new(code, format!("ids[{i}] = {v} is past the largest id, {}", u32::MAX))),
            Ok(v) => Ok(v as u32),
            Err(_) => Err(Failure::new(code, format!("ids[{i}] = {s:?} is not an id (a row number)"))),
        })
        .collect()
}

pub fn lookup(a: LookupArgs) -> Result<(), Failure> {
    require_edo(&a.file)?;
    if TableFile::open_stored(&a.file).is_ok_and(|f| f.keys().is_some()) {
        return lookup_keyed(a);
    }
    let Ok(file) = open_table_or_reordered(&a.file)? else { return lookup_reordered(a) };
    let t = file.table();
    let ids: Vec<u32> = if a.tokens.is_empty() {
        lookup_ids(&a)?
    } else if file.is_model() {
        return Err(Failure::new(
            exit::USAGE,
            format!("{} is a model: look its rows up by token id with --ids, or embed text with `edo embed`", a.file.display()),
        ));
    } else {
        let vocab = file.vocab().ok_or_else(|| Failure::new(exit::USAGE, format!("{} has no vocabulary; look rows up with --ids", a.file.display())))?;
        a.tokens.iter().map(|tok| vocab.id(tok)).collect::<Result<_, _>>()?
    };
    // A model's ids are its tokenizer's, each read from its row as encoding reads it (through
    // the model's mapping, when it has one: a quantised vocabulary, or reordered rows).
    let rows: Vec<u32> = if file.is_model() {
        let model = edo::model::StaticModel::from_edo(&file)?;
        if let Some((index, &id)) = ids.iter().enumerate().find(|&(_, &id)| id as usize >= model.vocab_size()) {
            return Err(Failure::new(exit::USAGE, format!("ids[{index}] = {id} is not a token id of the model's {}-token vocabulary", model.vocab_size())));
        }
        ids.iter().map(|&id| model.row_of(id).map(|(row, _)| row as u32)).collect::<Result<_, _>>()?
    } else {
        ids.clone()
    };
    Bounds::Error.check(&rows, t.rows())?;
    file.verify_ids(&rows)?;
    let values = if a.gpu {
        let engine = edo::Engine::new_blocking(edo::EngineOptions::default())?;
        file.verify()?;
        let gpu = edo::block_on(edo::GpuTable::upload(&engine, t))?;
        edo::block_on(edo::block_on(gpu.gather(&rows, Bounds::Error))?.read())?
    } else {
        edo::cpu::gather(t, &rows, Bounds::Error)?
    };
    let dim = t.dim();
    let token = |id: u32| file.vocab().and_then(|v| v.token(id)).map(str::to_string);
    // A model's row, named where it is not the id.
    let row_of = |i: usize| (file.is_model() && rows[i] != ids[i]).then_some(rows[i]);
    if a.json {
        let out: Vec<_> = ids
            .iter()
            .zip(values.chunks_exact(dim))
            .enumerate()
            .map(|(i, (&id, row))| json!({ "id": id, "token": token(id), "row": rows[i], "values": row }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&json!({ "format": t.format().name(), "dim": dim, "model": file.is_model(), "rows": out })).expect("JSON"));
    } else {
        for (i, (&id, row)) in ids.iter().zip(values.chunks_exact(dim)).enumerate() {
            let name = token(id).map_or(String::new(), |t| format!(" {t:?}"));
            let place = row_of(i).map_or(String::new(), |r| format!(" (row {r})"));
            println!("{id}{name}{place}: {}", shown_row(row, a.show));
        }
    }
    Ok(())
}

/// `[v0, v1, … n more]`: a row's first `show` values and how many are left out.
fn shown_row(row: &[f32], show: usize) -> String {
    let mut parts: Vec<String> = row.iter().take(show).map(|v| format!("{v:.5}")).collect();
    if row.len() > show {
        parts.push(format!("… {} more", row.len() - show));
    }
    format!("[{}]", parts.join(", "))
}

/// `edo lookup` of a reordered table (`edo reorder`): ids go through its id map.
/// `edo lookup` of a keyed table (a live table's snapshot, `edo update`): --ids are its 64-bit
/// keys.
fn lookup_keyed(a: LookupArgs) -> Result<(), Failure> {
    if !a.tokens.is_empty() || a.gpu {
        return Err(Failure::new(exit::USAGE, format!("{} is a keyed table: look rows up by key with --ids, on the CPU path", a.file.display())));
    }
    let text = match &a.ids_file {
        Some(path) => ids_file_text(path)?.1,
        None => a.ids.join(","),
    };
    let keys = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .enumerate()
        .map(|(i, s)| s.parse::<u64>().map_err(|_| Failure::new(exit::USAGE, format!("keys[{i}] = {s:?} is not a key (a number from 0 to 2⁶⁴ − 1)"))))
        .collect::<Result<Vec<u64>, _>>()?;
    let file = TableFile::open_stored(&a.file)?;
    let (format, dim) = (file.table().format(), file.table().dim());
    let table = edo::live::LiveTable::from_file(&file, edo::live::LiveOptions::new(format, dim).capacity(file.table().rows().max(1)))?;
    let values = table.gather(&keys, edo::live::Missing::Error).map_err(|e| Failure::new(exit::USAGE, e.to_string()))?;
    if a.json {
        let rows: Vec<_> = keys.iter().zip(values.chunks_exact(dim)).map(|(&key, row)| json!({ "key": key, "values": row })).collect();
        println!("{}", serde_json::to_string_pretty(&json!({ "format": format.name(), "dim": dim, "keyed": true, "rows": rows })).expect("JSON"));
    } else {
        for (&key, row) in keys.iter().zip(values.chunks_exact(dim)) {
            println!("{key}: {}", shown_row(row, a.show));
        }
    }
    Ok(())
}

fn lookup_reordered(a: LookupArgs) -> Result<(), Failure> {
    let pruned = edo::PrunedTable::open(&a.file)?;
    if !a.tokens.is_empty() {
        return Err(Failure::new(exit::USAGE, format!("{} is a reordered table: look rows up with --ids", a.file.display())));
    }
    let ids = lookup_ids(&a)?;
    Bounds::Error.check(&ids, pruned.original_rows())?;
    let values = if a.gpu {
        let engine = edo::Engine::new_blocking(edo::EngineOptions::default())?;
        let gpu = edo::block_on(edo::GpuPrunedTable::upload(&engine, &pruned))?;
        edo::block_on(edo::block_on(gpu.gather(&ids, Bounds::Error))?.read())?
    } else {
        edo::Lookup::gather(&pruned, &ids, Bounds::Error)?
    };
    let dim = pruned.dim();
    if a.json {
        let rows: Vec<_> = ids.iter().zip(values.chunks_exact(dim)).map(|(&id, row)| json!({ "id": id, "values": row })).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "format": pruned.table().format().name(), "dim": dim, "reordered": true, "rows": rows })).expect("JSON")
        );
    } else {
        for (&id, row) in ids.iter().zip(values.chunks_exact(dim)) {
            println!("{id}: {}", shown_row(row, a.show));
        }
    }
    Ok(())
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("frequency").required(true).args(["trace", "counts", "texts"])))]
pub struct ReorderArgs {
    /// The .edo table or model file.
    file: PathBuf,
    /// The reordered file to write: a table's rows stored most looked-up first, with the id map
    /// that keeps lookups by the same ids; a model's the same way, its tokens mapped to their
    /// rows' new places (every text gets the same vector).
    #[arg(short, long)]
    output: PathBuf,
    /// A trace of looked-up ids (one a line, or a 1-D .npy of ids; for a model, ids of its
    /// table's rows): rows are ordered by how often it looks them up.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Lookup counts, one per row of the table (one a line, or a 1-D .npy).
    #[arg(long)]
    counts: Option<PathBuf>,
    /// For a model: a file of texts (one a line, `-`: standard input) like those it will embed;
    /// rows are ordered by how often their tokens look them up.
    #[arg(long)]
    texts: Option<PathBuf>,
}

/// `edo reorder`: the table's rows stored by frequency, the most looked-up first.
pub fn reorder(a: ReorderArgs) -> Result<(), Failure> {
    let file = open_table(&a.file)?;
    if let Some(t) = file.code_transform() {
        return Err(Failure::new(
            exit::DATA,
            format!(
                "{} holds {} codes: a reordered file would not keep their transform (reorder the table before quantising it to codes)",
                a.file.display(),
                t.kind()
            ),
        ));
    }
    if file.is_model() {
        return reorder_model(&a, &file);
    }
    if a.texts.is_some() {
        return Err(Failure::new(exit::USAGE, format!("--texts orders a model's rows; {} is a table: give --trace or --counts", a.file.display())));
    }
    file.verify()?;
    let t = file.table();
    let rows = t.rows();
    let Some(counts) = trace_or_counts(&a, rows)? else { return Err(Failure::new(exit::USAGE, "give --trace or --counts")) };
    let order = edo::prune::frequency_order(&counts);
    let reordered = edo::PrunedTable::reorder(t, &order)?;
    reordered.write(&a.output, Some(file.chunk_bytes()), file.metadata()).map_err(write_failure)?;
    println!("{}: {rows} rows reordered by lookup count; {}", a.output.display(), shares(&counts, &order));
    if file.vocab().is_some() {
        println!("(the vocabulary is not carried over: a reordered table is looked up by id)");
    }
    Ok(())
}

/// `edo reorder` of a model file: its rows by how often `--texts`' tokens (or `--trace`'s rows,
/// or `--counts`) look them up; the tokenizer's ids kept, its mapping sending them to the rows'
/// new places.
fn reorder_model(a: &ReorderArgs, file: &TableFile) -> Result<(), Failure> {
    let model = edo::model::StaticModel::from_edo(file)?;
    let rows = model.table().rows();
    let (counts, what): (Vec<u64>, String) = match &a.texts {
        Some(path) => {
            let (bytes, name) = if path.as_os_str() == "-" {
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes).map_err(|e| Failure::new(exit::NO_INPUT, format!("standard input: {e}")))?;
                (bytes, "standard input".to_string())
            } else {
                (read_input(path)?, path.display().to_string())
            };
            let text = String::from_utf8(bytes).map_err(|e| Failure::new(exit::DATA, format!("{name}: not UTF-8 text ({e})")))?;
            let lines: Vec<&str> = text.lines().collect();
            let mut counts = vec![0u64; rows];
            // A batch at a time: the tokens of a whole corpus need not be held at once.
            for (b, batch) in lines.chunks(4096).enumerate() {
                let batch_counts = model
                    .row_counts(batch)
                    .map_err(|e| Failure::new(exit::DATA, format!("{name}, lines {} to {}: {e}", b * 4096 + 1, b * 4096 + batch.len())))?;
                for (c, n) in counts.iter_mut().zip(batch_counts) {
                    *c += n;
                }
            }
            (counts, format!("{} texts' tokens", lines.len()))
        }
        None => match trace_or_counts(a, rows)? {
            Some(counts) => (counts, "lookup count".into()),
            None => return Err(Failure::new(exit::USAGE, "give --texts, --trace or --counts")),
        },
    };
    let order = edo::prune::frequency_order(&counts);
    let reordered = model.reorder(&order)?;
    let mut out = reordered.to_edo().with_chunk_bytes(file.chunk_bytes())?;
    for (k, v) in file.metadata() {
        out.set_metadata(k.clone(), v.clone())?;
    }
    out.write(&a.output).map_err(write_failure)?;
    println!("{}: the model's {rows} rows reordered by {what}; {}; every text gets the same vector", a.output.display(), shares(&counts, &order));
    Ok(())
}

/// `edo reorder`'s lookup counts of `rows` rows from --trace or --counts, or `None` if neither
/// was given. As `edo bench cache --trace`: a trace or counts file that does not fit is a usage
/// error.
fn trace_or_counts(a: &ReorderArgs, rows: usize) -> Result<Option<Vec<u64>>, Failure> {
    let in_file = |path: &Path, e: Error| Failure::new(exit::USAGE, format!("{}: {e}", path.display()));
    Ok(Some(match (&a.trace, &a.counts) {
        (Some(path), _) => {
            let ids = edo::cache::parse_trace(&read_input(path)?, Some(rows)).map_err(|e| in_file(path, e))?;
            edo::prune::lookup_counts(&ids, rows).map_err(|e| in_file(path, e))?
        }
        (None, Some(path)) => {
            let counts = edo::cache::parse_trace(&read_input(path)?, None).map_err(|e| in_file(path, e))?;
            if counts.len() != rows {
                return Err(in_file(path, Error::ShapeMismatch { what: "lookup counts (one per row of the table)", expected: rows, actual: counts.len() }));
            }
            counts.into_iter().map(u64::from).collect()
        }
        (None, None) => return Ok(None),
    }))
}

/// A file `edo reorder` reads.
fn read_input(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| Failure::new(exit::NO_INPUT, format!("{}: {e}", path.display())))
}

/// The share of the lookups the first 1 % and 10 % of the rows in `order` take.
fn shares(counts: &[u64], order: &[u32]) -> String {
    let total = counts.iter().sum::<u64>().max(1) as f64;
    let share = |n: usize| 100.0 * order[..n.min(order.len())].iter().map(|&r| counts[r as usize]).sum::<u64>() as f64 / total;
    format!(
        "the first 1 % of the stored rows take {:.1} % of the lookups, the first 10 % {:.1} %",
        share(order.len().div_ceil(100)),
        share(order.len().div_ceil(10))
    )
}

#[derive(Args)]
pub struct ExportArgs {
    /// The .edo table file.
    file: PathBuf,
    /// Output: .npy, .safetensors, .gguf (fp32, fp16 and ggml block formats) or .txt (word2vec
    /// text, always decoded values).
    #[arg(long, short)]
    output: PathBuf,
    /// Write decoded f32 values instead of the packed layout (FBGEMM fused rows, packbits, ggml
    /// blocks).
    #[arg(long)]
    dense: bool,
    /// Tensor name in a safetensors output (default weight) or a GGUF output (default
    /// token_embd.weight).
    #[arg(long)]
    tensor: Option<String>,
    /// Write a safetensors output as ONNX Runtime's GatherBlockQuantized inputs (tensors data,
    /// scales, zero_points): for tables in int4_zp32/64/128 or int8_zp32/64/128.
    #[arg(long, conflicts_with_all = ["dense", "tensor"])]
    gbq: bool,
}

pub fn export(a: ExportArgs) -> Result<(), Failure> {
    let file = open_table(&a.file)?;
    file.verify()?;
    if let Some(ct) = file.code_transform() {
        eprintln!(
            "edo: warning: {} holds {} codes; the export has the codes but not their transform (queries must go through (x − mean){} before their signs)",
            a.file.display(),
            ct.kind(),
            if ct.rotation().is_some() { "·R" } else { "" }
        );
    }
    let t = file.table();
    let array = || if a.dense { exp::dense_array(t) } else { exp::packed_array(t) };
    let (bytes, what) = match FileKind::from_path(&a.output) {
        Some(FileKind::Npy) => (array().to_npy(), layout_name(t.format(), a.dense)),
        Some(FileKind::Safetensors) if a.gbq => (edo::file::gbq::Gbq::from_table(t)?.to_safetensors(), "GatherBlockQuantized data, scales and zero points"),
        Some(FileKind::Safetensors) => {
            let mut meta = BTreeMap::new();
            meta.insert("edo.layout".to_string(), layout_name(t.format(), a.dense).to_string());
            meta.insert("edo.dim".to_string(), t.dim().to_string());
            if !a.dense {
                // So that `edo quantize` reads the rows back as they are, with no --layout.
                meta.insert("edo.format".to_string(), t.format().name().to_string());
            }
            (array().to_safetensors(a.tensor.as_deref().unwrap_or("weight"), &meta), layout_name(t.format(), a.dense))
        }
        Some(FileKind::Gguf) => {
            let dense;
            let table = if a.dense {
                dense = t.requantize(Format::F32)?;
                &dense
            } else {
                t
            };
            let mut bytes = Vec::new();
            let name = a.tensor.as_deref().unwrap_or(edo::file::gguf::EMBEDDING_TENSOR);
            edo::file::gguf::write(table, name, &[("general.name", &a.file.display().to_string()), ("edo.format", t.format().name())], &mut bytes)?;
            (bytes, if a.dense { "a GGUF tensor of decoded f32 values" } else { "a GGUF tensor of the table's ggml type" })
        }
        Some(FileKind::Text) => (exp::text(t, file.vocab())?.into_bytes(), "word2vec text (decoded f32)"),
        _ if a.gbq => return Err(Failure::new(exit::USAGE, format!("{}: --gbq writes a .safetensors file", a.output.display()))),
        _ => return Err(Failure::new(exit::USAGE, format!("{}: export writes .npy, .safetensors, .gguf or .txt", a.output.display()))),
    };
    std::fs::write(&a.output, &bytes).map_err(|e| Failure::new(exit::CANT_CREATE, format!("{}: {e}", a.output.display())))?;
    println!("wrote {}: {} rows × {} dim as {what}, {}", a.output.display(), t.rows(), t.dim(), mib(bytes.len() as u64));
    if FileKind::from_path(&a.output) == Some(FileKind::Npy) && !a.dense && !matches!(t.format(), Format::F32 | Format::F16) {
        // A .npy of bytes does not say what they are.
        println!(
            "  read it back: edo quantize {} --layout {} --dim {} --format {} -o TABLE.edo",
            a.output.display(),
            t.format().name(),
            t.dim(),
            t.format().name()
        );
    }
    Ok(())
}

fn layout_name(format: Format, dense: bool) -> &'static str {
    match (format, dense) {
        (_, true) | (Format::F32, _) => "f32 [rows, dim]",
        (Format::F16, _) => "f16 [rows, dim]",
        (Format::Int8, _) => "FBGEMM fused 8-bit rows, u8 [rows, dim + 8]",
        (Format::Int4, _) => "FBGEMM fused 4-bit rows, u8 [rows, ceil(dim/2) + 4]",
        (Format::Binary, _) => "numpy.packbits sign bits, u8 [rows, ceil(dim/8)]",
        (Format::BinaryScaled, _) => "packbits bits then f32 scale, u8 [rows, ceil(dim/8) + 4]",
        (f, _) if f.group() > 0 && f.ggml_type().is_some() => "ggml blocks as in GGUF, u8 [rows, bytes of a row's blocks]",
        _ => "codes then the row's parameters, u8 [rows, bytes of a row]",
    }
}
