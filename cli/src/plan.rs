//! `edo plan`.

use clap::Args;
use edo::plan::{plan, Access, PlanOptions, TableSpec};
use edo::Format;

use crate::bench::human_bytes;
use crate::{exit, parse_format, Failure};

#[derive(Args)]
pub struct PlanArgs {
    /// GPU budget: bytes, or with a unit (KiB, MiB, GiB, KB, MB, GB). Default: half of what
    /// the tables take resident in INT8.
    #[arg(long, value_parser = parse_size)]
    budget: Option<u64>,
    /// A table as NAME:ROWS:DIM, optionally followed by :zipf=S, :uniform and :lookups=W
    /// (relative lookups; default 1). Repeat for each table. Default: 26 recommender tables
    /// (10 thousand to 4 million rows, dim 64, Zipf 1.05).
    #[arg(long = "table", value_parser = parse_table)]
    tables: Vec<TableSpec>,
    /// Candidate formats, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_format, default_value = "fp16,int8,int4,binary+scale")]
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

fn parse_table(s: &str) -> Result<TableSpec, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let [name, rows, dim, rest @ ..] = parts.as_slice() else { return Err(format!("{s:?}: expected NAME:ROWS:DIM[:zipf=S|:uniform][:lookups=W]")) };
    let rows: usize = rows.parse().map_err(|_| format!("{s:?}: rows {rows:?} is not a number"))?;
    let dim: usize = dim.parse().map_err(|_| format!("{s:?}: dim {dim:?} is not a number"))?;
    if rows == 0 || dim == 0 {
        return Err(format!("{s:?}: rows and dim must be at least 1"));
    }
    let mut spec = TableSpec::new(*name, rows, dim, Access::Zipf(1.05));
    for opt in rest {
        if *opt == "uniform" {
            spec.access = Access::Uniform;
        } else if let Some(v) = opt.strip_prefix("zipf=") {
            let z: f64 = v.parse().map_err(|_| format!("{s:?}: zipf={v:?} is not a number"))?;
            if !(z > 0.0 && z.is_finite()) {
                return Err(format!("{s:?}: the Zipf exponent must be > 0"));
            }
            spec.access = Access::Zipf(z);
        } else if let Some(v) = opt.strip_prefix("lookups=") {
            spec.lookups = v.parse().ok().filter(|w: &f64| *w >= 0.0 && w.is_finite()).ok_or_else(|| format!("{s:?}: lookups={v:?} must be a number ≥ 0"))?;
        } else {
            return Err(format!("{s:?}: unknown option {opt:?} (zipf=S, uniform, lookups=W)"));
        }
    }
    Ok(spec)
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
    let tables = if a.tables.is_empty() { default_tables() } else { a.tables };
    let int8: u64 = tables.iter().map(|t| (t.rows * Format::Int8.row_bytes(t.dim)) as u64).sum();
    let budget = a.budget.unwrap_or(int8 / 2);
    let options = PlanOptions { formats: a.formats, min_hit_rate: a.min_hit_rate, mixed: !a.no_mixed, ..PlanOptions::default() };
    let p = plan(&tables, budget, &options)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&p.to_json()).expect("JSON"));
        return Ok(());
    }
    println!();
    println!("edo plan — {} tables into {} of GPU memory (INT8 everywhere would take {})", tables.len(), human_bytes(budget), human_bytes(int8));
    println!();
    println!("{p}");
    println!();
    println!(
        "expected error {:.2e} against {:.2e} for INT8 everywhere ({:.2}×), in {} instead of {}",
        p.expected_error,
        p.int8_error,
        p.expected_error / p.int8_error,
        human_bytes(p.bytes),
        human_bytes(p.int8_bytes)
    );
    println!("error: mean relative L2 error ‖x − x̂‖/‖x‖ of a looked-up row, per format measured on rows shaped like trained");
    println!("embeddings, weighted by how often each part of a table is looked up. hit rate: lookups a cache serves without an");
    println!("upload (expected from the access distribution; a cache of the most looked-up rows).");
    if budget < p.bytes {
        return Err(Failure::new(exit::FAILURE, "internal: the plan exceeds the budget"));
    }
    Ok(())
}
