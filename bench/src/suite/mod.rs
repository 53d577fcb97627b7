//! The benchmark suite: one fixed, versioned matrix of operations × formats × sizes, run on
//! every backend present — each GPU adapter, the CPU path on one thread and on all — with every
//! figure also given as a ratio to what the same device does in the same run (its own copy, the
//! faster of `copy_buffer_to_buffer` and a copy kernel; a memcpy on the same threads). Absolute
//! times say how fast one machine was today; the ratios are what compare across devices.
//!
//! The same code runs natively (`edo bench suite`) and in a browser tab (the demo page's
//! Benchmark button). Both write [`Results`]: its JSON is documented in `docs/bench-schema.md`,
//! read back by [`Results::from_json`], compared by `edo bench compare` and drawn by [`report`].

/// Charts, reports and comparisons of results files.
pub mod report;

use std::future::Future;

use serde::{Deserialize, Serialize};
use web_time::Instant;

use edo::format::{Format, PackedTable};
use edo::hash::{HashSpec, HashedBags};
use edo::model::StaticModel;
use edo::{synth, Bags, Bounds, Engine, EngineOptions, Error, GpuCache, GpuCodes, GpuHashedTables, GpuLookup, GpuStaticModel, GpuTable, Layout, Pooling};

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

/// A results file: one run of the suite (or of the peers' script) on one machine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Results {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// [`SUITE_VERSION`] of the matrix that ran.
    pub suite_version: u32,
    /// `full`, `quick` or `tiny`.
    pub scale: Scale,
    /// What wrote it: `edo 0.1.0`, `edo 0.1.0 (browser)`, `peers (numpy 2.1.3, …)`.
    pub tool: String,
    /// The run's name in comparisons.
    pub label: String,
    /// When the run started, seconds since 1970 (UTC).
    pub created_unix: u64,
    /// Seconds the run took.
    pub seconds: f64,
    /// The machine.
    pub machine: Machine,
    /// What ran the cases.
    pub backends: Vec<BackendInfo>,
    /// The measured cases.
    pub cases: Vec<Case>,
    /// Cases not run, with why.
    #[serde(default)]
    pub skipped: Vec<Skipped>,
    /// How the cases were timed. Absent from older files.
    #[serde(default)]
    pub rules: Option<RunRules>,
    /// What ran the suite, beyond the machine: build, SIMD level, runtime. Absent from older files.
    #[serde(default)]
    pub environment: Option<Environment>,
    /// The parts of the cold start. Absent from older files.
    #[serde(default)]
    pub cold_start: Option<ColdStart>,
    /// The most memory the run held: `peak_memory_kind` says what was counted. Absent from older
    /// files and where it cannot be read.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
    /// `process RSS` (natively: the kernel's high-water mark) or `WASM memory` (a WebAssembly
    /// module's, which only grows).
    #[serde(default)]
    pub peak_memory_kind: Option<String>,
    /// Files the run depends on, with their sizes.
    #[serde(default)]
    pub artifacts: Vec<Artifact>,
}

/// How a run times its cases, recorded beside them (edge benchmarks state their run rules).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRules {
    /// Untimed calls before the timed ones (the first call, which compiles a GPU kernel).
    pub warmup_calls: usize,
    /// Timed calls per case.
    pub reps: usize,
    /// How percentiles are taken from the timed calls.
    pub percentiles: String,
    /// Seconds after which no case was started, if a budget was set.
    pub budget_seconds: Option<f64>,
}

/// The environment that ran a suite: what a report needs to tell runs apart beyond the machine.
/// (Fields a writer left out read as empty.)
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Environment {
    /// The target edo was built for (`x86_64-linux`, `aarch64-linux`, `wasm32`).
    pub target: String,
    /// `release` or `debug` (a debug build's timings mean little).
    pub profile: String,
    /// The SIMD level the CPU path ran at (`avx2`, `neon`, `simd128`, `scalar`).
    pub simd: String,
    /// The runtime: `native`, a browser, or a JavaScript runtime and its version.
    pub runtime: String,
    /// Run under emulation (qemu-user): its timings are correctness only.
    pub emulated: bool,
    /// edo's version.
    pub edo: String,
}

