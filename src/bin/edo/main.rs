//! The `edo` command line.

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use edo::bench::{Config, Report};
use edo::Format;

#[derive(Parser)]
#[command(name = "edo", version, about = "Portable embedding engine: compressed tables, GPU lookups")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Quantise a built-in synthetic table to every format and compare memory, error and lookup
    /// speed on the GPU and the CPU path.
    Demo(Common),
    /// Time the gather of every format on the GPU and the CPU path, as ratios to the device's
    /// own buffer copy and to memcpy measured in the same run.
    Bench(Common),
}

#[derive(Args)]
struct Common {
    /// Rows of the synthetic table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: usize,
    /// Values per row.
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Ids per lookup (uniformly random).
    #[arg(long, default_value_t = 65_536)]
    ids: usize,
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 10)]
    iters: usize,
    /// Formats to run, comma separated (fp32, fp16, int8, int4, binary, binary+scale).
    #[arg(long, value_delimiter = ',', value_parser = parse_format)]
    formats: Option<Vec<Format>>,
    /// Largest table shard in MiB (default: the device's storage-binding limit).
    #[arg(long)]
    shard_mib: Option<u64>,
    /// Run the CPU path only, even when a GPU is present.
    #[arg(long)]
    cpu: bool,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

fn parse_format(s: &str) -> Result<Format, String> {
    Format::from_name(s).ok_or_else(|| format!("unknown format {s:?} (fp32, fp16, int8, int4, binary, binary+scale)"))
}

fn main() -> ExitCode {
    // Mesa's device-select Vulkan layer prints "XDG_RUNTIME_DIR is invalid" on headless machines
    // and chooses nothing edo needs (wgpu picks the adapter). Leave it on if the user steers it.
    if std::env::var_os("MESA_VK_DEVICE_SELECT").is_none() && std::env::var_os("NODEVICE_SELECT").is_none() {
        // Nothing else runs yet: no other thread can be reading the environment.
        std::env::set_var("NODEVICE_SELECT", "1");
    }
    let cli = Cli::parse();
    let (common, accuracy) = match cli.command {
        Command::Demo(c) => (c, true),
        Command::Bench(c) => (c, false),
    };
    let config = Config {
        rows: common.rows,
        dim: common.dim,
        ids: common.ids,
        iters: common.iters,
        formats: common.formats.unwrap_or_else(|| Format::ALL.to_vec()),
        accuracy,
        cpu_only: common.cpu,
        max_binding_bytes: common.shard_mib.map(|m| m << 20),
        ..Config::default()
    };
    if config.rows == 0 || config.dim == 0 {
        eprintln!("edo: --rows and --dim must be at least 1");
        return ExitCode::from(2);
    }
    let quiet = common.json;
    let report = match edo::bench::run(&config, |step| {
        if !quiet {
            eprintln!("  … {step}");
        }
    }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("edo: {e}");
            return ExitCode::FAILURE;
        }
    };
    if common.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("edo: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print_report(&report, accuracy);
    }
    ExitCode::SUCCESS
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

fn print_report(r: &Report, accuracy: bool) {
    println!();
    println!("edo {} — {} × {} f32 table ({}), {} random ids per lookup", if accuracy { "demo" } else { "bench" }, r.rows, r.dim, mib((r.rows * r.dim * 4) as u64), r.ids);
    match (&r.adapter, &r.no_gpu_reason) {
        (Some(a), _) => println!("GPU: {a}"),
        (None, Some(why)) => println!("GPU: none ({why}) — running the CPU path only"),
        (None, None) => println!("GPU: none"),
    }
    if let Some(copy) = r.gpu_copy_gbps {
        println!("GPU copy_buffer_to_buffer: {copy:.1} GB/s (read + write), measured now");
    }
    println!("CPU memcpy on {} threads: {:.1} GB/s (read + write), measured now", r.threads, r.cpu_memcpy_gbps);
    println!();
    if accuracy {
        println!("{:<13} {:>11} {:>7} {:>6} {:>11} {:>11} {:>9}", "format", "bytes", "vs fp32", "shards", "max |err|", "mean |err|", "mean cos");
        for f in &r.formats {
            let a = f.accuracy.as_ref();
            println!(
                "{:<13} {:>11} {:>7.3} {:>6} {:>11.3e} {:>11.3e} {:>9.5}",
                f.format,
                mib(f.bytes),
                f.ratio_to_fp32,
                f.shards.map_or("-".to_string(), |s| s.to_string()),
                a.map_or(f64::NAN, |a| a.max_abs_error),
                a.map_or(f64::NAN, |a| a.mean_abs_error),
                a.map_or(f64::NAN, |a| a.mean_cosine),
            );
        }
        println!();
    }
    println!(
        "{:<13} {:>10} {:>9} {:>9} {:>9}   {:>10} {:>9} {:>9}",
        "gather", "GPU ms", "GB/s", "% copy", "vs fp32", "CPU ms", "out GB/s", "% memcpy"
    );
    let fp32 = r.formats.iter().find(|f| f.format == "fp32");
    for f in &r.formats {
        let (gms, ggb, gpct, grat) = match &f.gpu {
            Some(g) => (
                format!("{:.3}", g.seconds * 1e3),
                format!("{:.2}", g.moved_gbps),
                format!("{:.1}", 100.0 * g.ratio_to_copy),
                fp32.and_then(|b| b.gpu.as_ref()).map_or("-".into(), |b| format!("{:.2}", g.seconds / b.seconds)),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        println!(
            "{:<13} {:>10} {:>9} {:>9} {:>9}   {:>10.3} {:>9.2} {:>9.1}",
            f.format,
            gms,
            ggb,
            gpct,
            grat,
            f.cpu.seconds * 1e3,
            f.cpu.output_gbps,
            100.0 * f.cpu.ratio_to_copy
        );
    }
    println!();
    println!("GB/s: packed rows + ids read and f32 rows written, per second. % copy: of the device's own");
    println!("buffer copy. vs fp32: time over the fp32 gather. % memcpy: CPU output bytes per second over a");
    println!("memcpy of the same bytes on the same threads. Timings are medians; only ratios compare across");
    println!("machines (software Vulkan such as lavapipe runs the GPU path on the CPU).");
}
