//! The demo and the benchmark: every format on one synthetic table, GPU and CPU path, with
//! figures reported as ratios to what the same device does in the same run (its own copy,
//! a memcpy), because the machines these run on are shared and noisy.

use std::time::Instant;

use rayon::prelude::*;

use serde::Serialize;

use edo::format::{Format, PackedTable};
use edo::{synth, Bags, Bounds, Engine, Error, GpuLookup, GpuTable, LookupJob, Pooling};
use edo_bench::measure::{cpu_memcpy_gbps, gpu_copies, median, time_gpu, DeviceCopy};

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Rows of the synthetic table.
    pub rows: usize,
    /// Values per row.
    pub dim: usize,
    /// Ids per lookup (uniformly random).
    pub ids: usize,
    /// Timed repetitions (the median is reported).
    pub iters: usize,
    /// Seed of the table and the ids.
    pub seed: u64,
    /// Formats to run.
    pub formats: Vec<Format>,
    /// Measure quantisation error against the FP32 table (the demo does, the benchmark doesn't).
    pub accuracy: bool,
    /// Skip the GPU even if there is one.
    pub cpu_only: bool,
    /// Also time the GPU gather writing f16 rows (the benchmark does, the demo doesn't).
    pub f16_output: bool,
    /// Also time sum bags of this many of the same ids on the GPU (the benchmark's 16, FBGEMM's
    /// pooling factor; the demo doesn't).
    pub bag: Option<usize>,
    /// Largest table shard in bytes (`None`: the device's binding limit).
    pub max_binding_bytes: Option<u64>,
    /// Rows aligned to this many bytes on the GPU ([`PackedTable::with_row_alignment`]; `None`:
    /// packed).
    pub row_alignment: Option<usize>,
}

impl Default for Config {
    /// The built-in default: 1 000 000 × 128 f32 (512 MB, more than one storage binding on most
    /// devices), 65 536 uniformly random ids.
    fn default() -> Self {
        Config {
            rows: 1_000_000,
            dim: 128,
            ids: 65_536,
            iters: 10,
            seed: 0xED0,
            formats: Format::ALL.to_vec(),
            accuracy: true,
            cpu_only: false,
            f16_output: false,
            bag: None,
            row_alignment: None,
            max_binding_bytes: None,
        }
    }
}

/// Quantisation error of a format against the f32 source.
#[derive(Clone, Debug, Serialize)]
pub struct Accuracy {
    /// Largest absolute difference from the FP32 value.
    pub max_abs_error: f64,
    /// Mean absolute difference from the FP32 value.
    pub mean_abs_error: f64,
    /// Mean cosine similarity of a decoded row with its FP32 row.
    pub mean_cosine: f64,
}

/// One gather measured on one path.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    /// Seconds per gather (median of the iterations).
    pub seconds: f64,
    /// Output bytes (f32) written per second.
    pub output_gbps: f64,
    /// Bytes read and written per second (packed rows + ids read, f32 output written).
    pub moved_gbps: f64,
    /// `moved_gbps` over the reference bandwidth (the device's copy, or memcpy).
    pub ratio_to_copy: f64,
}