/// The parts of a cold start, in seconds; those not measured are absent.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ColdStart {
    /// Compiling and instantiating the WebAssembly module (JavaScript runtimes).
    #[serde(default)]
    pub module_s: Option<f64>,
    /// Finding the adapters and creating the devices (GPU engines).
    #[serde(default)]
    pub engines_s: Option<f64>,
    /// Loading the model (file read or mapped, tokenizer parsed).
    #[serde(default)]
    pub model_s: Option<f64>,
    /// Making the first table: generating the small size's values and packing them.
    #[serde(default)]
    pub first_table_s: Option<f64>,
    /// The first case's first call, kernels compiled included.
    #[serde(default)]
    pub first_call_s: Option<f64>,
}

/// A file a run depends on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Artifact {
    /// What it is: `binary`, `wasm`, `model`.
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its size gzipped (level 9), where the writer measured it.
    #[serde(default)]
    pub gzip_bytes: Option<u64>,
}

/// The machine a run measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    /// Operating system and architecture (`linux x86_64`, `wasm32 in a browser`), with the
    /// distribution's name where known.
    pub os: String,
    /// The CPU's model name, where the OS says.
    pub cpu: Option<String>,
    /// Logical cores the CPU path may use.
    pub cores: usize,
    /// Installed memory in bytes, where the OS says.
    pub memory_bytes: Option<u64>,
    /// The browser's user agent (browser runs only).
    pub user_agent: Option<String>,
}

/// A GPU adapter, the CPU path on some threads, or a peer library.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BackendInfo {
    /// Short id the cases refer to: `gpu0`, `cpu1`, `cpu16`, `numpy`.
    pub id: String,
    /// `gpu`, `cpu` or `peer`.
    pub kind: String,
    /// Adapter name, `CPU path, 1 thread`, `numpy 2.1.3`.
    pub name: String,
    /// The GPU API (Vulkan, Metal, Dx12, BrowserWebGpu).
    pub api: Option<String>,
    /// Discrete, integrated, virtual or CPU.
    pub device_type: Option<String>,
    /// Driver and version, where the backend says.
    pub driver: Option<String>,
    /// CPU threads (CPU backends).
    pub threads: Option<usize>,
    /// The device limits that decide table shapes and shards (GPU backends).
    pub limits: Option<Limits>,
    /// The reference bandwidth: the device's copy (the faster of its `copy_buffer_to_buffer`
    /// and a copy kernel's), or a memcpy on the backend's threads — bytes read plus written per
    /// second, in GB/s.
    pub copy_gbps: f64,
    /// Bytes copied to measure it.
    pub copy_bytes: u64,
    /// A GPU's `copy_buffer_to_buffer` alone (GB/s). Absent for the CPU path and in older
    /// files, whose `copy_gbps` is this.
    #[serde(default)]
    pub buffer_copy_gbps: Option<f64>,
    /// A GPU's copy kernel alone (GB/s; [`crate::measure::COPY_WGSL`]). Absent for the CPU path
    /// and in older files.
    #[serde(default)]
    pub shader_copy_gbps: Option<f64>,
    /// How a GPU's device cases (and its copy) are timed: `timestamps` (the device's own,
    /// around the work, natively or in a browser that grants `timestamp-query`) or `wall clock`
    /// (around submit and wait). Absent for the CPU path and in
    /// older files.
    #[serde(default)]
    pub clock: Option<String>,
}

/// The device limits the suite reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Limits {
    /// Largest storage buffer binding.
    pub max_storage_buffer_binding_size: u64,
    /// Largest buffer.
    pub max_buffer_size: u64,
    /// Storage buffers per shader stage.
    pub max_storage_buffers_per_shader_stage: u32,
    /// Workgroups per dispatch dimension.
    pub max_compute_workgroups_per_dimension: u32,
    /// Invocations per workgroup.
    pub max_compute_invocations_per_workgroup: u32,
}

