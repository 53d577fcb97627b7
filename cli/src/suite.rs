//! `edo bench suite` and `edo bench compare`.

use std::path::{Path, PathBuf};

use clap::Args;
use edo::model::StaticModel;
use edo::Format;
use edo_bench::suite::{self, report, Artifact, Op, Results, Scale, SuiteOptions};
use indicatif::{ProgressBar, ProgressStyle};

use crate::{exit, Failure, FormatParser};

#[derive(Args)]
pub struct SuiteArgs {
    /// The quick matrix (small and medium tables, four formats): about a minute on a laptop.
    #[arg(long, conflicts_with = "scale")]
    quick: bool,
    /// The matrix: full (the default: small, medium and a 1 GiB large table, ten formats;
    /// minutes), server (full with a million ids a call on the medium and large tables, the large
    /// one in the device's own shards: for big GPUs), quick, or tiny (toy tables, for tests).
    #[arg(long, value_parser = ["full", "server", "quick", "tiny"], hide_possible_values = true)]
    scale: Option<String>,
    /// Run only on GPU adapters whose name contains this (case-insensitive); see the list a run
    /// prints. Default: every adapter wgpu finds.
    #[arg(long)]
    adapter: Option<String>,
    /// No GPU: the CPU path only.
    #[arg(long, conflicts_with = "adapter")]
    cpu: bool,
    /// No CPU-path backends: the GPU adapters only.
    #[arg(long, conflicts_with = "cpu")]
    no_cpu: bool,
    /// Formats instead of the matrix's, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = FormatParser)]
    formats: Option<Vec<Format>>,
    /// Operations to run, comma separated: gather, bag_sum, bag_mean, hashed_bag, search, cache,
    /// latency, embed (embed needs --model). Default: all.
    #[arg(long, value_delimiter = ',', value_parser = parse_op)]
    ops: Option<Vec<Op>>,
    /// Start no case after this many seconds; the rest are listed as skipped.
    #[arg(long)]
    budget_seconds: Option<f64>,
    /// A static model (an .edo model file or a model2vec folder) for the embed cases.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Timed repetitions per case (default 5, 10 for the full suite).
    #[arg(long)]
    reps: Option<usize>,
    /// The run's name in comparisons (default: the first backend's name).
    #[arg(long)]
    label: Option<String>,
    /// The results file (JSON, docs/bench-schema.md).
    #[arg(short, long, default_value = "edo-bench.json")]
    output: PathBuf,
    /// The HTML report (one self-contained file with the charts).
    #[arg(long, default_value = "edo-bench.html")]
    html: PathBuf,
    /// Also write the cases as CSV, a case a line, with the run's runtime, SIMD level,
    /// percentiles and quality.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Also write the cases as JSON Lines (the CSV's fields).
    #[arg(long)]
    jsonl: Option<PathBuf>,
}

fn parse_op(s: &str) -> Result<Op, String> {
    Op::from_name(s).ok_or_else(|| format!("unknown operation {s:?} ({})", Op::ALL.map(Op::name).join(", ")))
}

#[derive(Args)]
pub struct CompareArgs {
    /// Results files of `edo bench suite`, the demo page's Benchmark button or
    /// scripts/peers/bench_peers.py.
    #[arg(required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    /// Write an HTML report with one series per file and backend.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Write the comparison as a Markdown page.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write every file's cases as one CSV, a case a line.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write every file's cases as JSON Lines.
    #[arg(long)]
    jsonl: Option<PathBuf>,
}

fn write(path: &Path, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text).map_err(|e| Failure::new(exit::CANT_CREATE, format!("{}: {e}", path.display())))
}