/// One format's line of the report.
#[derive(Clone, Debug, Serialize)]
pub struct FormatReport {
    /// The format's name.
    pub format: String,
    /// Bytes of the packed table.
    pub bytes: u64,
    /// `bytes` over the FP32 table's.
    pub ratio_to_fp32: f64,
    /// Storage buffers the table took on the GPU (`None` without one).
    pub shards: Option<usize>,
    /// Bytes of the table on the GPU: `bytes`, and the padding of aligned rows (`None` without
    /// one).
    pub gpu_bytes: Option<u64>,
    /// Error against FP32 (the demo measures it).
    pub accuracy: Option<Accuracy>,
    /// The gather on the GPU (`None` without one).
    pub gpu: Option<Timing>,
    /// The same gather writing f16 rows ([`edo::GpuLookup::gather_f16`]; `None` unless
    /// [`Config::f16_output`]): half the output bytes (`output_gbps` counts f16 bytes,
    /// `moved_gbps` packed rows + ids + f16 output).
    pub gpu_f16: Option<Timing>,
    /// Sum bags of [`Config::bag`] ids each over the same ids on the GPU (`None` unless asked):
    /// `output_gbps` counts the pooled rows, `moved_gbps` packed rows + ids + pooled rows.
    pub gpu_bag: Option<Timing>,
    /// The gather on the CPU path.
    pub cpu: Timing,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Rows of the table.
    pub rows: usize,
    /// Values per row.
    pub dim: usize,
    /// Ids per lookup.
    pub ids: usize,
    /// The adapter the GPU figures come from.
    pub adapter: Option<String>,
    /// Why there are no GPU figures, if there are none.
    pub no_gpu_reason: Option<String>,
    /// Threads of the CPU path.
    pub threads: usize,
    /// The device's copy of the output size, bytes read + written per second: the faster of
    /// `gpu_copies`' two.
    pub gpu_copy_gbps: Option<f64>,
    /// That copy by `copy_buffer_to_buffer` and by a copy kernel.
    pub gpu_copies: Option<DeviceCopy>,
    /// Ids per bag of the bag timings ([`Config::bag`]).
    pub bag: Option<usize>,
    /// Bytes GPU rows are aligned to (4: packed; [`Config::row_alignment`]).
    pub row_alignment: usize,
    /// memcpy of the output size on all CPU threads, bytes read + written per second.
    pub cpu_memcpy_gbps: f64,
    /// One report per format.
    pub formats: Vec<FormatReport>,
}

