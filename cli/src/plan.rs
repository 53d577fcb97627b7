//! `edo plan`.

use std::path::{Path, PathBuf};

use clap::Args;
use edo::file::TableFile;
use edo::plan::{plan, Access, Choice, PlanOptions, TableSpec};
use edo::{AnyTable, Format};

use crate::bench::human_bytes;
use crate::tables::SourceArgs;
use crate::{exit, Failure, FormatParser};

#[derive(Args)]
pub struct PlanArgs {
    /// GPU budget: bytes, or with a unit (KiB, MiB, GiB, KB, MB, GB). Default: half of what
    /// the tables take resident in INT8.
    #[arg(long, value_parser = parse_size)]
    budget: Option<u64>,
    /// A table as NAME:ROWS:DIM, or NAME=FILE (any table edo imports: its rows are measured,
    /// and --write can write it), optionally followed by :zipf=S, :uniform and :lookups=W
    /// (relative lookups; default 1). Repeat for each table. Default: 26 recommender tables
    /// (10 thousand to 4 million rows, dim 64, Zipf 1.05).
    #[arg(long = "table", value_parser = parse_table)]
    tables: Vec<TableArg>,
    /// Candidate formats, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = FormatParser, default_value = "fp16,int8,int4,binary+scale")]
    formats: Vec<Format>,
    /// Least expected hit rate of a cached table (above 1: no caches).
    #[arg(long, default_value_t = 0.9)]
    min_hit_rate: f64,
    /// No mixed-precision tables.
    #[arg(long)]
    no_mixed: bool,
    /// Print the plan as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Write the planned tables given as NAME=FILE into this directory: NAME.edo (resident, or
    /// the host table of a cache), or for mixed precision NAME.hot.edo, NAME.cold.edo and
    /// NAME.hot_rows.npy (u32, the original rows of the hot table's rows), from which
    /// edo::MixedTable::from_parts rebuilds it.
    #[arg(long)]
    write: Option<PathBuf>,
}

/// A `--table`: a shape to plan for, or a file whose table to plan for (and write).
#[derive(Clone)]
pub enum TableArg {
    Shape(TableSpec),
    File { name: String, path: PathBuf, access: Access, lookups: f64 },
}

fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("{s:?} is not a size (e.g. 512MiB)"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1u64,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        other => return Err(format!("unknown unit {other:?} (B, KiB, MiB, GiB, KB, MB, GB)")),
    };
    Ok((value * scale as f64) as u64)
}

fn parse_table(s: &str) -> Result<TableArg, String> {
    // Options come last, after a colon each; what is left is NAME:ROWS:DIM or NAME=FILE.
    let mut head = s;
    let (mut access, mut lookups) = (Access::Zipf(1.05), 1.0);
    while let Some((rest, opt)) = head.rsplit_once(':') {
        if opt == "uniform" {
            access = Access::Uniform;
        } else if let Some(v) = opt.strip_prefix("zipf=") {
            let z: f64 = v.parse().map_err(|_| format!("{s:?}: zipf={v:?} is not a number"))?;
            if !(z > 0.0 && z.is_finite()) {
                return Err(format!("{s:?}: the Zipf exponent must be > 0"));
            }
            access = Access::Zipf(z);
        } else if let Some(v) = opt.strip_prefix("lookups=") {
            lookups = v.parse().ok().filter(|w: &f64| *w >= 0.0 && w.is_finite()).ok_or_else(|| format!("{s:?}: lookups={v:?} must be a number ≥ 0"))?;
        } else {
            break;
        }
        head = rest;
    }
    if let Some((name, path)) = head.split_once('=') {
        if name.is_empty() || path.is_empty() {
            return Err(format!("{s:?}: expected NAME=FILE"));
        }
        return Ok(TableArg::File { name: name.to_string(), path: PathBuf::from(path), access, lookups });
    }
    let parts: Vec<&str> = head.split(':').collect();
    let [name, rows, dim] = parts.as_slice() else {
        return Err(format!("{s:?}: expected NAME:ROWS:DIM or NAME=FILE, then :zipf=S, :uniform or :lookups=W"));
    };
    let rows: usize = rows.parse().map_err(|_| format!("{s:?}: rows {rows:?} is not a number"))?;
    let dim: usize = dim.parse().map_err(|_| format!("{s:?}: dim {dim:?} is not a number"))?;
    if rows == 0 || dim == 0 {
        return Err(format!("{s:?}: rows and dim must be at least 1"));
    }
    let mut spec = TableSpec::new(*name, rows, dim, access);
    spec.lookups = lookups;
    Ok(TableArg::Shape(spec))
}

