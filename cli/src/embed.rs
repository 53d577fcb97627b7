//! `edo embed`.

use std::fmt::Write as _;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::Args;
use edo::file::npy::{self, RowWriter};
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
    /// A file of texts, one per line (`-`: standard input). Read, embedded and written a batch at
    /// a time, so memory holds one batch, not the file or its vectors.
    #[arg(long, conflicts_with = "texts")]
    input: Option<PathBuf>,
    /// Hold the table in this format.
    #[arg(long, short, value_parser = FormatParser)]
    format: Option<Format>,
    /// Pool on the GPU (the tokenizer runs on the CPU either way).
    #[arg(long)]
    gpu: bool,
    /// Write the vectors to this .npy file (f32, texts × dim), or to standard output with `-`
    /// (then the summary goes to standard error).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Print the vectors as JSON (one array per text).
    #[arg(long)]
    json: bool,
    /// Texts per batch.
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u32).range(1..))]
    batch: u32,
}

/// The texts to embed, a batch at a time: those given with `--text`, or the lines of a file or
/// of standard input (`str::lines`: `\n` or `\r\n` ends a line, the last may have neither).
enum Texts {
    Given(std::vec::IntoIter<String>),
    Lines { reader: Box<dyn BufRead>, name: String, line: usize },
}

impl Texts {
    /// The next batch of at most `max` texts into `block` (their bytes, one after another) and
    /// `ends` (where each ends in `block`); false when there are none left. A line that is not
    /// UTF-8 is an error naming it.
    fn next_batch(&mut self, max: usize, block: &mut String, ends: &mut Vec<usize>) -> Result<bool, Failure> {
        block.clear();
        ends.clear();
        match self {
            Texts::Given(texts) => {
                for text in texts.by_ref().take(max) {
                    block.push_str(&text);
                    ends.push(block.len());
                }
            }
            Texts::Lines { reader, name, line } => {
                let mut bytes = std::mem::take(block).into_bytes();
                while ends.len() < max {
                    let n = reader.read_until(b'\n', &mut bytes).map_err(|e| Failure::new(exit::NO_INPUT, format!("{name}: {e}")))?;
                    if n == 0 {
                        break;
                    }
                    *line += 1;
                    if bytes.ends_with(b"\n") {
                        bytes.pop();
                        if bytes.ends_with(b"\r") {
                            bytes.pop();
                        }
                    }
                    ends.push(bytes.len());
                }
                // The batch checked at once, and every line end a character boundary (lines that
                // split a character between them are not UTF-8 each, though joined they are).
                let first = *line - ends.len() + 1;
                let not_utf8 = |k: usize| Failure::new(exit::DATA, format!("{name}: line {} is not UTF-8 text", first + k));
                let text = String::from_utf8(bytes).map_err(|e| not_utf8(ends.partition_point(|&end| end <= e.utf8_error().valid_up_to())))?;
                if let Some(k) = ends.iter().position(|&end| !text.is_char_boundary(end)) {
                    return Err(not_utf8(k));
                }
                *block = text;
            }
        }
        Ok(!ends.is_empty())
    }
}

/// An .npy being written: to a file (its row count written last) or to standard output (its
/// count known first).
enum Npy {
    File(RowWriter<std::io::BufWriter<std::fs::File>>),
    Stdout(RowWriter<std::io::BufWriter<std::io::Stdout>>),
}

impl Npy {
    fn push(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Npy::File(w) => w.push(data),
            Npy::Stdout(w) => w.push(data),
        }
    }

    fn finish(self) -> std::io::Result<()> {
        match self {
            Npy::File(w) => w.finish().map(drop),
            Npy::Stdout(w) => w.finish().map(drop),
        }
    }
}

/// Where the vectors go as they are made.
struct Sinks {
    npy: Option<(Npy, String)>,
    /// `--json`: standard output, and whether a row has been printed yet.
    json: Option<(std::io::BufWriter<std::io::Stdout>, bool)>,
}

