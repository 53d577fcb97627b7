//! `edo bench bags`: EmbeddingBag on the CPU path over a table file and index arrays a peer made,
//! so that a peer library (FBGEMM through PyTorch: scripts/peers/fbgemm_peer.py) and edo pool the same
//! rows of the same bytes, and edo's output is checked against the peer's.

use std::path::PathBuf;

use clap::Args;
use edo::file::import::{self, FileLayout};
use edo::file::npy::{self, Dtype};
use edo::{Bags, Bounds, Layout, Pooling};

use crate::{exit, Failure};

#[derive(Args)]
pub struct BagBenchArgs {
    /// The table: an .npy of fused rows (`--layout fbgemm8` or `fbgemm4`: FBGEMM's
    /// `embedding_bag_byte_prepack` / `embedding_bag_4bit_prepack`), kept as they are, or of
    /// floats (an FP32 table).
    table: PathBuf,
    /// The table file's layout: fbgemm8, fbgemm4 or dense (floats).
    #[arg(long, default_value = "dense", value_parser = ["dense", "fbgemm8", "fbgemm4"])]
    layout: String,
    /// Values per row of a `--layout fbgemm4` table (default: twice its code bytes).
    #[arg(long)]
    dim: Option<usize>,
    /// Row ids, an .npy of integers (int32, int64 or uint32).
    #[arg(long)]
    indices: PathBuf,
    /// Bag starts, an .npy of integers: one per bag and the end (PyTorch's
    /// `include_last_offset=True`).
    #[arg(long)]
    offsets: PathBuf,
    /// Per-sample weights, an .npy of float32, one per index (weighted sum).
    #[arg(long)]
    weights: Option<PathBuf>,
    /// sum or mean.
    #[arg(long, default_value = "sum", value_parser = ["sum", "mean"])]
    pooling: String,
    /// CPU threads (default: all).
    #[arg(long)]
    threads: Option<usize>,
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 10)]
    iters: usize,
    /// The output the bags should give (an .npy of float32, bags × dim): the largest
    /// difference from it is reported.
    #[arg(long)]
    expect: Option<PathBuf>,
}

fn read(path: &PathBuf) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| Failure::new(exit::NO_INPUT, format!("{}: {e}", path.display())))
}

/// An .npy of integers (`<u4`, `<i4`, `<i8`) as u32 values, each checked to fit: the reader of
/// `edo bench cache --trace`'s id files.
fn integers(path: &PathBuf) -> Result<Vec<u32>, Failure> {
    Ok(edo::cache::parse_trace(&read(path)?, None)?)
}

/// An .npy of float32 values.
fn floats(path: &PathBuf) -> Result<Vec<f32>, Failure> {
    let bytes = read(path)?;
    let a = npy::read(&bytes)?;
    if a.dtype != Dtype::F32 {
        return Err(Failure::new(exit::DATA, format!("{}: {:?} values, not float32", path.display(), a.dtype)));
    }
    Ok(a.data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
}

pub fn bag_bench(a: BagBenchArgs) -> Result<(), Failure> {
    let layout = match a.layout.as_str() {
        "fbgemm8" => FileLayout::Fbgemm8,
        "fbgemm4" => FileLayout::Fbgemm4 { dim: a.dim },
        _ => FileLayout::Dense,
    };
    let imported = import::npy(&read(&a.table)?, layout)?;
    // Fused rows are kept as they are (INT8, INT4); floats are an FP32 table.
    let table = &imported.to_format(imported.format())?;
    let (indices, offsets) = (integers(&a.indices)?, integers(&a.offsets)?);
    let weights = a.weights.as_ref().map(floats).transpose()?;
    let pooling = if a.pooling == "mean" { Pooling::Mean } else { Pooling::Sum };
    let bags = Bags { indices: &indices, offsets: &offsets, per_sample_weights: weights.as_deref(), include_last_offset: true };
    let n_bags = offsets.len().saturating_sub(1);
    let threads = a.threads.unwrap_or_else(edo::par::threads).max(1);
    let mut out = vec![0f32; n_bags * table.dim()];
    let mut run = || edo::cpu::embedding_bags_into(&[table], n_bags, &bags, pooling, Bounds::Error, Layout::Concat, &mut out);
    let (_, seconds) = edo::par::with_threads(threads, || edo_bench::measure::timed(a.iters, || run().map_err(edo::Error::from)))?;
    let max_diff = match &a.expect {
        Some(p) => {
            let want = floats(p)?;
            if want.len() != out.len() {
                return Err(Failure::new(exit::DATA, format!("{}: {} values, the bags give {}", p.display(), want.len(), out.len())));
            }
            Some(out.iter().zip(&want).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max))
        }
        None => None,
    };
    let report = serde_json::json!({
        "format": table.format().name(),
        "rows": table.rows(),
        "dim": table.dim(),
        "bags": n_bags,
        "ids": indices.len(),
        "pooling": a.pooling,
        "weighted": weights.is_some(),
        "threads": threads,
        "simd": edo::cpu::Simd::active().name(),
        "median_s": seconds,
        "ids_per_s": indices.len() as f64 / seconds,
        "max_abs_diff": max_diff,
    });
    println!("{report}");
    Ok(())
}