/// Rows of a table the planner measures each format's error on: up to this many, evenly spaced.
const SAMPLE_ROWS: usize = 2048;

/// A table read from a file: its values, and its spec with a sample of its rows.
struct Loaded {
    path: PathBuf,
    values: Vec<f32>,
    vocab: Option<edo::file::Vocab>,
}

fn load(name: &str, path: &Path, access: &Access, lookups: f64) -> Result<(TableSpec, Loaded), Failure> {
    let imported = SourceArgs::default().read(path)?;
    let (rows, dim) = (imported.rows(), imported.dim());
    let values = imported.values().into_owned();
    let step = rows.div_ceil(SAMPLE_ROWS).max(1);
    let sample: Vec<f32> = (0..rows).step_by(step).flat_map(|r| values[r * dim..(r + 1) * dim].iter().copied()).collect();
    let mut spec = TableSpec::new(name, rows, dim, access.clone());
    spec.lookups = lookups;
    spec.sample = Some(sample);
    Ok((spec, Loaded { path: path.to_path_buf(), values, vocab: imported.vocab }))
}

/// 26 tables of a recommender model (the DLRM shape: a few huge tables, many small ones).
fn default_tables() -> Vec<TableSpec> {
    (0..26)
        .map(|i| {
            let rows = [4_000_000, 2_000_000, 1_000_000, 500_000, 100_000, 10_000][i % 6] / (1 + i / 6);
            TableSpec::new(format!("sparse_{i}"), rows.max(1000), 64, Access::Zipf(1.05))
        })
        .collect()
}

