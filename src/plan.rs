//! The memory planner: given tables (rows, dim, how they are accessed) and a GPU budget in bytes,
//! choose per table how to hold it — resident in one format, cached (a hot-row cache of the rows
//! that carry most lookups), or mixed precision (hot rows precise, cold rows compact) — so the
//! whole fits the budget with the least expected error of a looked-up row.
//!
//! Expected error is the mean relative L2 error `‖x − x̂‖ / ‖x‖` of a row, measured per format on
//! a sample of the table's rows (given, or synthetic rows of the same dim), weighted by how often
//! each part of the table is looked up. The choice is exact over the candidates: a
//! multiple-choice knapsack solved by dynamic programming over the budget in 20 000 steps, each
//! option's bytes rounded up to a step, so the plan never exceeds the budget.

use crate::format::{Format, PackedTable};
use crate::{AnyTable, Error, MixedTable};

/// How a table's rows are looked up.
#[derive(Clone, Debug, PartialEq)]
pub enum Access {
    /// Every row equally often.
    Uniform,
    /// Rank k (in some order) has probability ∝ k^−s.
    Zipf(f64),
    /// Lookups counted per row (a sample of the id stream); `len` must equal the rows.
    Counts(Vec<u64>),
}

/// One table to plan for.
#[derive(Clone, Debug)]
pub struct TableSpec {
    /// The table's name in reports.
    pub name: String,
    /// Rows of the table.
    pub rows: usize,
    /// Values per row.
    pub dim: usize,
    /// How its rows are looked up.
    pub access: Access,
    /// Lookups of this table relative to the others (its weight in the expected error).
    pub lookups: f64,
    /// Rows of the table (row-major f32) to measure each format's error on; `None`: synthetic
    /// rows shaped like trained embeddings.
    pub sample: Option<Vec<f32>>,
}

impl TableSpec {
    /// A table of `rows × dim` looked up as `access` says, with a weight of 1 and synthetic sample
    /// rows.
    pub fn new(name: impl Into<String>, rows: usize, dim: usize, access: Access) -> TableSpec {
        TableSpec { name: name.into(), rows, dim, access, lookups: 1.0, sample: None }
    }
}

/// What the planner may choose from.
#[derive(Clone, Debug)]
pub struct PlanOptions {
    /// Formats to consider.
    pub formats: Vec<Format>,
    /// A cached table must expect at least this hit rate (the cache holds the rows that carry
    /// this share of lookups). Set above 1 to rule caches out.
    pub min_hit_rate: f64,
    /// Consider mixed precision (two formats in one table).
    pub mixed: bool,
    /// Expected error charged per cache miss, so that among plans of (nearly) equal error the
    /// planner prefers fewer misses; misses cost time, not accuracy.
    pub miss_cost: f64,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions { formats: vec![Format::F16, Format::Int8, Format::Int4, Format::BinaryScaled], min_hit_rate: 0.9, mixed: true, miss_cost: 1e-4 }
    }
}

/// How one table is held.
#[derive(Clone, Debug, PartialEq)]
pub enum Choice {
    /// Every row on the GPU in `format`.
    Resident {
        /// The format.
        format: Format,
    },
    /// A [`crate::GpuCache`] of `capacity` rows in `format` over a host table.
    Cached {
        /// The format of the host table and the slots.
        format: Format,
        /// Rows the cache holds on the GPU.
        capacity: usize,
    },
    /// A [`crate::MixedTable`]: the `hot_rows` most looked-up rows in `hot`, the rest in `cold`.
    Mixed {
        /// The format of the hot rows.
        hot: Format,
        /// The format of the other rows.
        cold: Format,
        /// How many rows are hot.
        hot_rows: usize,
    },
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Choice::Resident { format } => write!(f, "resident {format}"),
            Choice::Cached { format, capacity } => write!(f, "cached {format}, {capacity} rows"),
            Choice::Mixed { hot, cold, hot_rows } => write!(f, "mixed: {hot_rows} hot rows {hot}, rest {cold}"),
        }
    }
}

impl Choice {
    /// Builds the table this choice describes from the table's row-major `rows × dim` f32 values,
    /// ready to look rows up from ([`crate::Lookup`] on the CPU path, [`crate::AnyGpuTable::upload`] for the
    /// GPU). The hot rows of a mixed table are the most looked up under `access`: by count for
    /// [`Access::Counts`], else in row order (row 0 the most frequent, as in a vocabulary sorted by
    /// frequency — the order [`Access::Zipf`] ranks assume). A cached choice builds the host table
    /// a [`crate::GpuCache`] of [`Choice::cache_capacity`] rows reads from.
    pub fn build(&self, data: &[f32], rows: usize, dim: usize, access: &Access) -> Result<AnyTable, Error> {
        Ok(match *self {
            Choice::Resident { format } | Choice::Cached { format, .. } => PackedTable::quantize(format, data, rows, dim)?.into(),
            Choice::Mixed { hot, cold, hot_rows } => match access {
                Access::Counts(counts) => MixedTable::from_counts(data, rows, dim, counts, hot_rows, hot, cold)?.into(),
                Access::Uniform | Access::Zipf(_) => {
                    let hot_ids: Vec<u32> = (0..hot_rows.min(rows) as u32).collect();
                    MixedTable::quantize(data, rows, dim, &hot_ids, hot, cold)?.into()
                }
            },
        })
    }

