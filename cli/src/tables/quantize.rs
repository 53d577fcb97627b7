//! `edo quantize`: a table file from floats (or packed rows) in any format.

use super::*;

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
            println!("rows on a GPU: aligned to {} bytes, {}", t.row_alignment(), gpu_rows(t));
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
pub(crate) fn quantize_with_progress(values: &[f32], rows: usize, dim: usize, format: Format, min_error: bool) -> Result<PackedTable, Failure> {
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
