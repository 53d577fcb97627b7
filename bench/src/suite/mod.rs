//! The benchmark suite: one fixed, versioned matrix of operations × formats × sizes, run on
//! every backend present — each GPU adapter, the CPU path on one thread and on all — with every
//! figure also given as a ratio to what the same device does in the same run (its own copy, the
//! faster of `copy_buffer_to_buffer` and a copy kernel; a memcpy on the same threads). Absolute
//! times say how fast one machine was today; the ratios are what compare across devices.
//!
//! The same code runs natively (`edo bench suite`) and in a browser tab (the demo page's
//! Benchmark button). Both write [`Results`]: its JSON is documented in `docs/bench-schema.md`,
//! read back by [`Results::from_json`], compared by `edo bench compare` and drawn by [`report`].

mod cases;
/// Charts, reports and comparisons of results files.
pub mod report;
mod results;

use std::future::Future;

use serde::{Deserialize, Serialize};
use web_time::Instant;

use cases::*;
pub use results::*;

use edo::format::{Format, PackedTable};
use edo::hash::{HashSpec, HashedBags};
use edo::model::StaticModel;
use edo::{synth, Bags, Bounds, Error, Layout, Pooling};
#[cfg(feature = "gpu")]
use edo::{Engine, EngineOptions, GpuCache, GpuCodes, GpuHashedTables, GpuLookup, GpuStaticModel, GpuTable};

/// What a run takes its GPUs as: edo's [`Engine`]s, or — built without the GPU path (the `gpu`
/// feature off, as for WASI) — a type with no values, so such a run is on the CPU path only.
#[cfg(feature = "gpu")]
pub type Gpu = Engine;
/// What a run takes its GPUs as: built without the GPU path (the `gpu` feature off, as for
/// WASI), a type with no values, so a run is on the CPU path only.
#[cfg(not(feature = "gpu"))]
#[derive(Clone, Debug)]
pub enum Gpu {}

/// The `schema` field of every results file.
pub const SCHEMA: &str = "edo-bench";
/// The version of the results file's layout this edo writes and reads.
pub const SCHEMA_VERSION: u32 = 1;
/// The version of the matrix (operations, sizes, formats, ids): figures of different suite
/// versions measure different work and are not compared.
pub const SUITE_VERSION: u32 = 1;

/// How much of the matrix runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Small, medium and large tables, ten formats: minutes.
    Full,
    /// The full matrix with a million ids a call on the medium and large tables, the large one in
    /// the device's own shards: for big GPUs, on which the full matrix's 65 536 ids take tens of
    /// microseconds, so its ratios measure launches more than memory.
    Server,
    /// Small and medium tables, four formats: about a minute on a laptop.
    Quick,
    /// The quick matrix on toy tables, for tests: seconds.
    Tiny,
}

impl Scale {
    /// `full`, `server`, `quick` or `tiny`.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Full => "full",
            Scale::Server => "server",
            Scale::Quick => "quick",
            Scale::Tiny => "tiny",
        }
    }
}

/// An operation of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Dequantize-gather of `ids` rows.
    Gather,
    /// EmbeddingBag, sum of 16 rows per bag.
    BagSum,
    /// EmbeddingBag, mean of 16 rows per bag.
    BagMean,
    /// Hashed bags: 64-bit ids, two hashes summed per id, 16 ids per bag.
    HashedBag,
    /// Binary Hamming top-10 over the table's sign codes, ×4 candidates rescored in INT8.
    Search,
    /// The hot-row cache (1/8 of the rows, LFU) under a Zipf(1.05) id stream, one batch per call.
    Cache,
    /// A gather's round trip (ids up, rows back) against the number of ids.
    Latency,
    /// A static model's sentence vectors, against the number of texts.
    Embed,
}

impl Op {
    /// Every operation, in the order the suite runs them.
    pub const ALL: [Op; 8] = [Op::Gather, Op::BagSum, Op::BagMean, Op::HashedBag, Op::Search, Op::Cache, Op::Latency, Op::Embed];