/// Runs the demo or the benchmark. `progress` receives a line per step.
pub fn run(config: &Config, mut progress: impl FnMut(&str)) -> Result<Report, Error> {
    let Config { rows, dim, ids: n_ids, iters, seed, .. } = *config;
    let iters = iters.max(1);
    progress(&format!("generating a {rows} × {dim} f32 table ({:.1} MiB)", (rows * dim * 4) as f64 / (1 << 20) as f64));
    let data = synth::embedding_table(rows, dim, seed);
    let ids = synth::uniform_ids(n_ids, rows, seed + 1);
    let other_ids = synth::uniform_ids(n_ids, rows, seed + 2);
    let out_bytes = (n_ids * dim * 4) as u64;

    let (engine, no_gpu_reason) = if config.cpu_only {
        (None, Some("--cpu given".to_string()))
    } else {
        let options = edo::EngineOptions { max_binding_bytes: config.max_binding_bytes, ..Default::default() };
        match Engine::new_blocking(options) {
            Ok(e) => (Some(e), None),
            Err(e) => (None, Some(e.to_string())),
        }
    };
    let gpu_copies = match &engine {
        Some(e) => {
            progress("measuring the device's copy bandwidth (copy_buffer_to_buffer and a copy kernel)");
            Some(gpu_copies(e, out_bytes, iters)?)
        }
        None => None,
    };
    let gpu_copy_gbps = gpu_copies.map(|c| c.best());
    let cpu_memcpy_gbps = cpu_memcpy_gbps(out_bytes as usize, iters);

    let mut formats = Vec::new();
    for &format in &config.formats {
        progress(&format!("{format}: quantising"));
        let table = PackedTable::quantize(format, &data, rows, dim)?;
        let table = table.with_row_alignment(config.row_alignment.unwrap_or(edo::format::NO_ROW_ALIGNMENT))?;
        let accuracy = config.accuracy.then(|| accuracy(&data, &table));
        let moved = (n_ids as u64) * (table.row_words() as u64 * 4 + dim as u64 * 4 + 4);

        progress(&format!("{format}: CPU gather"));
        let mut out = vec![0f32; n_ids * dim];
        edo::cpu::gather_into(&table, &ids, Bounds::Error, &mut out)?;
        let cpu_seconds = median(
            (0..iters)
                .map(|_| {
                    let t = Instant::now();
                    let r = edo::cpu::gather_into(&table, &ids, Bounds::Error, &mut out);
                    debug_assert!(r.is_ok());
                    t.elapsed().as_secs_f64()
                })
                .collect(),
        );
        let cpu_out = out;
        let cpu = Timing {
            seconds: cpu_seconds,
            output_gbps: out_bytes as f64 / cpu_seconds / 1e9,
            moved_gbps: moved as f64 / cpu_seconds / 1e9,
            // memcpy is judged on the output bytes it copies: the gather's output throughput
            // against memcpy's, as the target is stated.
            ratio_to_copy: (out_bytes as f64 / cpu_seconds / 1e9) / (cpu_memcpy_gbps / 2.0),
        };

        let (gpu, gpu_f16, gpu_bag, shards) = match &engine {
            Some(engine) => {
                progress(&format!("{format}: uploading and GPU gather"));
                let gpu_table = edo::block_on(GpuTable::upload(engine, &table))?;
                let job = edo::block_on(gpu_table.prepare_gather(&ids, Bounds::Error))?;
                job.submit()?;
                let got = job.output().read_blocking()?;
                if got != cpu_out {
                    return Err(Error::Gpu { what: "benchmark check", message: format!("{format}: GPU gather differs from the CPU path"), source: None });
                }
                // Repetitions take the two sets of ids in turn, so none finds the rows of the
                // one before it in the device's cache.
                let other = edo::block_on(gpu_table.prepare_gather(&other_ids, Bounds::Error))?;
                let seconds = time_in_turn(engine, iters, [&job, &other])?;
                drop(other);
                let timing = |seconds: f64, out_bytes: u64, moved: u64| Timing::new(seconds, out_bytes, moved, gpu_copy_gbps.unwrap_or(f64::NAN));
                let t = timing(seconds, out_bytes, moved);
                drop(job);
                let t16 = if config.f16_output {
                    let job = edo::block_on(gpu_table.prepare_gather_f16(&ids, Bounds::Error))?;
                    job.submit()?;
                    if job.output().read_f16_blocking()? != edo::cpu::to_f16(&cpu_out) {
                        return Err(Error::Gpu {
                            what: "benchmark check",
                            message: format!("{format}: GPU f16 gather differs from the CPU path"),
                            source: None,
                        });
                    }
                    let seconds = time_gpu(engine, iters, |enc| job.encode(enc))?;
                    let out_f16 = (n_ids * dim.div_ceil(2) * 4) as u64;
                    Some(timing(seconds, out_f16, moved - out_bytes + out_f16))
                } else {
                    None
                };
                let bag = match config.bag {
                    Some(per_bag) => Some(time_bags(engine, &gpu_table, &table, [&ids, &other_ids], per_bag, iters, gpu_copy_gbps.unwrap_or(f64::NAN))?),
                    None => None,
                };
                (Some(t), t16, bag, Some((gpu_table.shard_count(), gpu_table.bytes())))
            }
            None => (None, None, None, None),
        };
        formats.push(FormatReport {
            format: format.name().to_string(),
            bytes: table.bytes(),
            ratio_to_fp32: table.bytes() as f64 / table.f32_bytes() as f64,
            shards: shards.map(|s| s.0),
            gpu_bytes: shards.map(|s| s.1),
            accuracy,
            gpu,
            gpu_f16,
            gpu_bag,
            cpu,
        });
    }
    Ok(Report {
        rows,
        dim,
        ids: n_ids,
        adapter: engine.as_ref().map(|e| e.adapter().to_string()),
        no_gpu_reason,
        threads: edo_bench::measure::threads(),
        gpu_copy_gbps,
        gpu_copies,
        bag: config.bag,
        row_alignment: config.row_alignment.unwrap_or(edo::format::NO_ROW_ALIGNMENT),
        cpu_memcpy_gbps,
        formats,
    })
}