/// One measured case.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Case {
    /// [`Op::name`].
    pub op: String,
    /// The table's format (`binary+int8` for search: binary codes, INT8 rescoring rows).
    pub format: String,
    /// `small`, `medium`, `large` or `model`.
    pub size: String,
    /// Rows of the table.
    pub rows: usize,
    /// Values per row.
    pub dim: usize,
    /// Items per call: ids (gather, bags, cache, latency), queries (search) or texts (embed).
    pub items: usize,
    /// What `items` counts: `ids`, `queries` or `texts`.
    pub unit: String,
    /// Bags per call (bags), `items` otherwise.
    pub batch: usize,
    /// [`BackendInfo::id`].
    pub backend: String,
    /// `device`: submitted and waited for, inputs and outputs staying on the device;
    /// `round trip`: inputs up, results back to the host, as a caller sees it.
    pub timing: String,
    /// Timed repetitions.
    pub reps: usize,
    /// Median seconds per call.
    pub median_s: f64,
    /// Fastest repetition.
    pub min_s: f64,
    /// Slowest repetition.
    pub max_s: f64,
    /// The 99th percentile of the repetitions (seconds per call; of single calls for the
    /// latency cases, which time each call). Absent from files older than it.
    #[serde(default)]
    pub p99_s: Option<f64>,
    /// The 90th percentile of the repetitions, as `p99_s`. Absent from files older than it.
    #[serde(default)]
    pub p90_s: Option<f64>,
    /// The quality kept beside the speed: the mean cosine of the format's rows to the FP32 rows
    /// (lookups), recall@k of the exact neighbours (search). Absent where not measured.
    #[serde(default)]
    pub quality: Option<Quality>,
    /// The first call, untimed in the median: on a GPU it includes compiling the kernel.
    pub first_call_s: f64,
    /// `items` per second at the median.
    pub items_per_s: f64,
    /// Bytes read and written per call (packed rows, ids, output). Search: the code bytes scanned,
    /// on a GPU as many reads of the corpus as its kernels make (one per tile of queries), on the
    /// CPU path one per query.
    pub moved_bytes: u64,
    /// `moved_bytes` per second at the median, in GB/s.
    pub gbps: f64,
    /// `gbps` over the backend's `copy_gbps`.
    pub ratio_to_copy: f64,
    /// Bytes of the table as the backend holds it.
    pub table_bytes: u64,
    /// GPU buffers the table took.
    pub shards: Option<usize>,
    /// What else the case measured (the cache's hit rate).
    pub note: Option<String>,
}

/// What a case's results keep of the exact answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Quality {
    /// `cosine to fp32` or `recall@10`.
    pub metric: String,
    /// Its value: 1 is exact.
    pub value: f64,
}

/// A case that did not run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Skipped {
    /// [`Op::name`].
    pub op: String,
    /// The format.
    pub format: String,
    /// The size.
    pub size: String,
    /// [`BackendInfo::id`].
    pub backend: String,
    /// Why: `budget`, or what refused it.
    pub reason: String,
}

impl Results {
    /// Reads a results file, refusing JSON that is not one (naming what it is missing) and
    /// schema versions this edo does not know.
    pub fn from_json(text: &str) -> Result<Results, Error> {
        let bad = |reason: String| Error::BadFile { what: "benchmark results", reason };
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let Some(obj) = value.as_object() else { return Err(bad("not a JSON object".into())) };
        match obj.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            Some(other) => return Err(bad(format!("schema is {other:?}, not {SCHEMA:?}: not an edo benchmark file"))),
            None => return Err(bad(format!("no \"schema\": {SCHEMA:?} field: not an edo benchmark file"))),
        }
        match obj.get("schema_version").and_then(|v| v.as_u64()) {
            Some(v) if v == SCHEMA_VERSION as u64 => {}
            Some(v) => return Err(Error::UnsupportedVersion { found: v.to_string(), supported: SCHEMA_VERSION }),
            None => return Err(bad("no \"schema_version\" number".into())),
        }
        let results: Results = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        for c in &results.cases {
            if !results.backends.iter().any(|b| b.id == c.backend) {
                return Err(bad(format!("case {} {} {} names backend {:?}, which the file does not list", c.op, c.format, c.size, c.backend)));
            }
        }
        Ok(results)
    }

    /// The results as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The backend a case ran on.
    pub fn backend(&self, id: &str) -> Option<&BackendInfo> {
        self.backends.iter().find(|b| b.id == id)
    }
}

/// Progress of a run, for a progress bar.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Cases finished (run or skipped).
    pub done: usize,
    /// Cases in the run.
    pub total: usize,
    /// What runs now.
    pub label: String,
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
}

/// Engines on every adapter wgpu finds natively (the browser has one: [`Engine::new`]), with
/// the names of all adapters found, usable or not. An adapter edo cannot use (limits below its
/// kernels') gets no engine.
#[cfg(native)]
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
pub async fn run<F, Fut>(options: &SuiteOptions, gpus: &[Engine], mut progress: F) -> Result<Results, SuiteError>
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
                Op::Cache => cache_case(&mut st, runner, backend, size, table).await,
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