impl Sinks {
    fn push(&mut self, vectors: &[f32], dim: usize) -> Result<(), Failure> {
        if let Some((npy, name)) = &mut self.npy {
            npy.push(bytemuck::cast_slice(vectors)).map_err(|e| Failure::new(exit::CANT_CREATE, format!("{name}: {e}")))?;
        }
        if let Some((out, any)) = &mut self.json {
            let stdout = |e: std::io::Error| Failure::new(exit::CANT_CREATE, format!("standard output: {e}"));
            for row in vectors.chunks_exact(dim.max(1)) {
                out.write_all(if *any { b"," } else { b"[" }).map_err(stdout)?;
                serde_json::to_writer(&mut *out, row).map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?;
                *any = true;
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<(), Failure> {
        if let Some((npy, name)) = self.npy {
            npy.finish().map_err(|e| Failure::new(exit::CANT_CREATE, format!("{name}: {e}")))?;
        }
        if let Some((mut out, any)) = self.json {
            let stdout = |e: std::io::Error| Failure::new(exit::CANT_CREATE, format!("standard output: {e}"));
            out.write_all(if any { b"]\n" } else { b"[]\n" }).map_err(stdout)?;
            out.flush().map_err(stdout)?;
        }
        Ok(())
    }
}

/// Lines in a file as `str::lines` counts them: newlines, and one more if the last line has none.
fn count_lines(path: &std::path::Path) -> std::io::Result<usize> {
    let mut reader = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    let (mut lines, mut last) = (0, b'\n');
    loop {
        let buf = reader.fill_buf()?;
        let Some(&end) = buf.last() else { break };
        lines += buf.iter().filter(|&&b| b == b'\n').count();
        last = end;
        let n = buf.len();
        reader.consume(n);
    }
    Ok(lines + usize::from(last != b'\n'))
}

pub fn embed(a: EmbedArgs) -> Result<(), Failure> {
    let mut model = StaticModel::open(&a.model)?;
    if let Some(f) = a.format {
        model = model.quantize(f)?;
    }
    let dim = model.dim();
    let to_stdout = a.output.as_deref().is_some_and(|p| p.as_os_str() == "-");
    if to_stdout && a.json {
        return Err(Failure::new(exit::USAGE, "--json and -o - both write to standard output: choose one"));
    }
    let from_stdin = a.input.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let (mut texts, count, input_bytes) = match &a.input {
        Some(_) if from_stdin => (Texts::Lines { reader: Box::new(std::io::stdin().lock()), name: "standard input".into(), line: 0 }, None, None),
        Some(path) => {
            let failed = |e: std::io::Error| Failure::new(exit::NO_INPUT, format!("{}: {e}", path.display()));
            let file = std::fs::File::open(path).map_err(failed)?;
            let bytes = file.metadata().map_err(failed)?.len();
            // An .npy on standard output states its row count before its rows: count them first.
            let count = if to_stdout { Some(count_lines(path).map_err(failed)?) } else { None };
            let reader = Box::new(std::io::BufReader::with_capacity(1 << 20, file));
            (Texts::Lines { reader, name: path.display().to_string(), line: 0 }, count, Some(bytes))
        }
        None if a.texts.is_empty() => return Err(Failure::new(exit::USAGE, "give texts with --text T (repeatable) or --input FILE")),
        None => (Texts::Given(a.texts.clone().into_iter()), Some(a.texts.len()), None),
    };
    let npy = match &a.output {
        None => None,
        Some(_) if to_stdout => {
            let rows =
                count.ok_or_else(|| Failure::new(exit::USAGE, "-o - with --input -: an .npy states its row count first; write to a file, or use --json"))?;
            let out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout());
            let writer = RowWriter::with_rows(out, npy::Dtype::F32, dim, rows).map_err(|e| Failure::new(exit::CANT_CREATE, format!("standard output: {e}")))?;
            Some((Npy::Stdout(writer), "standard output".to_string()))
        }
        Some(path) => {
            let failed = |e: std::io::Error| Failure::new(exit::CANT_CREATE, format!("{}: {e}", path.display()));
            let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).map_err(failed)?);
            let writer = RowWriter::new(file, npy::Dtype::F32, dim).map_err(failed)?;
            Some((Npy::File(writer), path.display().to_string()))
        }
    };
    let sinks = Sinks { npy, json: a.json.then(|| (std::io::BufWriter::with_capacity(1 << 20, std::io::stdout()), false)) };