pub fn run(a: PlanArgs) -> Result<(), Failure> {
    // Names are the plan's rows and the written files' names: each once.
    let mut names = std::collections::HashSet::new();
    for t in &a.tables {
        let name = match t {
            TableArg::Shape(spec) => &spec.name,
            TableArg::File { name, .. } => name,
        };
        if !names.insert(name.as_str()) {
            return Err(Failure::new(exit::USAGE, format!("--table {name} is given twice: each table needs a name of its own")));
        }
    }
    let mut tables = Vec::new();
    let mut loaded = Vec::new();
    for t in &a.tables {
        match t {
            TableArg::Shape(spec) => {
                tables.push(spec.clone());
                loaded.push(None);
            }
            TableArg::File { name, path, access, lookups } => {
                let (spec, table) = load(name, path, access, *lookups)?;
                tables.push(spec);
                loaded.push(Some(table));
            }
        }
    }
    if tables.is_empty() {
        tables = default_tables();
        loaded = tables.iter().map(|_| None).collect();
    }
    if let Some(dir) = &a.write {
        if !loaded.iter().any(Option::is_some) {
            return Err(Failure::new(exit::USAGE, "--write needs tables given as NAME=FILE: a NAME:ROWS:DIM table has no rows to write"));
        }
        std::fs::create_dir_all(dir).map_err(|e| Failure::new(exit::CANT_CREATE, format!("{}: {e}", dir.display())))?;
    }
    let int8: u64 = tables.iter().map(|t| (t.rows * Format::Int8.row_bytes(t.dim)) as u64).sum();
    let budget = a.budget.unwrap_or(int8 / 2);
    let options = PlanOptions { formats: a.formats, min_hit_rate: a.min_hit_rate, mixed: !a.no_mixed, ..PlanOptions::default() };
    let p = plan(&tables, budget, &options).map_err(|e| match e {
        // Not even the smallest plan fits: the budget asked for is the argument to change.
        e @ edo::Error::LimitExceeded { .. } => Failure::new(exit::USAGE, e.to_string()),
        e => e.into(),
    })?;
    let mut written = Vec::new();
    if let Some(dir) = &a.write {
        for ((spec, table), tp) in tables.iter().zip(&loaded).zip(&p.tables) {
            if let Some(table) = table {
                written.extend(write_planned(dir, spec, table, &tp.choice)?);
            }
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&p.to_json()).expect("JSON"));
        return Ok(());
    }
    println!();
    let plural = if tables.len() == 1 { "" } else { "s" };
    println!("edo plan — {} table{plural} into {} of GPU memory (INT8 everywhere would take {})", tables.len(), human_bytes(budget), human_bytes(int8));
    println!();
    println!("{p}");
    println!();
    // Tables already in INT8 have no error against it: no ratio to give.
    let ratio = if p.int8_error > 0.0 { format!(" ({:.2}×)", p.expected_error / p.int8_error) } else { String::new() };
    println!(
        "expected error {:.2e} against {:.2e} for INT8 everywhere{ratio}, in {} instead of {}",
        p.expected_error,
        p.int8_error,
        human_bytes(p.bytes),
        human_bytes(p.int8_bytes)
    );
    println!("error: mean relative L2 error ‖x − x̂‖/‖x‖ of a looked-up row, per format measured on rows shaped like trained");
    println!("embeddings, weighted by how often each part of a table is looked up. hit rate: lookups a cache serves without an");
    println!("upload (expected from the access distribution; a cache of the most looked-up rows).");
    if budget < p.bytes {
        return Err(Failure::new(exit::FAILURE, "internal: the plan exceeds the budget"));
    }
    for path in &written {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Builds the table `choice` describes from the file's rows and writes it into `dir`; returns
/// the files written.
fn write_planned(dir: &Path, spec: &TableSpec, table: &Loaded, choice: &Choice) -> Result<Vec<PathBuf>, Failure> {
    let built = choice.build(&table.values, spec.rows, spec.dim, &spec.access)?;
    let source = std::fs::canonicalize(&table.path).unwrap_or_else(|_| table.path.clone());
    let file = |t: &edo::PackedTable, part: &str| -> Result<TableFile, Failure> {
        let mut f = TableFile::new(t.clone());
        f.set_metadata("plan.choice", choice.to_string())?;
        f.set_metadata("plan.part", part)?;
        f.set_metadata("source", source.display().to_string())?;
        if let Some(rows) = choice.cache_capacity() {
            f.set_metadata("plan.cache_rows", rows.to_string())?;
        }
        Ok(f)
    };
    let mut out = Vec::new();
    let mut put = |f: TableFile, name: String| -> Result<(), Failure> {
        let path = dir.join(name);
        f.write(&path)?;
        out.push(path);
        Ok(())
    };
    match &built {
        AnyTable::Dense(t) => {
            let mut f = file(t, "whole")?;
            if let Some(v) = &table.vocab {
                f = f.with_vocab(v.clone())?;
            }
            put(f, format!("{}.edo", spec.name))?;
        }
        AnyTable::Mixed(m) => {
            put(file(m.hot(), "hot")?, format!("{}.hot.edo", spec.name))?;
            put(file(m.cold(), "cold")?, format!("{}.cold.edo", spec.name))?;
            let hot_rows = m.hot_rows();
            let npy = edo::file::export::Array { dtype: edo::file::npy::Dtype::U32, shape: vec![hot_rows.len()], data: bytemuck_bytes(&hot_rows) };
            let path = dir.join(format!("{}.hot_rows.npy", spec.name));
            std::fs::write(&path, npy.to_npy()).map_err(|e| Failure::new(exit::CANT_CREATE, format!("{}: {e}", path.display())))?;
            out.push(path);
        }
        _ => return Err(Failure::new(exit::FAILURE, format!("internal: the planner chose {choice}, which edo plan cannot write"))),
    }
    Ok(out)
}

fn bytemuck_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
