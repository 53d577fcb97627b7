//! `edo-wasi`: edo's CPU-path commands for WASI runtimes (wasmtime, wasmer, WasmEdge) — one
//! thread, files through the runtime's preopened directories, no GPU. Built natively too, so a
//! test can require the WASI module's output to equal the native program's byte for byte.
//!
//! ```text
//! edo-wasi quantize IN.npy FORMAT OUT.edo     an .npy of floats to an .edo table
//! edo-wasi lookup TABLE.edo ID[,ID…]          rows as f32 bits (hex) and values, a row a line
//! edo-wasi embed MODEL_DIR TEXT…              a model2vec folder's vectors, a text a line
//! edo-wasi index MODEL_DIR CORPUS OUT.edo     the corpus's lines (empty ones skipped) embedded,
//!                                             in INT8, the lines as the file's vocabulary
//! edo-wasi query INDEX.edo MODEL_DIR K TEXT   the K lines nearest TEXT: binary candidates
//!                                             rescored in INT8, as `edo query` finds them
//! edo-wasi bench MODEL_DIR                    timings: an INT8 gather and a model's embedding
//! edo-wasi bench-suite SCALE MODEL_DIR OUT.json LABEL
//!                                             the benchmark suite (`edo bench suite`'s matrix:
//!                                             tiny or quick) on the CPU path, one thread,
//!                                             its results file for `edo bench compare`
//! ```
//!
//! `bench-suite` records what the host measured of the module where the runner says it in the
//! environment (scripts/checks/wasi_run.py does): `EDO_RUNTIME` (the runtime and its version),
//! `EDO_MODULE_S` (seconds compiling the module), `EDO_MODULE_BYTES` and `EDO_MODULE_GZIP_BYTES`.
//!
//! Exit status 0 on success, 2 for a usage error, 1 for any other error (its message on stderr).

use std::future::Future;
use std::io::Write;
use std::process::ExitCode;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use edo::file::{import, TableFile, Vocab};
use edo::model::StaticModel;
use edo::{Bounds, Error, Format, PackedTable};
use edo_bench::suite::{self, Artifact, Scale, SuiteError, SuiteOptions};

const USAGE: &str = "usage: edo-wasi quantize IN.npy FORMAT OUT.edo | lookup TABLE.edo ID[,ID…] | embed MODEL_DIR TEXT… \
                     | index MODEL_DIR CORPUS OUT.edo | query INDEX.edo MODEL_DIR K TEXT | bench MODEL_DIR \
                     | bench-suite SCALE MODEL_DIR OUT.json LABEL";

/// What went wrong: a usage error (exit 2) or edo's error (exit 1).
enum Failure {
    Usage(String),
    Edo(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Edo(e)
    }
}