    /// Puts `table` (what [`Choice::build`] made of this choice) on the GPU as the choice says:
    /// resident, or — for a cached choice — a [`crate::GpuCache`] of [`Choice::cache_capacity`]
    /// rows over it, evicting the least frequently used.
    #[cfg(feature = "gpu")]
    pub async fn upload(&self, engine: &crate::Engine, table: AnyTable) -> Result<crate::AnyGpuTable, Error> {
        match (self, table) {
            (Choice::Cached { capacity, .. }, AnyTable::Dense(t)) => {
                Ok(crate::GpuCache::new(engine, t, *capacity, crate::cache::PolicyKind::Lfu.build()).await?.into())
            }
            (_, table) => crate::AnyGpuTable::upload(engine, &table).await,
        }
    }

    /// The rows a cache of this choice holds on the GPU (`None` unless cached).
    pub fn cache_capacity(&self) -> Option<usize> {
        match *self {
            Choice::Cached { capacity, .. } => Some(capacity),
            _ => None,
        }
    }
}

/// The plan of one table.
#[derive(Clone, Debug, PartialEq)]
pub struct TablePlan {
    /// The table's name.
    pub name: String,
    /// How to hold it.
    pub choice: Choice,
    /// GPU bytes of the choice.
    pub bytes: u64,
    /// Expected relative error of a looked-up row.
    pub expected_error: f64,
    /// Expected share of lookups served from the GPU without an upload (1 unless cached).
    pub hit_rate: f64,
    /// The same table resident in INT8, for comparison.
    pub int8_bytes: u64,
    /// Expected relative error of a looked-up row of the same table resident in INT8.
    pub int8_error: f64,
}

/// A plan for all tables.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The budget planned for, in bytes.
    pub budget: u64,
    /// Each table's plan, in the order given.
    pub tables: Vec<TablePlan>,
    /// GPU bytes of the plan (at most the budget).
    pub bytes: u64,
    /// Lookup-weighted mean of the tables' expected errors.
    pub expected_error: f64,
    /// "INT8 everywhere", resident: its bytes and its weighted error.
    pub int8_bytes: u64,
    /// The lookup-weighted mean error of "INT8 everywhere".
    pub int8_error: f64,
}

struct Candidate {
    choice: Choice,
    bytes: u64,
    error: f64,
    hit_rate: f64,
}