enum Runner {
    Gpu(Engine),
    Cpu(usize),
}

struct State {
    cases: Vec<Case>,
    skipped: Vec<Skipped>,
    done: usize,
    total: usize,
    reps: usize,
    start: Instant,
    budget: Option<f64>,
}

impl State {
    fn out_of_budget(&self) -> bool {
        self.budget.is_some_and(|b| self.start.elapsed().as_secs_f64() > b)
    }

    fn skip(&mut self, op: Op, format: String, size: &str, backend: &str, reason: &str) {
        self.skipped.push(Skipped { op: op.name().into(), format, size: size.into(), backend: backend.into(), reason: reason.into() });
    }
}

/// Times of one case: the first call and the timed repetitions.
struct Timing {
    first: f64,
    times: Vec<f64>,
}

/// What a case did, for its figures.
struct Work<'a> {
    op: Op,
    format: String,
    size: &'a str,
    rows: usize,
    dim: usize,
    items: usize,
    unit: &'static str,
    batch: usize,
    timing: &'static str,
    moved_bytes: u64,
    table_bytes: u64,
    shards: Option<usize>,
    note: Option<String>,
    quality: Option<Quality>,
}

/// The mean cosine of up to 1 024 rows of `table` (spread over it) to the same rows of the FP32
/// values it was packed from: what the format keeps.
fn cosine_to_fp32(table: &PackedTable, data: &[f32]) -> Result<f64, Error> {
    let (rows, dim) = (table.rows(), table.dim());
    let n = rows.min(1024);
    let ids: Vec<u32> = (0..n).map(|i| (i * rows / n) as u32).collect();
    let got = edo::cpu::gather(table, &ids, Bounds::Error)?;
    let mut sum = 0.0;
    for (k, &id) in ids.iter().enumerate() {
        let (a, b) = (&got[k * dim..][..dim], &data[id as usize * dim..][..dim]);
        let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
        let norms = a.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt() * b.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
        // Two zero rows are the same row.
        sum += if norms > 0.0 {
            dot / norms
        } else if a == b {
            1.0
        } else {
            0.0
        };
    }
    Ok(sum / n as f64)
}

/// recall@k of a search's results against the exact dot-product neighbours among the FP32
/// values, over the first 8 queries. A plain loop, not `edo::search::dot_topk`, whose kernels
/// for every format would add ~50 KB to the browser's `.wasm`.
fn search_recall(data: &[f32], dim: usize, queries: &[f32], found: &edo::search::Scored, k: usize) -> Quality {
    let nq = (queries.len() / dim).min(8).min(found.queries());
    let k = k.min(data.len() / dim).min(found.k);
    let mut truth = Vec::with_capacity(nq * k);
    for query in queries.chunks_exact(dim).take(nq) {
        let mut scored: Vec<(f32, u32)> = data.chunks_exact(dim).zip(0u32..).map(|(row, id)| (row.iter().zip(query).map(|(a, b)| a * b).sum(), id)).collect();
        // Best first, ties by the lower row (as edo's searches order them).
        let order = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if k < scored.len() {
            scored.select_nth_unstable_by(k, order);
        }
        truth.extend(scored[..k].iter().map(|&(_, id)| id));
    }
    let value = edo::search::recall(&found.ids[..nq * found.k], found.k, &truth, k, k);
    Quality { metric: format!("recall@{k} of exact fp32"), value }
}

/// The `p`-th percentile of sorted times, by nearest rank.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn push_case(st: &mut State, backend: &BackendInfo, w: Work, t: Timing) {
    let mut times = t.times;
    times.sort_by(|a, b| a.total_cmp(b));
    let median = times[times.len() / 2].max(1e-9);
    let gbps = w.moved_bytes as f64 / median / 1e9;
    st.cases.push(Case {
        op: w.op.name().into(),
        format: w.format,
        size: w.size.into(),
        rows: w.rows,
        dim: w.dim,
        items: w.items,
        unit: w.unit.into(),
        batch: w.batch,
        backend: backend.id.clone(),
        timing: w.timing.into(),
        reps: times.len(),
        median_s: median,
        min_s: times[0],
        max_s: times[times.len() - 1],
        p99_s: Some(percentile(&times, 0.99)),
        p90_s: Some(percentile(&times, 0.90)),
        quality: w.quality,
        first_call_s: t.first,
        items_per_s: w.items as f64 / median,
        moved_bytes: w.moved_bytes,
        gbps,
        ratio_to_copy: gbps / backend.copy_gbps,
        table_bytes: w.table_bytes,
        shards: w.shards,
        note: w.note,
    });
}