    /// The name in results files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Op::Gather => "gather",
            Op::BagSum => "bag_sum",
            Op::BagMean => "bag_mean",
            Op::HashedBag => "hashed_bag",
            Op::Search => "search",
            Op::Cache => "cache",
            Op::Latency => "latency",
            Op::Embed => "embed",
        }
    }

    /// Parses [`Op::name`].
    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// One table size of the matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Size {
    /// `small`, `medium` or `large`.
    pub name: &'static str,
    /// Rows of the table.
    pub rows: usize,
    /// Values per row.
    pub dim: usize,
    /// Ids per call of gather, bags and the cache.
    pub ids: usize,
    /// Largest shard on a GPU (`None`: the device's own limit).
    pub shard_bytes: Option<u64>,
}

/// The sizes of a scale. Small fits any cache; medium is 128 MiB of f32; large is 1 GiB of f32,
/// in the full matrix held in shards of at most 128 MiB (WebGPU's default binding limit), so every
/// device runs it over several buffers. The server matrix looks up a million ids a call on both
/// (512 MiB of f32 out, past any GPU's L2) and leaves the large table's shards to the device.
pub fn sizes(scale: Scale) -> Vec<Size> {
    let s = |name, rows, dim, ids, shard_bytes| Size { name, rows, dim, ids, shard_bytes };
    match scale {
        Scale::Full => vec![s("small", 16_384, 64, 16_384, None), s("medium", 262_144, 128, 65_536, None), s("large", 2_097_152, 128, 65_536, Some(128 << 20))],
        Scale::Server => vec![s("small", 16_384, 64, 16_384, None), s("medium", 262_144, 128, 1_048_576, None), s("large", 2_097_152, 128, 1_048_576, None)],
        Scale::Quick => vec![s("small", 16_384, 64, 16_384, None), s("medium", 262_144, 128, 65_536, None)],
        Scale::Tiny => vec![s("small", 1_000, 24, 1_000, None), s("medium", 5_003, 40, 3_001, None), s("large", 20_011, 32, 4_099, Some(256 << 10))],
    }
}

/// The formats of a scale.
pub fn formats(scale: Scale) -> Vec<Format> {
    let names: &[&str] = match scale {
        Scale::Full | Scale::Server => &["fp32", "fp16", "fp8_e4m3", "int8", "int8_g32", "int4", "int4_g32", "q8_0", "q4_0", "binary+scale"],
        Scale::Quick | Scale::Tiny => &["fp32", "fp16", "int8", "int4"],
    };
    names.iter().filter_map(|n| Format::from_name(n)).collect()
}

/// What to run.
pub struct SuiteOptions {
    /// The matrix.
    pub scale: Scale,
    /// Formats instead of the scale's.
    pub formats: Option<Vec<Format>>,
    /// Operations to run (`None`: all).
    pub ops: Option<Vec<Op>>,
    /// Stop starting cases after this many seconds; the rest are listed as skipped.
    pub budget_seconds: Option<f64>,
    /// The CPU path's backends, by threads (`[]`: none).
    pub cpu_threads: Vec<usize>,
    /// Timed repetitions per case (after one untimed first call).
    pub reps: usize,
    /// A name for this run in comparisons and charts (default: the first backend's name).
    pub label: Option<String>,
    /// The browser's user agent, when run in one.
    pub user_agent: Option<String>,
    /// A static model for the `embed` cases (none: they are not run).
    pub model: Option<StaticModel>,
    /// The parts of the cold start the caller timed before the run (module, engines, model).
    pub cold_start: ColdStart,
    /// The runtime the suite runs in, where the caller knows it better than the build does (a
    /// JavaScript runtime's name and version).
    pub runtime: Option<String>,
    /// Files the run depends on, with their sizes (the binary, the `.wasm`, the model).
    pub artifacts: Vec<Artifact>,
}