    let bar = match input_bytes {
        Some(total) => ProgressBar::new(total),
        None if from_stdin => ProgressBar::new_spinner(),
        None => ProgressBar::hidden(),
    };
    bar.set_style(ProgressStyle::with_template("{spinner} {bar:30} {percent:>3}% {msg} ({elapsed})").expect("a valid template").progress_chars("=> "));
    let started = std::time::Instant::now();
    let gpu = if a.gpu {
        let engine = Engine::new_blocking(EngineOptions::default())?;
        let gpu = edo::block_on(GpuStaticModel::upload(&engine, &model))?;
        Some((gpu, engine))
    } else {
        None
    };
    let (mut block, mut ends) = (String::new(), Vec::new());
    let mut shown: Vec<(String, Vec<f32>)> = Vec::new();
    let mut total = 0usize;
    // A writer thread takes each batch's vectors while the next batch is encoded, and hands the
    // buffer back: two buffers in all, reused (a new one each batch would be mapped, zeroed and
    // unmapped by the system every time).
    std::thread::scope(|scope| -> Result<(), Failure> {
        let (to_writer, batches) = std::sync::mpsc::sync_channel::<Vec<f32>>(1);
        let (to_encoder, free) = std::sync::mpsc::channel::<Vec<f32>>();
        let writer = scope.spawn(move || -> Result<(), Failure> {
            let mut sinks = sinks;
            for vectors in batches {
                sinks.push(&vectors, dim)?;
                // The encoder may be done and gone: then the buffer is simply dropped.
                let _ = to_encoder.send(vectors);
            }
            sinks.finish()
        });
        let mut buffers = 0;
        let encoded = (|| -> Result<(), Failure> {
            while texts.next_batch(a.batch as usize, &mut block, &mut ends)? {
                let batch: Vec<&str> = std::iter::once(0).chain(ends.iter().copied()).zip(&ends).map(|(s, &e)| &block[s..e]).collect();
                let vectors = match &gpu {
                    Some((gpu, _)) => edo::block_on(gpu.encode(&batch))?.read_blocking()?,
                    None => {
                        let mut vectors = match free.try_recv() {
                            Ok(v) => v,
                            Err(_) if buffers < 2 => {
                                buffers += 1;
                                Vec::new()
                            }
                            // Both buffers are with the writer: wait for one (or for its error).
                            Err(_) => match free.recv() {
                                Ok(v) => v,
                                Err(_) => break,
                            },
                        };
                        vectors.resize(batch.len() * dim, 0.0);
                        model.encode_into(&batch, &mut vectors)?;
                        vectors
                    }
                };
                for (text, v) in batch.iter().zip(vectors.chunks_exact(dim.max(1))).take(10 - shown.len().min(10)) {
                    shown.push((text.to_string(), v.to_vec()));
                }
                total += batch.len();
                bar.inc(block.len() as u64 + batch.len() as u64);
                bar.set_message(format!("{total} texts"));
                if to_writer.send(vectors).is_err() {
                    // The writer stopped on an error, which its join below reports.
                    break;
                }
            }
            Ok(())
        })();
        drop(to_writer);
        let written = writer.join().map_err(|_| Failure::new(exit::FAILURE, "the writer thread panicked"))?;
        encoded.and(written)
    })?;
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    if a.json {
        return Ok(());
    }
    let path = match &gpu {
        Some((_, engine)) => format!("GPU ({})", engine.adapter()),
        None => "CPU path".to_string(),
    };
    let mut report = String::new();
    let _ = writeln!(
        report,
        "{total} texts → {total} × {dim} vectors ({}, table {} in {}, {}) in {:.1} ms ({:.0} texts/s)",
        if model.normalize() { "L2-normalised" } else { "not normalised" },
        crate::bench::human_bytes(model.table().bytes()),
        model.table().format(),
        path,
        seconds * 1e3,
        total as f64 / seconds.max(1e-9),
    );
    for (text, v) in &shown {
        let values: Vec<String> = v.iter().take(6).map(|x| format!("{x:+.4}")).collect();
        let text: String = text.chars().take(40).collect();
        let _ = writeln!(report, "  {text:<40}  [{}{}]", values.join(", "), if dim > 6 { ", …" } else { "" });
    }
    if total > 10 {
        let _ = writeln!(report, "  … {} more", total - 10);
    }
    if let Some(out) = a.output.as_ref().filter(|_| !to_stdout) {
        let _ = writeln!(report, "wrote {}", out.display());
    }
    if to_stdout {
        eprint!("{report}");
    } else {
        print!("{report}");
    }
    Ok(())
}

#[derive(Args)]
pub struct QuantizeModelArgs {
    /// The model: a folder (model2vec's, sentence-transformers' StaticEmbedding), an .edo model
    /// file, or with --wordllama WordLlama's weights (.safetensors with embedding.weight).
    source: PathBuf,
    /// The table's format in the file.
    #[arg(long, short, default_value = "int8", value_parser = FormatParser)]
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