/// Times `f` on `threads` threads of the CPU path (edo-core's calls return its own error, the
/// others edo's).
fn time_cpu<E: Into<Error>>(reps: usize, threads: usize, mut f: impl FnMut() -> Result<(), E>) -> Result<Timing, Error> {
    let (first, times) = edo::par::with_threads(threads, || crate::measure::sample_calls(reps, || f().map_err(Into::into)))?;
    Ok(Timing { first, times })
}

async fn time_round_trip<F, Fut>(reps: usize, mut f: F) -> Result<Timing, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    let t = Instant::now();
    f().await?;
    let first = t.elapsed().as_secs_f64();
    let mut n = 1;
    let mut times = Vec::with_capacity(reps);
    // Samples grow until one lasts MIN_SAMPLE_S; then `reps` of that many calls are timed.
    while times.len() < reps {
        let t = Instant::now();
        for _ in 0..n {
            f().await?;
        }
        let seconds = t.elapsed().as_secs_f64();
        match crate::measure::more_calls(n, seconds) {
            Some(more) if times.is_empty() => n = more,
            _ => times.push(seconds / n as f64),
        }
    }
    Ok(Timing { first, times })
}

/// The first call of `f`, then `calls` more, each timed on its own (calls long enough for the
/// clock to resolve: round trips, not gathers on the device).
async fn time_each_call<F, Fut, T>(calls: usize, mut f: F) -> Result<Timing, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let t = Instant::now();
    f().await?;
    let first = t.elapsed().as_secs_f64();
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        std::hint::black_box(f().await?);
        times.push(t.elapsed().as_secs_f64());
    }
    Ok(Timing { first, times })
}

/// The engine a size's tables live on: the backend's own, or one with the size's shard limit.
fn engine_for(engine: &Engine, size: &Size) -> Engine {
    match size.shard_bytes {
        Some(b) => engine.sibling(EngineOptions { max_binding_bytes: Some(b), ..Default::default() }),
        None => engine.clone(),
    }
}

/// Pooling factor of the bag cases.
const BAG: usize = 16;