impl From<edo::CoreError> for Failure {
    fn from(e: edo::CoreError) -> Failure {
        Failure::Edo(e.into())
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let result = run(&args, &mut out).and_then(|()| out.flush().map_err(stdout_error));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("edo-wasi: {message}\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::Edo(e)) => {
            eprintln!("edo-wasi: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &[String], out: &mut impl Write) -> Result<(), Failure> {
    let arg = |i: usize, what: &str| args.get(i).map(String::as_str).ok_or_else(|| Failure::Usage(format!("missing {what}")));
    match args.first().map(String::as_str) {
        Some("quantize") => {
            let (input, format, output) = (arg(1, "IN.npy")?, arg(2, "FORMAT")?, arg(3, "OUT.edo")?);
            let format = Format::from_name(format).ok_or_else(|| Failure::Usage(format!("no format named {format:?}")))?;
            let imported = import::npy(&read(input)?, import::FileLayout::Dense)?;
            let bytes = TableFile::new(imported.to_format(format)?).to_bytes();
            std::fs::write(output, bytes).map_err(|e| Error::io(output, e))?;
            Ok(())
        }
        Some("lookup") => {
            let file = TableFile::from_bytes(read(arg(1, "TABLE.edo")?)?)?;
            let ids = arg(2, "IDS")?
                .split(',')
                .map(|s| s.trim().parse::<u32>().map_err(|_| Failure::Usage(format!("{s:?} is not an id"))))
                .collect::<Result<Vec<u32>, _>>()?;
            let rows = edo::cpu::gather(file.table(), &ids, Bounds::Error)?;
            write_rows(out, &rows, file.table().dim())
        }
        Some("embed") => {
            let model = model(arg(1, "MODEL_DIR")?)?;
            let texts: Vec<&str> = args.get(2..).unwrap_or_default().iter().map(String::as_str).collect();
            if texts.is_empty() {
                return Err(Failure::Usage("no TEXT to embed".into()));
            }
            write_rows(out, &model.encode(&texts)?, model.dim())
        }
        Some("index") => {
            let (model, corpus, output) = (model(arg(1, "MODEL_DIR")?)?, arg(2, "CORPUS")?, arg(3, "OUT.edo")?);
            let text = String::from_utf8(read(corpus)?).map_err(|_| Error::BadFile { what: "corpus", reason: format!("{corpus} is not UTF-8 text") })?;
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            if lines.is_empty() {
                return Err(Failure::Usage(format!("{corpus}: no lines to index")));
            }
            // A batch at a time, as `edo index` embeds them (the vectors do not depend on it).
            let mut vectors = Vec::with_capacity(lines.len() * model.dim());
            for chunk in lines.chunks(1024) {
                vectors.extend(model.encode(chunk)?);
            }
            let table = PackedTable::quantize(Format::Int8, &vectors, lines.len(), model.dim())?;
            let file = TableFile::new(table).with_vocab(Vocab::new(lines.iter().map(|l| l.to_string()).collect()))?;
            std::fs::write(output, file.to_bytes()).map_err(|e| Error::io(output, e))?;
            Ok(())
        }
        Some("query") => {
            let file = TableFile::from_bytes(read(arg(1, "INDEX.edo")?)?)?;
            let model = model(arg(2, "MODEL_DIR")?)?;
            let k = arg(3, "K")?.parse::<usize>().ok().filter(|&k| k >= 1).ok_or_else(|| Failure::Usage("K must be a whole number from 1".into()))?;
            let text = arg(4, "TEXT")?;
            let Some(lines) = file.vocab() else { return Err(Failure::Usage("the index has no lines (not written by `index`)".into())) };
            let table = file.table();
            if table.dim() != model.dim() {
                return Err(Failure::Usage(format!("the index has {} dims, the model {}", table.dim(), model.dim())));
            }
            file.verify()?;
            // Binary codes of the corpus (x > 0 of its INT8 rows) find candidates; INT8 rescores them.
            let codes = table.requantize(Format::Binary)?;
            let query = model.encode(&[text])?;
            let found = edo::search::search_rescored_with(&codes, file.code_transform(), &query, table, k.min(table.rows()), 4)?;
            for (rank, (&id, &score)) in found.ids.iter().zip(&found.scores).enumerate() {
                let line = lines.token(id).unwrap_or("?");
                writeln!(out, "{}\t{id}\t{:08x}\t{score:+.4}\t{line}", rank + 1, score.to_bits()).map_err(stdout_error)?;
            }
            Ok(())
        }
        Some("bench") => bench(arg(1, "MODEL_DIR")?, out),
        Some("bench-suite") => bench_suite(arg(1, "SCALE")?, arg(2, "MODEL_DIR")?, arg(3, "OUT.json")?, arg(4, "LABEL")?, out),
        Some(other) => Err(Failure::Usage(format!("no command {other:?}"))),
        None => Err(Failure::Usage("no command".into())),
    }
}

/// A failed write to standard output.
fn stdout_error(e: std::io::Error) -> Failure {
    Failure::Edo(Error::io("standard output", e))
}

/// A file's bytes (a WASI runtime reads only its preopened directories).
fn read(path: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::io(path, e))
}

/// A model2vec folder: config.json, tokenizer.json and model.safetensors.
fn model(dir: &str) -> Result<StaticModel, Error> {
    let file = |name: &str| read(&format!("{dir}/{name}"));
    StaticModel::from_bytes(&file("config.json")?, &file("tokenizer.json")?, &file("model.safetensors")?)
}

/// Each row as a line: its values' f32 bits in hex (what the comparison checks), then the values.
fn write_rows(out: &mut impl Write, rows: &[f32], dim: usize) -> Result<(), Failure> {
    for row in rows.chunks(dim.max(1)) {
        let bits: Vec<String> = row.iter().map(|v| format!("{:08x}", v.to_bits())).collect();
        let values: Vec<String> = row.iter().map(|v| format!("{v}")).collect();
        writeln!(out, "{}\t{}", bits.join(" "), values.join(" ")).map_err(stdout_error)?;
    }
    Ok(())
}

/// The median of `reps` timed calls of `f` after one untimed call, in seconds.
fn median_seconds(reps: usize, mut f: impl FnMut() -> Result<(), Failure>) -> Result<f64, Failure> {
    f()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// An INT8 gather of 65 536 ids from a synthetic 262 144 × 128 table (34 MB: out of the caches)
/// and the model's embedding of 1 024 short texts, each the median of 9 calls on one thread, as
/// `name seconds` lines.
fn bench(model_dir: &str, out: &mut impl Write) -> Result<(), Failure> {
    let int8 = edo::synth::embedding_packed(262_144, 128, 7)?.requantize(Format::Int8)?;
    // Uniform random ids, the same stream on every target.
    let ids = edo::synth::uniform_ids(65_536, int8.rows(), 2);
    let mut rows_out = vec![0f32; ids.len() * int8.dim()];
    let gather = edo::par::with_threads(1, || median_seconds(9, || Ok(edo::cpu::gather_into(&int8, &ids, Bounds::Error, &mut rows_out)?)))?;
    let model = model(model_dir)?;
    let words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "search", "table"];
    let texts: Vec<String> = (0..1024).map(|i| (0..8).map(|j| words[(i * 7 + j * 3) % words.len()]).collect::<Vec<_>>().join(" ")).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let embed = edo::par::with_threads(1, || median_seconds(9, || Ok(model.encode(&texts).map(|_| ())?)))?;
    writeln!(out, "gather_int8_65536_ids {gather:.6}").map_err(stdout_error)?;
    writeln!(out, "embed_1024_texts {embed:.6}").map_err(stdout_error)?;
    Ok(())
}

/// The benchmark suite on the CPU path, one thread (a WASI module has no others), written to
/// `output` as `edo bench suite` writes its results; a line per case on `out`.
fn bench_suite(scale: &str, model_dir: &str, output: &str, label: &str, out: &mut impl Write) -> Result<(), Failure> {
    let scale = match scale {
        "tiny" => Scale::Tiny,
        "quick" => Scale::Quick,
        // Not `full`: it holds ten formats of a 2 097 152 × 128 table at once, past the 4 GiB a
        // wasm32 module can address (the browser's suite offers these two as well).
        other => return Err(Failure::Usage(format!("no scale {other:?} (tiny or quick)"))),
    };
    let mut options = SuiteOptions::new(scale);
    options.cpu_threads = vec![1];
    options.label = Some(label.to_string());
    let env = |name: &str| std::env::var(name).ok();
    options.runtime = env("EDO_RUNTIME");
    options.cold_start.module_s = env("EDO_MODULE_S").and_then(|v| v.parse().ok());
    if let Some(bytes) = env("EDO_MODULE_BYTES").and_then(|v| v.parse().ok()) {
        options.artifacts.push(Artifact { name: "wasm".into(), bytes, gzip_bytes: env("EDO_MODULE_GZIP_BYTES").and_then(|v| v.parse().ok()) });
    }
    let started = Instant::now();
    options.model = Some(model(model_dir)?);
    options.cold_start.model_s = Some(started.elapsed().as_secs_f64());
    let weights = format!("{model_dir}/model.safetensors");
    if let Ok(meta) = std::fs::metadata(&weights) {
        options.artifacts.push(Artifact { name: "model".into(), bytes: meta.len(), gzip_bytes: None });
    }
    let results = block_on(suite::run(&options, &[], |_| std::future::ready(()))).map_err(|e| match e {
        SuiteError::Edo(e) => Failure::Edo(e),
        other => Failure::Usage(other.to_string()),
    })?;
    std::fs::write(output, results.to_json()).map_err(|e| Error::io(output, e))?;
    for case in &results.cases {
        writeln!(out, "{} {} {} {}: {:.3} ms", case.op, case.format, case.size, case.batch, 1e3 * case.median_s).map_err(stdout_error)?;
    }
    Ok(())
}

/// Runs the suite's future to its end on this thread. On the CPU path it never waits on anything
/// (no GPU, no timers), so polling until it is ready is all an executor has to do here.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
    }
}