impl SuiteOptions {
    /// The defaults of a scale: its formats, every operation, the CPU path on one thread and on
    /// all, 5 repetitions (10 for the full suite).
    pub fn new(scale: Scale) -> SuiteOptions {
        let all = edo::par::threads();
        let mut cpu_threads = vec![1, all];
        cpu_threads.dedup();
        SuiteOptions {
            scale,
            formats: None,
            ops: None,
            budget_seconds: None,
            cpu_threads,
            reps: if matches!(scale, Scale::Full | Scale::Server) { 10 } else { 5 },
            label: None,
            user_agent: None,
            model: None,
            cold_start: ColdStart::default(),
            runtime: None,
            artifacts: Vec::new(),
        }
    }
}

/// The machine this runs on, as the OS describes it (native; in a browser the page passes the
/// user agent).
pub fn machine(user_agent: Option<String>) -> Machine {
    #[cfg(native)]
    {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let cpu =
            read("/proc/cpuinfo").and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|v| v.trim().to_string()));
        let memory_bytes = read("/proc/meminfo")
            .and_then(|s| s.lines().find(|l| l.starts_with("MemTotal:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
            .map(|kib| kib * 1024);
        let distro = read("/etc/os-release").and_then(|s| s.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string())));
        let os = format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
        Machine {
            os: distro.map_or(os.clone(), |d| format!("{os} ({d})")),
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes,
            user_agent,
        }
    }
    #[cfg(web)]
    {
        Machine { os: "wasm32 in a browser".into(), cpu: None, cores: 1, memory_bytes: None, user_agent }
    }
    // WASI: the runtime keeps the host to itself; one thread.
    #[cfg(not(any(native, web)))]
    {
        Machine { os: "wasm32 under WASI".into(), cpu: None, cores: 1, memory_bytes: None, user_agent }
    }
}

/// Engines on every adapter wgpu finds natively (the browser has one: [`Engine::new`]), with
/// the names of all adapters found, usable or not. An adapter edo cannot use (limits below its
/// kernels') gets no engine.
#[cfg(all(native, feature = "gpu"))]
pub async fn engines() -> (Vec<Engine>, Vec<String>) {
    let options = EngineOptions::default();
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = options.backends;
    let instance = wgpu::Instance::new(desc);
    let adapters = instance.enumerate_adapters(options.backends).await;
    let names = adapters.iter().map(|a| format!("{} ({:?})", a.get_info().name, a.get_info().backend)).collect();
    let mut engines = Vec::new();
    for adapter in &adapters {
        if let Ok(e) = Engine::from_adapter(adapter, options.clone()).await {
            engines.push(e);
        }
    }
    (engines, names)
}

/// Why a suite run failed: nothing to run it on, or edo's error from a case.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SuiteError {
    /// No GPU was given and no CPU thread count was asked for.
    #[error("a benchmark run without any backend (no GPU and no CPU threads)")]
    NoBackend,
    /// A case failed.
    #[error(transparent)]
    Edo(#[from] Error),
}