async fn table_case(st: &mut State, runner: &Runner, backend: &BackendInfo, size: &Size, op: Op, table: &PackedTable, data: &[f32]) -> Result<(), Error> {
    let (rows, dim) = (size.rows, size.dim);
    let n = size.ids;
    let row_bytes = table.row_words() as u64 * 4;
    let out_f32 = |values: usize| values as u64 * 4;
    let ids = synth::uniform_ids(n, rows, 7);
    let offsets: Vec<u32> = (0..n / BAG).map(|b| (b * BAG) as u32).collect();
    let n_bags = offsets.len();
    let bag_ids = &ids[..n_bags * BAG];
    let hashed_ids: Vec<u64> = {
        let mut rng = synth::Rng::new(11);
        (0..n_bags * BAG).map(|_| rng.next_u64()).collect()
    };
    let spec = HashSpec::new(rows as u32, 2);
    let (moved, batch) = match op {
        Op::Gather => (n as u64 * (row_bytes + 4) + out_f32(n * dim), n),
        Op::BagSum | Op::BagMean => ((n_bags * BAG) as u64 * (row_bytes + 4) + out_f32(n_bags * dim), n_bags),
        _ => ((n_bags * BAG) as u64 * (2 * row_bytes + 8) + out_f32(n_bags * dim), n_bags),
    };
    let pooling = if op == Op::BagMean { Pooling::Mean } else { Pooling::Sum };
    let mut work = Work {
        op,
        format: table.format().name().into(),
        size: size.name,
        rows,
        dim,
        items: if op == Op::Gather { n } else { n_bags * BAG },
        unit: "ids",
        batch,
        timing: "device",
        moved_bytes: moved,
        table_bytes: table.bytes(),
        shards: None,
        note: None,
        quality: Some(Quality { metric: "cosine to fp32".into(), value: cosine_to_fp32(table, data)? }),
    };
    let reps = st.reps;
    let timing = match runner {
        Runner::Cpu(threads) => {
            work.timing = "host";
            match op {
                Op::Gather => {
                    let mut out = vec![0f32; n * dim];
                    time_cpu(reps, *threads, || edo::cpu::gather_into(table, &ids, Bounds::Error, &mut out))?
                }
                Op::BagSum | Op::BagMean => {
                    let mut out = vec![0f32; n_bags * dim];
                    let bags = Bags::new(bag_ids, &offsets);
                    time_cpu(reps, *threads, || edo::cpu::embedding_bags_into(&[table], n_bags, &bags, pooling, Bounds::Error, Layout::Concat, &mut out))?
                }
                // The browser build's API has no hashed bags on the CPU path, and their pooling
                // kernels (for 64-bit ids) would add ~0.5 MB to every page's .wasm for this case.
                #[cfg(web)]
                _ => return Err(Error::Unsupported(edo::Unsupported::HashedBagsInBrowserCpuPath)),
                #[cfg(not(web))]
                _ => {
                    let mut out = vec![0f32; n_bags * dim];
                    let bags = HashedBags::new(&hashed_ids, &offsets);
                    let specs = [spec.clone()];
                    time_cpu(reps, *threads, || edo::hash::hashed_bags_into(&[table], &specs, n_bags, &bags, Pooling::Sum, Layout::Concat, &mut out))?
                }
            }
        }
        Runner::Gpu(engine) => {
            let engine = engine_for(engine, size);
            // Uploads are not the call's work: the first call starts at preparing the job
            // (which compiles the kernel the first time a shape is seen).
            let (job, shards, bytes) = if op == Op::HashedBag {
                let g = GpuHashedTables::upload(&engine, &[(table, spec.clone())]).await?;
                let t = Instant::now();
                let bags = HashedBags::new(&hashed_ids, &offsets);
                let job = g.prepare_bags(n_bags, &bags, Pooling::Sum, Layout::Concat).await?;
                ((job, t), None, g.bytes())
            } else {
                let g = GpuTable::upload(&engine, table).await?;
                let t = Instant::now();
                let job = if op == Op::Gather {
                    g.prepare_gather(&ids, Bounds::Error).await?
                } else {
                    g.prepare_bag(&Bags::new(bag_ids, &offsets), pooling, Bounds::Error).await?
                };
                ((job, t), Some(g.shard_count()), g.bytes())
            };
            let (job, t) = job;
            job.submit()?;
            engine.work_done().await?;
            let first = t.elapsed().as_secs_f64();
            if op == Op::Gather && job.output().read().await? != edo::cpu::gather(table, &ids, Bounds::Error)? {
                return Err(Error::gpu("benchmark check", format!("{}: the GPU gather differs from the CPU path", table.format())));
            }
            let times = crate::measure::time_device(&engine, reps, |enc| job.encode(enc)).await?;
            // (Hashed tables do not say how many buffers they took.)
            work.shards = shards;
            work.table_bytes = bytes;
            Timing { first, times }
        }
    };
    push_case(st, backend, work, timing);
    Ok(())
}

async fn search_case(st: &mut State, runner: &Runner, backend: &BackendInfo, size: &Size, data: &[f32], int8: &PackedTable) -> Result<(), Error> {
    let (rows, dim) = (size.rows, size.dim);
    let (k, multiplier) = (10, 4);
    let queries_n = if size.rows < 10_000 { 8 } else { 32 };
    // Queries near table rows: a row plus noise, so the true neighbours are meaningful.
    let mut rng = synth::Rng::new(5);
    let queries: Vec<f32> = (0..queries_n).flat_map(|q| data[(q * 997 % rows) * dim..][..dim].to_vec()).map(|x| x + 0.3 * rng.normal()).collect();
    let corpus = edo::search::binarize(data, dim)?;
    let code_bytes = (corpus.format().code_bytes(dim) * rows) as u64;
    let mut work = Work {
        op: Op::Search,
        format: "binary+int8".into(),
        size: size.name,
        rows,
        dim,
        items: queries_n,
        unit: "queries",
        batch: queries_n,
        timing: "round trip",
        moved_bytes: code_bytes * queries_n as u64,
        table_bytes: corpus.bytes() + int8.bytes(),
        shards: None,
        note: Some(format!("top-{k}, {multiplier}× candidates rescored")),
        quality: None,
    };
    let want = edo::search::search_rescored(&corpus, &queries, int8, k, multiplier)?;
    work.quality = Some(search_recall(data, dim, &queries, &want, k));
    let timing = match runner {
        Runner::Cpu(threads) => {
            work.timing = "host";
            time_cpu(st.reps, *threads, || edo::search::search_rescored(&corpus, &queries, int8, k, multiplier).map(|_| ()))?
        }
        Runner::Gpu(engine) => {
            let engine = engine_for(engine, size);
            let codes = GpuCodes::upload(&engine, &corpus).await?;
            let table = GpuTable::upload(&engine, int8).await?;
            let got = codes.search_rescored(&queries, &table, k, multiplier).await?;
            if (0..queries_n).any(|q| got.ids_of(q) != want.ids_of(q)) {
                return Err(Error::gpu("benchmark check", "the GPU's search results differ from the CPU path's"));
            }
            work.shards = Some(codes.shard_count() + table.shard_count());
            // What the kernels read: the corpus once per tile of queries (or three times a query
            // past the one-pass kernels' k), so the ratio to the copy is of bytes really read.
            let reads = codes.corpus_reads(queries_n, k * multiplier)?;
            work.moved_bytes = code_bytes * reads;
            work.note = Some(format!(
                "top-{k}, {multiplier}× candidates rescored; corpus read {reads}× per call ({:.1} queries a read)",
                queries_n as f64 / reads as f64
            ));
            let (c, t, q) = (&codes, &table, &queries);
            time_round_trip(st.reps, || async move { c.search_rescored(q, t, k, multiplier).await.map(|_| ()) }).await?
        }
    };
    push_case(st, backend, work, timing);
    Ok(())
}

