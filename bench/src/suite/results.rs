//! The results file's schema (documented in `docs/bench-schema.md`): a run's cases, backends,
//! environment, cold start and artifacts.

use super::*;

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