pub fn suite(a: SuiteArgs) -> Result<(), Failure> {
    let scale = match (a.quick, a.scale.as_deref()) {
        (true, _) | (false, Some("quick")) => Scale::Quick,
        (false, Some("tiny")) => Scale::Tiny,
        (false, Some("server")) => Scale::Server,
        _ => Scale::Full,
    };
    if a.budget_seconds.is_some_and(|b| !(b > 0.0 && b.is_finite())) {
        return Err(Failure::new(exit::USAGE, "--budget-seconds must be a positive number of seconds"));
    }
    if a.reps == Some(0) {
        return Err(Failure::new(exit::USAGE, "--reps must be at least 1"));
    }
    if a.ops.as_ref().is_some_and(|ops| ops.contains(&Op::Embed)) && a.model.is_none() {
        return Err(Failure::new(exit::USAGE, "the embed operation needs a model: --model MODEL.edo or a model2vec folder"));
    }
    let mut options = SuiteOptions::new(scale);
    options.formats = a.formats;
    options.ops = a.ops;
    options.budget_seconds = a.budget_seconds;
    options.label = a.label;
    if let Some(r) = a.reps {
        options.reps = r;
    }
    if a.no_cpu {
        options.cpu_threads.clear();
    }
    options.artifacts.extend(artifact("binary", std::env::current_exe().ok().as_deref()));
    if let Some(path) = &a.model {
        let started = std::time::Instant::now();
        options.model = Some(StaticModel::open(path)?);
        options.cold_start.model_s = Some(started.elapsed().as_secs_f64());
        // A model folder's weights are what its size is.
        let file = if path.is_dir() { path.join("model.safetensors") } else { path.clone() };
        options.artifacts.extend(artifact("model", Some(&file)));
    }
    let gpus = if a.cpu {
        Vec::new()
    } else {
        let started = std::time::Instant::now();
        let (engines, names) = edo::block_on(suite::engines());
        options.cold_start.engines_s = Some(started.elapsed().as_secs_f64());
        match &a.adapter {
            Some(f) => {
                let chosen: Vec<_> = engines.into_iter().filter(|e| e.adapter().name.to_lowercase().contains(&f.to_lowercase())).collect();
                if chosen.is_empty() {
                    let there = if names.is_empty() { "none found".to_string() } else { names.join(", ") };
                    return Err(Failure::new(exit::USAGE, format!("--adapter {f:?} matches none of this machine's adapters: {there}")));
                }
                chosen
            }
            None => {
                if engines.is_empty() {
                    eprintln!("edo: no GPU adapter found; the CPU path only");
                }
                engines
            }
        }
    };
    if gpus.is_empty() && options.cpu_threads.is_empty() {
        return Err(Failure::new(exit::USAGE, "--no-cpu and no GPU adapter: nothing to run"));
    }
    for g in &gpus {
        eprintln!("GPU: {}", g.adapter());
    }
    let bar = ProgressBar::new(0);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} [{elapsed_precise}] {msg}").expect("a valid template"));
    let results = edo::block_on(suite::run(&options, &gpus, |p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(p.label.clone());
        std::future::ready(())
    }))?;
    bar.finish_and_clear();
    if results.cases.is_empty() {
        let why = match a.budget_seconds {
            Some(b) => format!("a budget of {b} s is too small for any case: setting up took {:.1} s before the first case could start", results.seconds),
            None => "no case ran (every one was skipped; see above)".to_string(),
        };
        eprint!("{}", report::text(std::slice::from_ref(&results)));
        return Err(Failure::new(exit::USAGE, why));
    }
    write(&a.output, &results.to_json())?;
    write(&a.html, &report::html(std::slice::from_ref(&results)))?;
    flat_files(std::slice::from_ref(&results), a.csv.as_deref(), a.jsonl.as_deref())?;
    print!("{}", report::text(std::slice::from_ref(&results)));
    println!();
    println!("results: {} (JSON)   report: {} (open in a browser)", a.output.display(), a.html.display());
    println!("compare with another device's run: edo bench compare {} OTHER.json --html compare.html", a.output.display());
    Ok(())
}

/// A file the run depends on, with its size raw and gzipped (level 9), if it can be read.
fn artifact(name: &str, path: Option<&Path>) -> Option<Artifact> {
    use std::io::Write;
    let bytes = std::fs::read(path?).ok()?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let gzip_bytes = gz.write_all(&bytes).ok().and_then(|()| gz.finish().ok()).map(|v| v.len() as u64);
    Some(Artifact { name: name.into(), bytes: bytes.len() as u64, gzip_bytes })
}

/// Writes the cases as CSV and JSON Lines where asked.
fn flat_files(files: &[Results], csv: Option<&Path>, jsonl: Option<&Path>) -> Result<(), Failure> {
    if let Some(p) = csv {
        write(p, &report::csv(files))?;
        println!("csv: {}", p.display());
    }
    if let Some(p) = jsonl {
        write(p, &report::jsonl(files))?;
        println!("jsonl: {}", p.display());
    }
    Ok(())
}

pub fn read_results(path: &Path) -> Result<Results, Failure> {
    let bytes = std::fs::read(path).map_err(|e| Failure::new(exit::NO_INPUT, format!("{}: {e}", path.display())))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Failure::new(exit::DATA, format!("{}: not an edo benchmark file (not text; `edo bench suite` writes them)", path.display())))?;
    Results::from_json(&text).map_err(|e| {
        let f = Failure::from(e);
        Failure::new(f.code, format!("{}: {}", path.display(), f.message))
    })
}

pub fn compare(a: CompareArgs) -> Result<(), Failure> {
    let files = a.files.iter().map(|p| read_results(p)).collect::<Result<Vec<_>, _>>()?;
    let versions: Vec<u32> = files.iter().map(|f| f.suite_version).collect();
    if versions.iter().any(|&v| v != versions[0]) {
        eprintln!("edo: warning: the files ran different suite versions ({versions:?}); their cases may measure different work");
    }
    print!("{}", report::text(&files));
    if let Some(p) = &a.html {
        write(p, &report::html(&files))?;
        println!("\nreport: {}", p.display());
    }
    if let Some(p) = &a.markdown {
        let mut md = report::markdown(&files);
        md.push_str(&format!("\nSources: {}.\n", a.files.iter().map(|p| format!("`{}`", p.display())).collect::<Vec<_>>().join(", ")));
        write(p, &md)?;
        println!("markdown: {}", p.display());
    }
    flat_files(&files, a.csv.as_deref(), a.jsonl.as_deref())
}