async fn cache_case(st: &mut State, runner: &Runner, backend: &BackendInfo, size: &Size, int8: &PackedTable) -> Result<(), Error> {
    let Runner::Gpu(engine) = runner else {
        // The CPU path holds every row: there is nothing to cache.
        return Ok(());
    };
    let engine = engine_for(engine, size);
    let (rows, dim) = (size.rows, size.dim);
    let batch = (size.ids / 16).max(64);
    let warm = 16;
    let ids = synth::zipf_ids((warm + st.reps + 1) * batch, rows, 1.05, 3);
    let batches: Vec<&[u32]> = ids.chunks(batch).collect();
    let cache = GpuCache::new(&engine, int8, rows.div_ceil(8), edo::cache::PolicyKind::Lfu.build()).await?;
    for b in &batches[..warm] {
        cache.gather(b, Bounds::Error).await?.read().await?;
    }
    cache.reset_stats();
    let mut next = warm;
    let c = &cache;
    let bs = &batches;
    let next = &mut next;
    let timing = {
        let mut times = Vec::new();
        let mut first = 0.0;
        for i in 0..=st.reps {
            let b = bs[*next];
            *next += 1;
            let t = Instant::now();
            c.gather(b, Bounds::Error).await?.read().await?;
            let s = t.elapsed().as_secs_f64();
            if i == 0 {
                first = s;
            } else {
                times.push(s);
            }
        }
        Timing { first, times }
    };
    let stats = cache.stats();
    let row_bytes = int8.row_words() as u64 * 4;
    let work = Work {
        op: Op::Cache,
        format: int8.format().name().into(),
        size: size.name,
        rows,
        dim,
        items: batch,
        unit: "ids",
        batch,
        timing: "round trip",
        moved_bytes: batch as u64 * (row_bytes + 4 + dim as u64 * 4),
        table_bytes: cache.bytes(),
        shards: Some(cache.shard_count()),
        note: Some(format!("LFU over 1/8 of the rows, Zipf 1.05: hit rate {:.3}", stats.hit_rate())),
        quality: None,
    };
    push_case(st, backend, work, timing);
    Ok(())
}

