//! How an engine is made: [`EngineOptions`], the memory-pressure stages, and the adapter it got.

/// How to pick and configure the GPU.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Prefer a discrete GPU over an integrated one.
    pub power_preference: wgpu::PowerPreference,
    /// Backends to try. Defaults to what `WGPU_BACKEND` names, else all compiled in.
    pub backends: wgpu::Backends,
    /// Upper bound on the bytes of a table shard and of the output range of one gather dispatch.
    /// `None` uses the device's `max_storage_buffer_binding_size`. Set it lower to spread tables
    /// over more, smaller buffers (the tests use this to force many shards and many dispatches on
    /// small tables). Bag outputs are bound whole and must fit the device's own limit.
    pub max_binding_bytes: Option<u64>,
    /// Workgroup size of the kernels (≤ the device's `max_compute_invocations_per_workgroup`).
    pub workgroup_size: u32,
    /// Most bytes of GPU buffers the engine may hold at once (tables, shards, outputs, scratch);
    /// an allocation past it fails with [`edo_core::Error::LimitExceeded`] before anything is allocated.
    /// `None`: the device's own memory is the limit.
    pub memory_budget: Option<u64>,
    /// How row caches react as the engine's buffers fill the budget.
    pub pressure: PressureStages,
    /// Most bytes of idle buffers the engine keeps for its next lookups (ids, parameters,
    /// outputs and readback buffers go idle when a lookup is done with them, and a later lookup
    /// of the same size takes them again: no allocation, no zero-fill, no error scope). Only
    /// buffers of at most 1/16 of this are kept — the small lookups, whose time these costs
    /// dominate — and the longest idle go first to make room. Idle buffers count in
    /// [`Engine::allocated_bytes`](super::Engine::allocated_bytes) and against the budget; none are kept once the engine holds
    /// more than [`PressureStages::stop_growing`] of its budget, and an allocation the budget
    /// would refuse releases them first. Default 16 MiB (buffers up to 1 MiB); 0 keeps none.
    pub pool_bytes: u64,
    /// Whether shader modules keep the runtime checks naga adds to every kernel (each array
    /// access clamped, each loop bounded). Off by default where the backend allows it
    /// (natively; a browser keeps WebGPU's own robustness whatever this says): every kernel
    /// already checks each index it reads with — ids against the table and its shard, bag
    /// offsets and counts set by the host — and the GPU tests run them unchecked against the CPU
    /// oracle, bad ids included. `EDO_SHADER_CHECKS=1` in the environment turns them on (to
    /// debug a kernel, or to measure what they cost).
    pub shader_checks: bool,
}

/// How row caches (`edo::GpuCache`) react as an engine's buffers fill its memory budget, as shares
/// of the budget. Caches look at the engine's pressure at the start of each lookup or prefetch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PressureStages {
    /// A cache adds a page of slots (when it is full and below its capacity) only while the
    /// engine holds less than this share. Default 0.85.
    pub stop_growing: f64,
    /// Above this share a cache gives back one page per lookup. Default 0.90.
    pub shrink: f64,
    /// Above this share a cache drops to a single page: its rows live on the host. Default 0.95.
    pub evict: f64,
}

impl Default for PressureStages {
    fn default() -> Self {
        PressureStages { stop_growing: 0.85, shrink: 0.90, evict: 0.95 }
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            backends: wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all()),
            max_binding_bytes: None,
            workgroup_size: 256,
            memory_budget: None,
            pressure: PressureStages::default(),
            pool_bytes: 16 << 20,
            shader_checks: std::env::var("EDO_SHADER_CHECKS").is_ok_and(|v| v == "1"),
        }
    }
}

/// What the engine runs on, for reports.
#[derive(Clone, Debug, PartialEq)]
pub struct AdapterSummary {
    /// The adapter's name ("NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)").
    pub name: String,
    /// The backend wgpu runs it through (Vulkan, Metal, Dx12, BrowserWebGpu).
    pub backend: String,
    /// Discrete, integrated, virtual or CPU.
    pub device_type: String,
    /// The driver and its version, where the backend says.
    pub driver: String,
}

impl std::fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = if self.name.is_empty() { "unnamed adapter" } else { &self.name };
        write!(f, "{name} ({}, {}", self.backend, self.device_type)?;
        if !self.driver.is_empty() {
            write!(f, ", {}", self.driver)?;
        }
        write!(f, ")")
    }
}