/// Max and mean absolute error and mean row cosine of a packed table against its source.
pub fn accuracy(data: &[f32], table: &PackedTable) -> Accuracy {
    let dim = table.dim();
    let rows = table.rows();
    // Per row: (max abs err, sum abs err, cosine), reduced after.
    let mut per_row = vec![[0f64; 3]; rows];
    per_row.par_chunks_mut(1024).enumerate().for_each(|(b, block)| {
        let first = b * 1024;
        let mut decoded = vec![0f32; dim];
        for (i, stats) in block.iter_mut().enumerate() {
            let r = first + i;
            let x = &data[r * dim..(r + 1) * dim];
            table.decode_row_into(r, &mut decoded);
            let (mut max, mut sum, mut dot, mut nx, mut ny) = (0f64, 0f64, 0f64, 0f64, 0f64);
            for (&a, &b) in x.iter().zip(&decoded) {
                let (a, b) = (a as f64, b as f64);
                let e = (a - b).abs();
                max = max.max(e);
                sum += e;
                dot += a * b;
                nx += a * a;
                ny += b * b;
            }
            let cos = if nx == 0.0 || ny == 0.0 { (nx == ny) as u8 as f64 } else { dot / (nx.sqrt() * ny.sqrt()) };
            *stats = [max, sum, cos];
        }
    });
    let max_abs_error = per_row.iter().map(|s| s[0]).fold(0.0, f64::max);
    let mean_abs_error = per_row.iter().map(|s| s[1]).sum::<f64>() / (rows * dim).max(1) as f64;
    let mean_cosine = per_row.iter().map(|s| s[2]).sum::<f64>() / rows.max(1) as f64;
    Accuracy { max_abs_error, mean_abs_error, mean_cosine }
}

impl Timing {
    fn new(seconds: f64, out_bytes: u64, moved: u64, copy_gbps: f64) -> Timing {
        let moved_gbps = moved as f64 / seconds / 1e9;
        Timing { seconds, output_gbps: out_bytes as f64 / seconds / 1e9, moved_gbps, ratio_to_copy: moved_gbps / copy_gbps }
    }
}

/// [`time_gpu`] of repetitions that record the two jobs in turn, so that none finds the rows of
/// the one before it in the device's cache.
fn time_in_turn(engine: &Engine, iters: usize, jobs: [&LookupJob; 2]) -> Result<f64, Error> {
    let turn = std::cell::Cell::new(0usize);
    time_gpu(engine, iters, |enc| {
        turn.set(turn.get() + 1);
        jobs[turn.get() % 2].encode(enc)
    })
}

/// Sum bags of `per_bag` consecutive ids, over the two id sets in turn (as the gather), checked
/// against the CPU path first. Bytes moved: packed rows and ids read, pooled f32 rows written.
fn time_bags(engine: &Engine, gpu: &GpuTable, table: &PackedTable, ids: [&[u32]; 2], per_bag: usize, iters: usize, copy_gbps: f64) -> Result<Timing, Error> {
    let n = ids[0].len();
    let offsets: Vec<u32> = (0..n).step_by(per_bag.max(1)).map(|i| i as u32).collect();
    let jobs = ids.map(|ids| edo::block_on(gpu.prepare_bag(&Bags::new(ids, &offsets), Pooling::Sum, Bounds::Error)));
    let [a, b] = jobs;
    let (a, b) = (a?, b?);
    a.submit()?;
    let got = a.output().read_blocking()?;
    let want = edo::cpu::embedding_bag(table, &Bags::new(ids[0], &offsets), Pooling::Sum, Bounds::Error)?;
    // Sums in another order differ in their last bits; a wrong row differs by far more.
    let scale = want.iter().fold(1f32, |m, x| m.max(x.abs()));
    if got.len() != want.len() || got.iter().zip(&want).any(|(g, w)| (g - w).abs() > 1e-4 * scale) {
        return Err(Error::Gpu { what: "benchmark check", message: format!("{}: GPU bags differ from the CPU path", table.format()), source: None });
    }
    let seconds = time_in_turn(engine, iters, [&a, &b])?;
    let out_bytes = (offsets.len() * table.dim() * 4) as u64;
    let moved = n as u64 * (table.row_words() as u64 * 4 + 4) + out_bytes;
    Ok(Timing::new(seconds, out_bytes, moved, copy_gbps))
}