async fn latency_cases(st: &mut State, runner: &Runner, backend: &BackendInfo, size: &Size, int8: &PackedTable) -> Result<(), Error> {
    let (rows, dim) = (size.rows, size.dim);
    let row_bytes = int8.row_words() as u64 * 4;
    let gpu = match runner {
        Runner::Gpu(engine) => Some(GpuTable::upload(engine, int8).await?),
        Runner::Cpu(_) => None,
    };
    let mut batches = vec![1, 64, 1024];
    batches.push(size.ids.max(2048));
    for n in batches {
        // Eight sets of ids, taken in turn: no call repeats the one before it.
        let sets: Vec<Vec<u32>> = (0..8).map(|k| synth::uniform_ids(n, rows, 9 + k)).collect();
        let work = Work {
            op: Op::Latency,
            format: int8.format().name().into(),
            size: size.name,
            rows,
            dim,
            items: n,
            unit: "ids",
            batch: n,
            timing: if gpu.is_some() { "round trip" } else { "host" },
            moved_bytes: n as u64 * (row_bytes + 4 + dim as u64 * 4),
            table_bytes: int8.bytes(),
            shards: gpu.as_ref().map(|g| g.shard_count()),
            note: None,
            quality: None,
        };
        // Each call timed on its own, for the tail: at least 100 of them.
        let calls = (10 * st.reps).max(100);
        let mut turn = 0;
        let mut next = || {
            turn += 1;
            &sets[turn % sets.len()]
        };
        let timing = match (&gpu, runner) {
            // A caller's round trip: the gather and its readback in one submission.
            (Some(g), _) => {
                time_each_call(calls, || {
                    let ids = next();
                    async move { g.lookup_host(&edo::Request::gather(ids, Bounds::Error)).await }
                })
                .await?
            }
            // Calls too short for a clock (and a browser's 100 µs one) to time one by one:
            // samples of many.
            (None, Runner::Cpu(threads)) => {
                let mut out = vec![0f32; n * dim];
                time_cpu(st.reps, *threads, || edo::cpu::gather_into(int8, next(), Bounds::Error, &mut out))?
            }
            (None, Runner::Gpu(_)) => unreachable!("uploaded above"),
        };
        push_case(st, backend, work, timing);
    }
    Ok(())
}

/// Short English sentences, cycled to make the embed cases' batches.
const TEXTS: [&str; 16] = [
    "The quick brown fox jumps over the lazy dog.",
    "Embedding tables map tokens to vectors.",
    "How do I reset my password?",
    "GPU kernels decode compressed rows on the fly.",
    "A cup of coffee in the morning helps me think.",
    "The train to Berlin leaves at nine.",
    "Quantisation trades a little accuracy for a lot of memory.",
    "Where is the nearest pharmacy?",
    "Static models pool token vectors into sentence vectors.",
    "The cat sat on the warm windowsill.",
    "Search results are ranked by cosine similarity.",
    "Please send the invoice by Friday.",
    "Browsers run WebGPU compute shaders.",
    "Rain is expected over the weekend.",
    "The museum opens its new wing next spring.",
    "Recommender systems look up millions of ids per second.",
];

async fn embed_cases<F: FnMut(&Progress) -> Fut, Fut: Future<Output = ()>>(
    st: &mut State,
    progress: &mut F,
    runner: &Runner,
    backend: &BackendInfo,
    model: &StaticModel,
) -> Result<(), Error> {
    progress(&Progress { done: st.done, total: st.total, label: format!("embed on {}", backend.name) }).await;
    if st.out_of_budget() {
        st.skip(Op::Embed, model.table().format().name().into(), "model", &backend.id, "budget");
        st.done += 1;
        return Ok(());
    }
    let texts: Vec<&str> = TEXTS.iter().cycle().take(1024).copied().collect();
    let gpu = match runner {
        Runner::Gpu(engine) => Some(GpuStaticModel::upload(engine, model).await?),
        Runner::Cpu(_) => None,
    };
    for n in [1, 32, 1024] {
        let batch = &texts[..n];
        let work = Work {
            op: Op::Embed,
            format: model.table().format().name().into(),
            size: "model",
            rows: model.table().rows(),
            dim: model.dim(),
            items: n,
            unit: "texts",
            batch: n,
            timing: if gpu.is_some() { "round trip" } else { "host" },
            moved_bytes: (n * model.dim() * 4) as u64,
            table_bytes: model.table().bytes(),
            shards: None,
            note: None,
            quality: None,
        };
        let timing = match (&gpu, runner) {
            (Some(g), _) => time_round_trip(st.reps, || async move { g.encode(batch).await?.read().await.map(|_| ()) }).await?,
            (None, Runner::Cpu(threads)) => time_cpu(st.reps, *threads, || model.encode(batch).map(|_| ()))?,
            (None, Runner::Gpu(_)) => unreachable!("uploaded above"),
        };
        push_case(st, backend, work, timing);
    }
    st.done += 1;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// scripts/bench_peers.py runs the peers on the suite's shapes and texts, written out again
    /// in Python: they must not drift apart.
    #[test]
    fn the_peers_script_has_the_suites_sizes_and_texts() {
        let script = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/bench_peers.py")).expect("the peers script");
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