/// Runs the suite on `gpus` and the CPU path, calling `progress` before each case and awaiting
/// what it returns (a browser page returns a timer's promise, so that it repaints between cases).
pub async fn run<F, Fut>(options: &SuiteOptions, gpus: &[Gpu], mut progress: F) -> Result<Results, SuiteError>
where
    F: FnMut(&Progress) -> Fut,
    Fut: Future<Output = ()>,
{
    let start = Instant::now();
    let created_unix = web_time::SystemTime::now().duration_since(web_time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let sizes = sizes(options.scale);
    let formats = options.formats.clone().unwrap_or_else(|| formats(options.scale));
    let wants = |op: Op| options.ops.as_ref().is_none_or(|ops| ops.contains(&op));
    let reps = options.reps.max(1);
    let tiny = options.scale == Scale::Tiny;

    // The backends and their reference copies: on a GPU, 1 GiB for the full matrix where the
    // device allows a buffer that large (a copy that fits a big GPU's L2 would flatter it).
    let copy_bytes: u64 = if tiny { 1 << 20 } else { 64 << 20 };
    let mut backends = Vec::new();
    let mut runners = Vec::new();
    #[cfg(not(feature = "gpu"))]
    let _ = gpus;
    #[cfg(feature = "gpu")]
    for (i, engine) in gpus.iter().enumerate() {
        progress(&Progress { done: 0, total: 0, label: format!("{}: measuring its copy", engine.adapter().name) }).await;
        let copy_bytes = match options.scale {
            Scale::Full | Scale::Server => (1u64 << 30).min(engine.limits().max_buffer_size).max(copy_bytes),
            _ => copy_bytes,
        };
        let copies = crate::measure::device_copies(engine, copy_bytes, reps).await?;
        let a = engine.adapter();
        let l = engine.limits();
        backends.push(BackendInfo {
            id: format!("gpu{i}"),
            kind: "gpu".into(),
            // Browsers may keep the adapter's name to themselves.
            name: if a.name.is_empty() { format!("{} adapter ({})", a.backend, a.device_type) } else { a.name.clone() },
            api: Some(a.backend.clone()),
            device_type: Some(a.device_type.clone()),
            driver: (!a.driver.is_empty()).then(|| a.driver.clone()),
            threads: None,
            limits: Some(Limits {
                max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
                max_buffer_size: l.max_buffer_size,
                max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
                max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
                max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
            }),
            copy_gbps: copies.best(),
            copy_bytes,
            buffer_copy_gbps: Some(copies.buffer),
            shader_copy_gbps: Some(copies.shader),
            clock: Some(crate::measure::device_clock(engine).into()),
        });
        runners.push(Runner::Gpu(engine.clone()));
    }
    for &threads in &options.cpu_threads {
        progress(&Progress { done: 0, total: 0, label: format!("CPU path on {threads} thread(s): measuring memcpy") }).await;
        let copy_gbps = edo::par::with_threads(threads, || crate::measure::cpu_memcpy_gbps(copy_bytes as usize, reps));
        backends.push(BackendInfo {
            id: format!("cpu{threads}"),
            kind: "cpu".into(),
            name: format!("CPU path, {threads} thread{}", if threads == 1 { "" } else { "s" }),
            api: None,
            device_type: None,
            driver: None,
            threads: Some(threads),
            limits: None,
            copy_gbps,
            copy_bytes,
            buffer_copy_gbps: None,
            shader_copy_gbps: None,
            clock: None,
        });
        runners.push(Runner::Cpu(threads));
    }
    if runners.is_empty() {
        return Err(SuiteError::NoBackend);
    }

    // The plan: (size index or None for the model, op, format) in run order, small sizes first
    // so that a budget keeps the cheap cases.
    let mut plan: Vec<(Option<usize>, Op, Option<Format>)> = Vec::new();
    for (si, size) in sizes.iter().enumerate() {
        for &format in &formats {
            for op in [Op::Gather, Op::BagSum, Op::BagMean, Op::HashedBag] {
                if wants(op) {
                    plan.push((Some(si), op, Some(format)));
                }
            }
        }
        if wants(Op::Search) {
            plan.push((Some(si), Op::Search, None));
        }
        if wants(Op::Cache) && size.name != "small" {
            plan.push((Some(si), Op::Cache, None));
        }
        if wants(Op::Latency) && size.name == "small" {
            plan.push((Some(si), Op::Latency, None));
        }
    }
    if wants(Op::Embed) && options.model.is_some() {
        plan.push((None, Op::Embed, None));
    }
    let total = plan.len() * runners.len();

    let mut st = State { cases: Vec::new(), skipped: Vec::new(), done: 0, total, reps, start, budget: options.budget_seconds };
    let mut current: Option<(usize, Vec<f32>)> = None;
    let mut first_table: Option<f64> = None;
    let mut packed: Vec<(Format, PackedTable)> = Vec::new();
    for (si, op, format) in plan {
        let Some(si) = si else {
            let model = options.model.as_ref().expect("planned with a model");
            for (runner, backend) in runners.iter().zip(&backends) {
                embed_cases(&mut st, &mut progress, runner, backend, model).await?;
            }
            continue;
        };
        let size = &sizes[si];
        let label = format!("{} {} {}", op.name(), format.map_or("", |f| f.name()), size.name);
        if st.out_of_budget() {
            for backend in &backends {
                st.skip(op, format.map_or(op_format(op), |f| f.name().to_string()), size.name, &backend.id, "budget");
                st.done += 1;
            }
            continue;
        }
        let table_started = Instant::now();
        if current.as_ref().is_none_or(|(i, _)| *i != si) {
            progress(&Progress { done: st.done, total, label: format!("generating the {} table ({} × {})", size.name, size.rows, size.dim) }).await;
            // The previous size's tables go before the next one's are made.
            drop(current.take());
            packed.clear();
            current = Some((si, synth::embedding_table(size.rows, size.dim, 0xED0 + si as u64)));
        }
        let data = &current.as_ref().expect("set above").1;
        let format = format.unwrap_or(match op {
            Op::Search | Op::Cache | Op::Latency => Format::Int8,
            _ => Format::F32,
        });
        if !packed.iter().any(|(f, _)| *f == format) {
            match PackedTable::quantize(format, data, size.rows, size.dim) {
                Ok(t) => {
                    packed.push((format, t));
                    first_table.get_or_insert(table_started.elapsed().as_secs_f64());
                }
                Err(e) => {
                    for backend in &backends {
                        st.skip(op, format.name().to_string(), size.name, &backend.id, &e.to_string());
                        st.done += 1;
                    }
                    continue;
                }
            }
        }
        let table = &packed.iter().find(|(f, _)| *f == format).expect("quantised above").1;
        for (runner, backend) in runners.iter().zip(&backends) {
            progress(&Progress { done: st.done, total, label: format!("{label} on {}", backend.name) }).await;
            if st.out_of_budget() {
                st.skip(op, case_format(op, table), size.name, &backend.id, "budget");
                st.done += 1;
                continue;
            }
            let before = st.cases.len();
            let r = match op {
                Op::Gather | Op::BagSum | Op::BagMean | Op::HashedBag => table_case(&mut st, runner, backend, size, op, table, data).await,
                Op::Search => search_case(&mut st, runner, backend, size, data, table).await,
                #[cfg(feature = "gpu")]
                Op::Cache => cache_case(&mut st, runner, backend, size, table).await,
                // The CPU path holds every row: there is nothing to cache.
                #[cfg(not(feature = "gpu"))]
                Op::Cache => Ok(()),
                Op::Latency => latency_cases(&mut st, runner, backend, size, table).await,
                Op::Embed => unreachable!("planned without a size"),
            };
            match r {
                Ok(()) => {}
                // A device limit or an unsupported shape skips the case; anything else (a wrong
                // result, a lost device) ends the run.
                Err(e @ (Error::LimitExceeded { .. } | Error::Unsupported(_) | Error::DeviceLimits { .. })) => {
                    st.cases.truncate(before);
                    st.skip(op, case_format(op, table), size.name, &backend.id, &e.to_string());
                }
                Err(e) => return Err(e.into()),
            }
            st.done += 1;
        }
    }
    let label = options.label.clone().unwrap_or_else(|| match (backends.iter().find(|b| b.kind == "gpu"), options.user_agent.is_some()) {
        (Some(g), true) => format!("browser: {}", g.name),
        (Some(g), false) => g.name.clone(),
        (None, true) => "browser: CPU path".into(),
        (None, false) => "CPU path".into(),
    });
    Ok(Results {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        suite_version: SUITE_VERSION,
        scale: options.scale,
        tool: format!("edo {}{}", env!("CARGO_PKG_VERSION"), if options.user_agent.is_some() { " (browser)" } else { "" }),
        label,
        created_unix,
        seconds: start.elapsed().as_secs_f64(),
        machine: machine(options.user_agent.clone()),
        backends,
        rules: Some(RunRules {
            warmup_calls: 1,
            reps,
            percentiles: "nearest rank over the timed calls (p50: the median); latency cases time single calls".into(),
            budget_seconds: options.budget_seconds,
        }),
        environment: Some(environment(options)),
        cold_start: Some(ColdStart { first_table_s: first_table, first_call_s: st.cases.first().map(|c| c.first_call_s), ..options.cold_start.clone() }),
        peak_memory_bytes: peak_memory().map(|(b, _)| b),
        peak_memory_kind: peak_memory().map(|(_, k)| k.to_string()),
        artifacts: options.artifacts.clone(),
        cases: st.cases,
        skipped: st.skipped,
    })
}

/// The environment a run happens in, as this build sees it.
fn environment(options: &SuiteOptions) -> Environment {
    let target = match std::env::consts::OS {
        "" | "unknown" => std::env::consts::ARCH.to_string(),
        os => format!("{}-{os}", std::env::consts::ARCH),
    };
    let runtime = options.runtime.clone().or_else(|| options.user_agent.as_ref().map(|ua| format!("browser: {ua}")));
    Environment {
        target,
        profile: if cfg!(debug_assertions) { "debug" } else { "release" }.into(),
        simd: edo::cpu::Simd::active().name().into(),
        runtime: runtime.unwrap_or_else(|| if cfg!(target_os = "wasi") { "WASI".into() } else { "native".into() }),
        // Set by the test runner under qemu (.cargo/config.toml), or by whoever runs it so.
        emulated: cfg!(native) && std::env::var_os("EDO_EMULATED").is_some(),
        edo: env!("CARGO_PKG_VERSION").into(),
    }
}

/// The most memory this process has held, and what was counted: the kernel's high-water mark of
/// resident memory (Linux), or the WebAssembly memory (which only grows).
fn peak_memory() -> Option<(u64, &'static str)> {
    #[cfg(target_arch = "wasm32")]
    {
        Some((core::arch::wasm32::memory_size(0) as u64 * 65536, "WASM memory"))
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let kib = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.split_whitespace().next()?.parse::<u64>().ok()?;
        Some((kib * 1024, "process RSS"))
    }
}

fn op_format(op: Op) -> String {
    match op {
        Op::Search => "binary+int8".into(),
        _ => "int8".into(),
    }
}

fn case_format(op: Op, table: &PackedTable) -> String {
    match op {
        Op::Search => "binary+int8".into(),
        _ => table.format().name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// scripts/peers/bench_peers.py runs the peers on the suite's shapes and texts, written out again
    /// in Python: they must not drift apart.
    #[test]
    fn the_peers_script_has_the_suites_sizes_and_texts() {
        let script = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/peers/bench_peers.py")).expect("the peers script");
        for scale in [Scale::Full, Scale::Server, Scale::Quick, Scale::Tiny] {
            let sizes: Vec<String> = sizes(scale).iter().map(|s| format!("(\"{}\", {}, {}, {})", s.name, s.rows, s.dim, s.ids)).collect();
            let line = format!("\"{}\": [{}]", scale.name(), sizes.join(", "));
            assert!(script.contains(&line), "bench_peers.py lacks {line}");
        }
        for text in TEXTS {
            assert!(script.contains(&format!("\"{text}\",")), "bench_peers.py lacks {text:?}");
        }
        assert!(script.contains(&format!("SCHEMA, SCHEMA_VERSION, SUITE_VERSION = \"{SCHEMA}\", {SCHEMA_VERSION}, {SUITE_VERSION}")));
    }

    /// No GPU and no CPU thread count: the suite's own error, before any measurement.
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn a_run_without_backends_is_refused() {
        let mut options = SuiteOptions::new(Scale::Tiny);
        options.cpu_threads.clear();
        let got = edo::block_on(run(&options, &[], |_| std::future::ready(())));
        assert!(matches!(got, Err(SuiteError::NoBackend)), "{:?}", got.map(|r| r.cases.len()));
    }
}