/// Plans `tables` into `budget` bytes. Fails with [`Error::LimitExceeded`] when not even the
/// smallest candidate of every table fits together.
pub fn plan(tables: &[TableSpec], budget: u64, options: &PlanOptions) -> Result<Plan, Error> {
    if options.formats.is_empty() {
        return Err(Error::Unsupported(crate::Unsupported::PlanWithoutFormats));
    }
    let total_lookups: f64 = tables.iter().map(|t| t.lookups.max(0.0)).sum::<f64>().max(f64::MIN_POSITIVE);
    let mut all = Vec::with_capacity(tables.len());
    let mut int8 = Vec::with_capacity(tables.len());
    for t in tables {
        if t.dim == 0 {
            return Err(Error::ZeroDim);
        }
        let mass = Mass::new(&t.access, t.rows)?;
        // A format that cannot hold the sample's values (FP16 past ±65504) is no candidate.
        let mut errors = Vec::new();
        for &f in &options.formats {
            match format_error(f, t) {
                Ok(e) => errors.push((f, e)),
                Err(Error::OutOfRange { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let int8_error = match errors.iter().find(|(f, _)| *f == Format::Int8) {
            Some(&(_, e)) => e,
            None => format_error(Format::Int8, t)?,
        };
        int8.push(((t.rows * Format::Int8.row_bytes(t.dim)) as u64, int8_error));
        all.push(candidates(t, &mass, &errors, options));
    }

    // Multiple-choice knapsack over budget steps; each option's bytes rounded up to a step.
    const STEPS: u64 = 20_000;
    let unit = budget.div_ceil(STEPS).max(1);
    let cap = (budget / unit) as usize;
    let mut best = vec![0f64; cap + 1];
    let mut picks: Vec<Vec<u16>> = Vec::with_capacity(tables.len());
    for (t, cands) in tables.iter().zip(&all) {
        let w = t.lookups.max(0.0) / total_lookups;
        let mut next = vec![f64::INFINITY; cap + 1];
        let mut pick = vec![u16::MAX; cap + 1];
        for (i, c) in cands.iter().enumerate() {
            let cost = c.bytes.div_ceil(unit) as usize;
            if cost > cap {
                continue;
            }
            let objective = w * (c.error + options.miss_cost * (1.0 - c.hit_rate));
            for u in cost..=cap {
                let v = best[u - cost] + objective;
                if v < next[u] {
                    next[u] = v;
                    pick[u] = i as u16;
                }
            }
        }
        best = next;
        picks.push(pick);
    }
    if tables.is_empty() {
        return Ok(Plan { budget, tables: Vec::new(), bytes: 0, expected_error: 0.0, int8_bytes: 0, int8_error: 0.0 });
    }
    if !best[cap].is_finite() {
        let smallest: u64 = all.iter().map(|c| c.iter().map(|c| c.bytes).min().unwrap_or(0)).sum();
        return Err(Error::LimitExceeded { what: "GPU bytes of the smallest plan for these tables", requested: smallest, max: budget });
    }
    // Walk back from the full budget.
    let mut u = cap;
    let mut chosen = vec![0usize; tables.len()];
    for t in (0..tables.len()).rev() {
        let i = picks[t][u] as usize;
        chosen[t] = i;
        u -= all[t][i].bytes.div_ceil(unit) as usize;
    }
    let mut out = Vec::with_capacity(tables.len());
    let (mut bytes, mut error, mut int8_bytes, mut int8_error) = (0u64, 0f64, 0u64, 0f64);
    for (t, spec) in tables.iter().enumerate() {
        let c = &all[t][chosen[t]];
        let w = spec.lookups.max(0.0) / total_lookups;
        bytes += c.bytes;
        error += w * c.error;
        int8_bytes += int8[t].0;
        int8_error += w * int8[t].1;
        out.push(TablePlan {
            name: spec.name.clone(),
            choice: c.choice.clone(),
            bytes: c.bytes,
            expected_error: c.error,
            hit_rate: c.hit_rate,
            int8_bytes: int8[t].0,
            int8_error: int8[t].1,
        });
    }
    Ok(Plan { budget, tables: out, bytes, expected_error: error, int8_bytes, int8_error })
}

fn candidates(t: &TableSpec, mass: &Mass, errors: &[(Format, f64)], options: &PlanOptions) -> Vec<Candidate> {
    let mut out = Vec::new();
    for &(format, error) in errors {
        let rb = format.row_bytes(t.dim) as u64;
        out.push(Candidate { choice: Choice::Resident { format }, bytes: rb * t.rows as u64, error, hit_rate: 1.0 });
        if options.min_hit_rate <= 1.0 {
            let capacity = mass.rows_for(options.min_hit_rate);
            if capacity < t.rows {
                out.push(Candidate { choice: Choice::Cached { format, capacity }, bytes: rb * capacity as u64, error, hit_rate: mass.top(capacity) });
            }
        }
    }
    if options.mixed && t.rows > 1 {
        for &(hot, e_hot) in errors {
            for &(cold, e_cold) in errors {
                let (rb_hot, rb_cold) = (hot.row_bytes(t.dim) as u64, cold.row_bytes(t.dim) as u64);
                if !(e_hot < e_cold && rb_hot > rb_cold) {
                    continue;
                }
                for share in [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5] {
                    let hot_rows = ((share * t.rows as f64).round() as usize).clamp(1, t.rows - 1);
                    let m = mass.top(hot_rows);
                    out.push(Candidate {
                        choice: Choice::Mixed { hot, cold, hot_rows },
                        bytes: rb_hot * hot_rows as u64 + rb_cold * (t.rows - hot_rows) as u64,
                        error: m * e_hot + (1.0 - m) * e_cold,
                        hit_rate: 1.0,
                    });
                }
            }
        }
    }
    out
}

/// Share of lookups carried by the most looked-up rows.
enum Mass {
    Uniform(usize),
    Zipf {
        s: f64,
        rows: usize,
        total: f64,
    },
    /// Prefix sums of the counts sorted in decreasing order, as shares.
    Sorted(Vec<f64>),
}

impl Mass {
    fn new(access: &Access, rows: usize) -> Result<Mass, Error> {
        Ok(match access {
            Access::Uniform => Mass::Uniform(rows),
            Access::Zipf(s) => {
                if !(*s > 0.0 && s.is_finite()) {
                    return Err(Error::Unsupported(crate::Unsupported::ZipfExponent));
                }
                Mass::Zipf { s: *s, rows, total: zipf_prefix(rows, *s) }
            }
            Access::Counts(counts) => {
                if counts.len() != rows {
                    return Err(Error::ShapeMismatch { what: "access counts (one per row)", expected: rows, actual: counts.len() });
                }
                let mut c = counts.clone();
                c.sort_unstable_by(|a, b| b.cmp(a));
                let total = c.iter().sum::<u64>().max(1) as f64;
                let mut acc = 0u64;
                Mass::Sorted(
                    c.into_iter()
                        .map(|x| {
                            acc += x;
                            acc as f64 / total
                        })
                        .collect(),
                )
            }
        })
    }

    /// Share of lookups of the `k` most looked-up rows.
    fn top(&self, k: usize) -> f64 {
        match self {
            Mass::Uniform(rows) => k.min(*rows) as f64 / (*rows).max(1) as f64,
            Mass::Zipf { s, rows, total } => zipf_prefix(k.min(*rows), *s) / total,
            Mass::Sorted(prefix) => {
                if k == 0 {
                    0.0
                } else {
                    prefix[k.min(prefix.len()) - 1]
                }
            }
        }
    }

    /// The fewest rows carrying at least `share` of lookups.
    fn rows_for(&self, share: f64) -> usize {
        let rows = match self {
            Mass::Uniform(r) | Mass::Zipf { rows: r, .. } => *r,
            Mass::Sorted(p) => p.len(),
        };
        let (mut lo, mut hi) = (0usize, rows);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.top(mid) >= share {
                hi = mid
            } else {
                lo = mid + 1
            }
        }
        lo
    }
}

/// Σ_{k=1..n} k^−s: exact for the first 10 000 terms, then the midpoint integral (the terms are
/// smooth there; the error is far below what a plan can tell apart).
fn zipf_prefix(n: usize, s: f64) -> f64 {
    const EXACT: usize = 10_000;
    let head: f64 = (1..=n.min(EXACT)).map(|k| (k as f64).powf(-s)).sum();
    if n <= EXACT {
        return head;
    }
    let (a, b) = (EXACT as f64 + 0.5, n as f64 + 0.5);
    let tail = if (s - 1.0).abs() < 1e-12 { (b / a).ln() } else { (b.powf(1.0 - s) - a.powf(1.0 - s)) / (1.0 - s) };
    head + tail
}

/// Mean relative L2 error of `format` on the table's sample rows (or synthetic rows).
pub fn format_error(format: Format, table: &TableSpec) -> Result<f64, Error> {
    let dim = table.dim;
    let synthetic;
    let sample: &[f32] = match &table.sample {
        Some(s) => s,
        None => {
            synthetic = crate::synth::embedding_table(256, dim, 0x5EED ^ dim as u64);
            &synthetic
        }
    };
    let n = sample.len() / dim;
    let packed = PackedTable::quantize(format, &sample[..n * dim], n, dim)?;
    let mut row = vec![0f32; dim];
    let (mut sum, mut count) = (0f64, 0usize);
    for (r, x) in sample.chunks_exact(dim).enumerate() {
        packed.decode_row_into(r, &mut row);
        let norm: f64 = x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt();
        if norm > 0.0 {
            let diff: f64 = x.iter().zip(&row).map(|(&a, &b)| (a as f64 - b as f64).powi(2)).sum::<f64>().sqrt();
            sum += diff / norm;
            count += 1;
        }
    }
    Ok(if count == 0 { 0.0 } else { sum / count as f64 })
}

impl Plan {
    /// The plan as JSON, as `edo plan --json` prints it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "budget": self.budget,
            "bytes": self.bytes,
            "expected_error": self.expected_error,
            "int8_bytes": self.int8_bytes,
            "int8_error": self.int8_error,
            "tables": self.tables.iter().map(|t| serde_json::json!({
                "name": t.name,
                "choice": t.choice.to_string(),
                "bytes": t.bytes,
                "expected_error": t.expected_error,
                "hit_rate": t.hit_rate,
                "int8_bytes": t.int8_bytes,
                "int8_error": t.int8_error,
            })).collect::<Vec<_>>(),
        })
    }
}

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{:<14} {:<40} {:>14} {:>10} {:>9} {:>14} {:>10}", "table", "plan", "bytes", "error", "hit rate", "int8 bytes", "int8 error")?;
        for t in &self.tables {
            writeln!(
                f,
                "{:<14} {:<40} {:>14} {:>10.2e} {:>9.4} {:>14} {:>10.2e}",
                t.name,
                t.choice.to_string(),
                t.bytes,
                t.expected_error,
                t.hit_rate,
                t.int8_bytes,
                t.int8_error
            )?;
        }
        write!(
            f,
            "{:<14} {:<40} {:>14} {:>10.2e} {:>9} {:>14} {:>10.2e}\nbudget {} bytes: the plan uses {:.1} %",
            "total",
            "",
            self.bytes,
            self.expected_error,
            "",
            self.int8_bytes,
            self.int8_error,
            self.budget,
            100.0 * self.bytes as f64 / self.budget.max(1) as f64
        )
    }
}
