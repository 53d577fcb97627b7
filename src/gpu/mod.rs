//! The GPU path: a wgpu device, packed tables uploaded as storage-buffer shards, and the gather
//! kernels of `shaders/`.
//!
//! Everything that waits on the GPU is `async`, because the browser cannot block; on native,
//! [`crate::block_on`] (pollster) turns each future into a plain call. Work is submitted without
//! waiting: a gather returns as soon as its dispatches are queued, and its output stays in a GPU
//! buffer the caller can bind in its own pipelines, or read back with [`GpuRows::read`].

mod any;
mod bag;
mod cache;
pub mod decoders;
mod hash;
mod job;
mod lookup;
mod memory;
mod mixed;
mod model;
mod prune;
mod qr;
mod recover;
mod search;
mod shaders;
mod table;

pub use any::AnyGpuTable;
pub use bag::GpuTableBatch;
pub use cache::GpuCache;
pub use hash::GpuHashedTables;
pub use job::{GpuRows, LookupJob};
pub use lookup::GpuLookup;
pub(crate) use memory::Buffer;
pub use memory::{MemoryBuffer, MemoryEntry, MemoryReport};
pub use mixed::GpuMixedTable;
pub use model::GpuStaticModel;
pub use prune::GpuPrunedTable;
pub use qr::GpuQrTables;
pub use recover::{CacheSpec, Recoverable, RecoveringEngine, RecoveryEvent, Reupload, WeakRecoveringEngine};
pub use search::{GpuCodes, MAX_CANDIDATES, ONE_PASS_MAX_K};
#[doc(hidden)] // for tests/shaders.rs, which validates every kernel
pub use shaders::{kernels, Binds, Decoder, Kernel, SearchKernel, ShaderId, Shape, Src};
pub use table::GpuTable;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::{Error, Format};

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
    /// an allocation past it fails with [`Error::LimitExceeded`] before anything is allocated.
    /// `None`: the device's own memory is the limit.
    pub memory_budget: Option<u64>,
    /// How row caches react as the engine's buffers fill the budget.
    pub pressure: PressureStages,
    /// Most bytes of idle buffers the engine keeps for its next lookups (ids, parameters,
    /// outputs and readback buffers go idle when a lookup is done with them, and a later lookup
    /// of the same size takes them again: no allocation, no zero-fill, no error scope). Only
    /// buffers of at most 1/16 of this are kept — the small lookups, whose time these costs
    /// dominate — and the longest idle go first to make room. Idle buffers count in
    /// [`Engine::allocated_bytes`] and against the budget; none are kept once the engine holds
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

/// How row caches ([`GpuCache`]) react as an engine's buffers fill its memory budget, as shares
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

pub(crate) struct Context {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub limits: wgpu::Limits,
    pub adapter: AdapterSummary,
    pub max_binding_bytes: u64,
    pub workgroup_size: u32,
    /// [`EngineOptions::shader_checks`].
    shader_checks: bool,
    /// The largest buffer the pool keeps (1/16 of [`EngineOptions::pool_bytes`]).
    pool_max_buffer: u64,
    pub gather_layout: wgpu::BindGroupLayout,
    pub gather_pipeline_layout: wgpu::PipelineLayout,
    pub bag_layout: wgpu::BindGroupLayout,
    pub bag_pipeline_layout: wgpu::PipelineLayout,
    pub hash_layout: wgpu::BindGroupLayout,
    pub hash_pipeline_layout: wgpu::PipelineLayout,
    /// Compiled pipelines, keyed by everything that makes one: the kernel (its sources and
    /// override constants follow from its [`ShaderId`]) and the workgroup shape.
    pipelines: Mutex<HashMap<PipelineKey, wgpu::ComputePipeline>>,
    /// Bytes of the buffers edo holds (see [`Buffer`]), and the budget for them.
    pub(crate) registry: Arc<memory::Registry>,
    memory_budget: Option<u64>,
    pub pressure: PressureStages,
    lost: Arc<Lost>,
    /// How the engine was made, so [`Engine::rebuild`] can make another the same way.
    origin: Origin,
}

/// How an engine was made: what [`Engine::rebuild`] repeats.
#[derive(Clone)]
enum Origin {
    /// [`Engine::new`]: an adapter picked by these options.
    Picked(EngineOptions),
    /// [`Engine::from_instance`]: an adapter picked from this instance by these options.
    Instance(wgpu::Instance, EngineOptions),
    /// [`Engine::from_adapter`]: this adapter, with these options.
    Adapter(wgpu::Adapter, EngineOptions),
    /// [`Engine::from_device`]: the caller's device, which only the caller can replace.
    Device,
}

/// A kernel and its workgroup shape `(x, y)`.
type PipelineKey = (ShaderId, (u32, u32));

/// A callback of [`Engine::on_device_lost`].
type LostListener = Box<dyn Fn(&str) + Send + Sync>;

/// A value wgpu wants `Send` (the device-lost callback's captures) in a browser, where edo's
/// code runs on one thread: wasm32 without the `atomics` feature has no other thread to send it
/// to, so the markers hold. (A threaded wasm build would not compile this.)
#[cfg(web)]
pub(crate) struct OneThread<T>(pub T);
#[cfg(web)]
impl<T> OneThread<T> {
    /// The value (a method, so a closure captures the wrapper, not the field).
    pub(crate) fn get(&self) -> &T {
        &self.0
    }
}
#[cfg(all(web, not(target_feature = "atomics")))]
// SAFETY: without `atomics`, wasm32 runs one thread; nothing can observe the value elsewhere.
unsafe impl<T> Send for OneThread<T> {}
#[cfg(all(web, not(target_feature = "atomics")))]
// SAFETY: as for Send.
unsafe impl<T> Sync for OneThread<T> {}

/// Whether the device is lost, and who wants to hear of it.
#[derive(Default)]
struct Lost {
    reason: Mutex<Option<String>>,
    listeners: Mutex<Vec<LostListener>>,
}

impl Lost {
    fn is_marked(&self) -> bool {
        self.reason.lock().map_or(true, |r| r.is_some())
    }

    /// Records the loss and tells the listeners, the first time only (the device-lost callback
    /// and [`Engine::destroy_device`] may both report one loss).
    fn mark(&self, reason: String) {
        let Ok(mut r) = self.reason.lock() else { return };
        if r.is_some() {
            return;
        }
        *r = Some(reason.clone());
        drop(r);
        if let Ok(listeners) = self.listeners.lock() {
            listeners.iter().for_each(|f| f(&reason));
        }
    }
}

/// The device limits edo's kernels need, as `(name, least value)`: WebGPU's defaults for compute,
/// but six storage buffers per stage (the bag kernel binds five tables' worth of inputs and its
/// output). [`Engine::from_device`] refuses a device below any of them.
pub const REQUIRED_LIMITS: [(&str, u64); 7] = [
    ("max_bind_groups", 1),
    ("max_storage_buffers_per_shader_stage", 6),
    ("max_uniform_buffers_per_shader_stage", 1),
    ("max_compute_invocations_per_workgroup", 256),
    ("max_compute_workgroup_size_x", 256),
    ("max_compute_workgroup_storage_size", 16384),
    ("max_compute_workgroups_per_dimension", 1),
];

fn limit_value(limits: &wgpu::Limits, name: &str) -> u64 {
    match name {
        "max_bind_groups" => limits.max_bind_groups as u64,
        "max_storage_buffers_per_shader_stage" => limits.max_storage_buffers_per_shader_stage as u64,
        "max_uniform_buffers_per_shader_stage" => limits.max_uniform_buffers_per_shader_stage as u64,
        "max_compute_invocations_per_workgroup" => limits.max_compute_invocations_per_workgroup as u64,
        "max_compute_workgroup_size_x" => limits.max_compute_workgroup_size_x as u64,
        "max_compute_workgroup_storage_size" => limits.max_compute_workgroup_storage_size as u64,
        "max_compute_workgroups_per_dimension" => limits.max_compute_workgroups_per_dimension as u64,
        _ => unreachable!("every required limit is read above"),
    }
}

/// The first of [`REQUIRED_LIMITS`] that `limits` fall short of, as an error.
fn check_limits(limits: &wgpu::Limits) -> Result<(), Error> {
    for (limit, required) in REQUIRED_LIMITS {
        let actual = limit_value(limits, limit);
        if actual < required {
            return Err(Error::DeviceLimits { limit, required, actual });
        }
    }
    Ok(())
}

/// The largest dim `Engine::prepare_*` compiles kernels for: a row's words, in every format, then
/// fit the kernels' 32-bit offsets (a table's own dim is bounded by its shards first).
pub const MAX_PREPARED_DIM: usize = (u32::MAX / 32) as usize;

/// A dim `Engine::prepare_*` takes: from 1 to [`MAX_PREPARED_DIM`].
pub(crate) fn check_prepared_dim(dim: usize) -> Result<(), Error> {
    if dim == 0 {
        return Err(Error::ZeroDim);
    }
    if dim > MAX_PREPARED_DIM {
        return Err(Error::LimitExceeded { what: "values per row", requested: dim as u64, max: MAX_PREPARED_DIM as u64 });
    }
    Ok(())
}

/// The words of a row of `dim` values of `format` on the GPU with rows aligned to
/// `row_alignment` bytes, once both are checked as `Engine::prepare_rows` and
/// `Engine::prepare_model` take them.
pub(crate) fn prepared_row_words(format: Format, dim: usize, row_alignment: usize) -> Result<usize, Error> {
    crate::format::check_row_alignment(row_alignment)?;
    check_prepared_dim(dim)?;
    Ok(crate::format::aligned_row_words(format.row_words(dim), row_alignment))
}

/// A GPU device ready to hold tables and run lookups. Cheap to clone (reference counted).
#[derive(Clone)]
pub struct Engine {
    pub(crate) ctx: Arc<Context>,
}

impl Engine {
    /// Picks an adapter and creates a device with the adapter's own limits (not WebGPU's
    /// defaults), so tables can use the largest bindings the hardware offers.
    pub async fn new(options: EngineOptions) -> Result<Engine, Error> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = options.backends;
        let instance = wgpu::Instance::new(desc);
        let device = Engine::pick(&instance, &options).await?;
        Engine::on_device(device, options.clone(), Origin::Picked(options))
    }

    /// An engine on an adapter picked from the caller's instance by `options` (its `backends`
    /// are the instance's, not these). For an instance edo cannot make itself: in JavaScript
    /// outside a window or a worker (Node with Dawn's `webgpu` package), wgpu's WebGPU backend
    /// reads `navigator.gpu` only while the instance is made. A rebuild after a device loss
    /// picks a new adapter from the same instance.
    pub async fn from_instance(instance: &wgpu::Instance, options: EngineOptions) -> Result<Engine, Error> {
        let device = Engine::pick(instance, &options).await?;
        Engine::on_device(device, options.clone(), Origin::Instance(instance.clone(), options))
    }

    async fn pick(instance: &wgpu::Instance, options: &EngineOptions) -> Result<(wgpu::Device, wgpu::Queue), Error> {
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions { power_preference: options.power_preference, ..Default::default() })
            .await
            .map_err(|_| Error::NoAdapter)?;
        Engine::request_device(&adapter).await
    }

    /// An engine on one adapter the caller chose (from `wgpu::Instance::enumerate_adapters`, as
    /// `edo bench suite --adapter` does), with the adapter's own limits as [`Engine::new`].
    pub async fn from_adapter(adapter: &wgpu::Adapter, options: EngineOptions) -> Result<Engine, Error> {
        let device = Engine::request_device(adapter).await?;
        Engine::on_device(device, options.clone(), Origin::Adapter(adapter.clone(), options))
    }

    async fn request_device(adapter: &wgpu::Adapter) -> Result<(wgpu::Device, wgpu::Queue), Error> {
        adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("edo"),
                // Timestamps where the adapter has them, for benchmarks that time the device.
                required_features: adapter.features() & wgpu::Features::TIMESTAMP_QUERY,
                required_limits: adapter.limits(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::RequestDevice(crate::Cause::new(e)))
    }

    /// A new engine made the way this one was, on a new device: [`Engine::new`]'s again picks
    /// an adapter with the same options (a browser's WebGPU adapter serves one device only),
    /// [`Engine::from_instance`]'s picks one from the same instance, [`Engine::from_adapter`]'s
    /// asks the same adapter again. What a device loss needs
    /// ([`crate::RecoveringEngine`] calls it); nothing of this engine's tables or caches comes
    /// along. An engine over a caller's device ([`Engine::from_device`]) cannot be rebuilt by
    /// edo: [`Error::Unsupported`] (make a new device and call `from_device` again).
    pub async fn rebuild(&self) -> Result<Engine, Error> {
        match self.ctx.origin.clone() {
            Origin::Picked(options) => Engine::new(options).await,
            Origin::Instance(instance, options) => Engine::from_instance(&instance, options).await,
            Origin::Adapter(adapter, options) => Engine::from_adapter(&adapter, options).await,
            Origin::Device => Err(Error::Unsupported(crate::Unsupported::RebuildCallersDevice)),
        }
    }

    /// An engine over a device and queue the caller already owns — a desktop app's, a game
    /// engine's, an inference framework's — so that edo's outputs ([`GpuRows::buffer`]) bind
    /// directly in the caller's own pipelines, on the same device, with no copy between devices.
    ///
    /// Limits and features are read from the device (those it was created with, not the
    /// adapter's): a device made with WebGPU's default limits gets 128 MiB shards, one made with
    /// the adapter's limits gets the largest bindings the hardware offers. A device whose limits
    /// are below what edo's kernels need (see [`REQUIRED_LIMITS`]) is refused with
    /// [`Error::DeviceLimits`] naming the first one short. `options.backends` and
    /// `options.power_preference` do not apply (the device is chosen already); the others do.
    ///
    /// edo sets the device's lost callback (wgpu keeps one per device), so that every later call
    /// returns [`Error::DeviceLost`]; to be told yourself, register with
    /// [`Engine::on_device_lost`].
    pub fn from_device(device: wgpu::Device, queue: wgpu::Queue, options: EngineOptions) -> Result<Engine, Error> {
        Engine::on_device((device, queue), options, Origin::Device)
    }

    fn on_device((device, queue): (wgpu::Device, wgpu::Queue), options: EngineOptions, origin: Origin) -> Result<Engine, Error> {
        check_limits(&device.limits())?;
        let lost = Arc::new(Lost::default());
        {
            let lost = lost.clone();
            device.set_device_lost_callback(move |reason, message| lost.mark(format!("{reason:?}: {message}")));
        }
        if !matches!(origin, Origin::Device) {
            // edo catches its errors with error scopes; what reaches this handler is a call that
            // met a lost device half-way (unmapping a destroyed buffer): the call itself returns
            // `DeviceLost`. Natively anything else is a bug, and panics as wgpu's default handler
            // does. In a browser the page may use edo's `GPUDevice` for its own work (the
            // package hands it out), so an error here may be the page's: it is left to the
            // page's own `uncapturederror` listeners, never a panic that would end the module.
            // (A caller's own device keeps the caller's handler.)
            let lost = lost.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                let text = e.to_string();
                if cfg!(web) || lost.is_marked() || text.contains("destroyed") || text.contains("lost") {
                    return;
                }
                panic!("wgpu error: {text}");
            }));
        }
        Ok(Engine::build(device, queue, options, lost, origin))
    }

    /// A second engine on this engine's device with other options (the benchmark suite's large
    /// tables, spread over shards of at most `options.max_binding_bytes`). It shares the device,
    /// its queue and its loss, not the pipelines or the memory accounting.
    #[doc(hidden)]
    pub fn sibling(&self, options: EngineOptions) -> Engine {
        let origin = match &self.ctx.origin {
            Origin::Picked(_) => Origin::Picked(options.clone()),
            Origin::Adapter(adapter, _) => Origin::Adapter(adapter.clone(), options.clone()),
            Origin::Instance(instance, _) => Origin::Instance(instance.clone(), options.clone()),
            Origin::Device => Origin::Device,
        };
        Engine::build(self.ctx.device.clone(), self.ctx.queue.clone(), options, self.ctx.lost.clone(), origin)
    }

    fn build(device: wgpu::Device, queue: wgpu::Queue, options: EngineOptions, lost: Arc<Lost>, origin: Origin) -> Engine {
        let limits = device.limits();
        let info = device.adapter_info();
        let binding_max = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        let max_binding_bytes = options.max_binding_bytes.map_or(binding_max, |b| b.min(binding_max)).max(4);
        // A kernel's shape is (x, workgroup_size / x) with x from 1 to 32, so y may be the whole size.
        let workgroup_size = options.workgroup_size.clamp(1, limits.max_compute_invocations_per_workgroup.min(limits.max_compute_workgroup_size_y).max(1));
        let (gather_layout, gather_pipeline_layout) = kernel_layout(&device, "edo gather", Binds::Gather.inputs());
        let (bag_layout, bag_pipeline_layout) = kernel_layout(&device, "edo bag", Binds::Bag.inputs());
        let (hash_layout, hash_pipeline_layout) = kernel_layout(&device, "edo hash", Binds::Hash.inputs());
        let adapter = AdapterSummary {
            name: info.name,
            backend: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            driver: [info.driver, info.driver_info].join(" ").trim().to_string(),
        };
        // In a browser wgpu's handles are neither Send nor Sync and nothing runs on another
        // thread; the Arc only shares the context between the engine and its tables.
        // In a browser wgpu's buffers (which the pool holds) are not Send; nothing runs on
        // another thread there.
        #[cfg_attr(web, allow(clippy::arc_with_non_send_sync))]
        let registry = Arc::new(memory::Registry::default());
        registry.configure_pool(options.pool_bytes, options.memory_budget.map(|b| (b as f64 * options.pressure.stop_growing) as u64));
        {
            // A lost device's buffers are not kept idle any more. (Only a flag: the loss may be
            // reported inside wgpu, where destroying buffers is no place to be.) Weak, so the
            // listener does not keep the pool, and its buffers' device, alive.
            let registry = Arc::downgrade(&registry);
            #[cfg(web)]
            let registry = OneThread(registry);
            if let Ok(mut listeners) = lost.listeners.lock() {
                listeners.push(Box::new(move |_: &str| {
                    #[cfg(web)]
                    let registry = registry.get();
                    if let Some(r) = registry.upgrade() {
                        r.close_pool();
                    }
                }));
            }
        }
        #[cfg_attr(web, allow(clippy::arc_with_non_send_sync))]
        let ctx = Arc::new(Context {
            device,
            queue,
            limits,
            adapter,
            max_binding_bytes,
            workgroup_size,
            shader_checks: options.shader_checks,
            pool_max_buffer: options.pool_bytes / 16,
            gather_layout,
            gather_pipeline_layout,
            bag_layout,
            bag_pipeline_layout,
            hash_layout,
            hash_pipeline_layout,
            pipelines: Mutex::new(HashMap::new()),
            registry,
            memory_budget: options.memory_budget,
            pressure: options.pressure,
            lost,
            origin,
        });
        Engine { ctx }
    }

    /// Calls `callback` with the reason when the engine's device is lost (a driver reset, the GPU
    /// removed, [`Engine::destroy_device`]). From then on every call on the engine, its tables
    /// and outputs returns [`Error::DeviceLost`]; the callback is the moment to build a new
    /// engine and upload again. Called at most once, on whatever thread wgpu reports the loss.
    pub fn on_device_lost(&self, callback: impl Fn(&str) + wgpu::WasmNotSendSync + 'static) {
        #[cfg(web)]
        let callback = {
            let callback = OneThread(callback);
            move |reason: &str| callback.get()(reason)
        };
        if let Ok(mut listeners) = self.ctx.lost.listeners.lock() {
            listeners.push(Box::new(callback));
        }
    }

    /// Whether the engine's device is lost (every call on it then returns [`Error::DeviceLost`]).
    pub fn is_lost(&self) -> bool {
        self.ctx.check_lost().is_err()
    }

    /// [`Engine::new`] for native code that does not run an async executor.
    #[cfg(native)]
    pub fn new_blocking(options: EngineOptions) -> Result<Engine, Error> {
        pollster::block_on(Self::new(options))
    }

    /// The adapter this engine runs on.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.ctx.adapter
    }

    /// The device limits in force (the adapter's own).
    pub fn limits(&self) -> &wgpu::Limits {
        &self.ctx.limits
    }

    /// Bytes of GPU buffers the engine holds now: tables (shards), outputs not yet dropped, the
    /// scratch of lookups in flight, and idle buffers kept for reuse ([`Engine::idle_bytes`]).
    /// Handles that share a table share its bytes.
    pub fn allocated_bytes(&self) -> u64 {
        self.ctx.registry.allocated()
    }

    /// Bytes of the idle buffers the engine keeps for its next lookups (at most
    /// [`EngineOptions::pool_bytes`]); part of [`Engine::allocated_bytes`].
    pub fn idle_bytes(&self) -> u64 {
        self.ctx.registry.idle_bytes()
    }

    /// Destroys the idle buffers kept for reuse and returns their bytes (the next lookups
    /// allocate again). The engine does this itself before an allocation its budget would
    /// refuse.
    pub fn release_idle_buffers(&self) -> u64 {
        self.ctx.registry.release_idle()
    }

    /// Every buffer the engine holds now — table shards, cache slots, outputs not yet dropped,
    /// the scratch of lookups in flight — by owner and purpose, with the total and the budget.
    pub fn memory_report(&self) -> MemoryReport {
        self.ctx.registry.report(self.ctx.memory_budget)
    }

    /// The share of the memory budget the engine holds now (`None` without a budget).
    pub fn pressure(&self) -> Option<f64> {
        self.ctx.pressure()
    }

    /// The engine's memory budget ([`EngineOptions::memory_budget`]).
    pub fn memory_budget(&self) -> Option<u64> {
        self.ctx.memory_budget
    }

    /// The largest storage binding, in bytes, this engine uses (a table shard, an output range).
    pub fn max_binding_bytes(&self) -> u64 {
        self.ctx.max_binding_bytes
    }

    /// Compiles the gather kernel of tables of `format` and `dim` (rows packed: for a table whose
    /// rows are aligned, [`Engine::prepare_table`] or [`Engine::prepare_rows`]) now rather than
    /// at their first lookup
    /// (kernels are compiled once per engine). In a browser the compiler runs in the GPU
    /// process, so a page can start this, build its table meanwhile, and find the kernel ready.
    pub async fn prepare_gather(&self, format: Format, dim: usize) -> Result<(), Error> {
        self.ctx.check_lost()?;
        check_prepared_dim(dim)?;
        self.ctx.gather_pipeline(format, dim, format.row_words(dim)).await.map(drop)
    }

    /// Compiles the kernels `table`'s first gather and first small batch of bags will use — its
    /// format, dim and row alignment ([`crate::PackedTable::with_row_alignment`], which
    /// [`Engine::prepare_gather`] cannot know) — now rather than at those calls.
    pub async fn prepare_table(&self, table: &crate::PackedTable) -> Result<(), Error> {
        self.prepare_rows(table.format(), table.dim(), table.row_alignment()).await
    }

    /// [`Engine::prepare_table`] before the table exists: the kernels the first gather and first
    /// small batch of bags of a table of `format` and `dim` whose rows are aligned to
    /// `row_alignment` bytes on the GPU (4 for packed rows) will use. Fails with
    /// [`Error::Unsupported`] for an alignment [`crate::PackedTable::with_row_alignment`]
    /// refuses, [`Error::ZeroDim`] for a dim of 0 and [`Error::LimitExceeded`] for one past
    /// [`MAX_PREPARED_DIM`].
    pub async fn prepare_rows(&self, format: Format, dim: usize, row_alignment: usize) -> Result<(), Error> {
        let ctx = &self.ctx;
        ctx.check_lost()?;
        let row_words = prepared_row_words(format, dim, row_alignment)?;
        ctx.gather_pipeline(format, dim, row_words).await?;
        bag::prepare_first_bag(ctx, format, dim, row_words).await
    }

    /// Pipelines compiled so far (tests check that `prepare_*` compiles what a first call uses).
    #[doc(hidden)]
    pub fn pipeline_count(&self) -> usize {
        self.ctx.pipelines.lock().map_or(0, |p| p.len())
    }

    /// The wgpu device, to build pipelines that consume edo's output buffers.
    pub fn device(&self) -> &wgpu::Device {
        &self.ctx.device
    }

    /// The wgpu queue edo submits to.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.ctx.queue
    }

    /// Destroys the device, as a driver reset would. Every later call on this engine, its tables
    /// and its outputs fails with [`Error::DeviceLost`]. Meant for testing recovery paths.
    #[doc(hidden)] // a test hook
    pub fn destroy_device(&self) {
        // Marked first, so a call that meets a destroyed buffer already finds the device lost
        // (the callback also runs during destroy on native; the first mark wins).
        self.ctx.lost.mark("Destroyed: device destroyed by the application".to_string());
        self.ctx.device.destroy();
    }

    /// Waits until all submitted GPU work has finished (native; a no-op in the browser).
    pub fn wait_idle(&self) -> Result<(), Error> {
        self.ctx.check_lost()?;
        self.ctx.poll_wait()
    }

    /// Waits until all work submitted so far has finished, on every platform: natively by
    /// polling the device, in a browser on the queue's `onSubmittedWorkDone` promise (what a
    /// benchmark times against).
    pub async fn work_done(&self) -> Result<(), Error> {
        #[cfg(native)]
        {
            self.wait_idle()
        }
        #[cfg(web)]
        {
            self.ctx.check_lost()?;
            let (tx, rx) = crate::oneshot::channel();
            self.ctx.queue.on_submitted_work_done(move || tx.send(()));
            rx.await;
            self.ctx.check_lost()
        }
    }
}

impl Context {
    pub(crate) fn pressure(&self) -> Option<f64> {
        self.memory_budget.map(|b| self.registry.allocated() as f64 / b.max(1) as f64)
    }

    pub(crate) fn check_lost(&self) -> Result<(), Error> {
        match self.lost.reason.lock().ok().and_then(|l| l.clone()) {
            Some(reason) => Err(Error::DeviceLost(reason)),
            None => Ok(()),
        }
    }

    pub(crate) fn poll_wait(&self) -> Result<(), Error> {
        #[cfg(native)]
        {
            self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| match e {
                wgpu::PollError::Timeout => Error::Gpu { what: "wait", message: e.to_string(), source: Some(crate::Cause::new(e)) },
                other => self.check_lost().err().unwrap_or(Error::DeviceLost(other.to_string())),
            })?;
        }
        Ok(())
    }

    /// Workgroup shape `(WG_X, WG_Y)` of a kernel whose rows take `units` steps, about
    /// `per_invocation` of them per invocation: WG_X invocations share a row (neighbours touch
    /// neighbouring memory), at most 32 (a warp), and WG_Y rows per workgroup.
    ///
    /// A gather takes four steps per invocation, so the id and the row's scale and bias are read
    /// once per four stores. A bag takes one: each of its steps (a pass of 16 columns, or one)
    /// walks all of the bag's indices, and passes side by side finish sooner than passes one
    /// after another (docs/benchmarks.md, "Design measurements").
    pub(crate) fn workgroup_shape(&self, units: usize, per_invocation: usize) -> (u32, u32) {
        let wg = self.workgroup_size.max(1);
        let x = (units.div_ceil(per_invocation.max(1)).min(1 << 16) as u32).next_power_of_two().clamp(1, 32).min(wg);
        (x, (wg / x).max(1))
    }

    /// Workgroups `(x, y)` of a 2-D grid covering `items` items, `per_group` per workgroup:
    /// WebGPU allows 65 535 workgroups per dimension, so larger dispatches fold into rows of the
    /// grid, which the kernels flatten back (`id_index`, `gid.y · nwg.x · WG + gid.x`).
    pub(crate) fn grid(&self, what: &'static str, items: u64, per_group: u64) -> Result<(u32, u32), Error> {
        let groups = items.div_ceil(per_group.max(1));
        let max = self.limits.max_compute_workgroups_per_dimension as u64;
        let x = groups.clamp(1, max);
        let y = groups.div_ceil(x).max(1);
        if y > max {
            return Err(Error::LimitExceeded { what, requested: groups, max: max * max });
        }
        Ok((x as u32, y as u32))
    }

    /// A bind group of `resources`, bound in order to bindings 0, 1, 2, … as every kernel's
    /// layout numbers them.
    pub(crate) fn bind_group(&self, label: &str, layout: &wgpu::BindGroupLayout, resources: &[wgpu::BindingResource<'_>]) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry<'_>> =
            resources.iter().enumerate().map(|(i, r)| wgpu::BindGroupEntry { binding: i as u32, resource: r.clone() }).collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor { label: Some(label), layout, entries: &entries })
    }

    /// The gather kernel of a table of `format` and `dim`, with its workgroup shape.
    pub(crate) async fn gather_pipeline(&self, format: Format, dim: usize, row_words: usize) -> Result<(wgpu::ComputePipeline, (u32, u32)), Error> {
        let shader = ShaderId::gather(format, dim, row_words);
        let shape = self.workgroup_shape(dim / shader.values_per_step(), 4);
        Ok((self.pipeline(shader, shape).await?, shape))
    }

    /// The f16-output gather kernel of `format` for rows of `dim` values, and its shape.
    pub(crate) async fn gather_f16_pipeline(&self, format: Format, dim: usize) -> Result<(wgpu::ComputePipeline, (u32, u32)), Error> {
        let shader = ShaderId::GatherF16 { format, vec4: dim.is_multiple_of(4) };
        let shape = self.workgroup_shape(dim.div_ceil(shader.values_per_step()), 4);
        Ok((self.pipeline(shader, shape).await?, shape))
    }

    /// The compute pipeline of a kernel for a workgroup shape, compiled once per engine.
    pub(crate) async fn pipeline(&self, shader: ShaderId, (wg_x, wg_y): (u32, u32)) -> Result<wgpu::ComputePipeline, Error> {
        let key = (shader, (wg_x, wg_y));
        if let Some(p) = self.pipelines.lock().map_err(|_| poisoned())?.get(&key) {
            return Ok(p.clone());
        }
        let (kernel, _) = shader.kernel();
        let name = shader.name();
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let desc = wgpu::ShaderModuleDescriptor { label: Some(&name), source: wgpu::ShaderSource::Wgsl(shader.source().into()) };
        let module = if self.shader_checks {
            self.device.create_shader_module(desc)
        } else {
            // SAFETY: every read and write of edo's kernels is in range by their own checks:
            // each id goes through `resolve_row` (against the table and the bound shard) before
            // the table is touched, and every other index and loop is bounded by counts the host
            // computes from the buffers it binds (offsets validated by `BagPlan`, output ranges
            // by `dense_parts` and the gather's chunks). tests/gpu runs every kernel this way
            // against the CPU oracle, with bad ids, shards and sentinel-filled outputs.
            unsafe { self.device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
        };
        let constants = shader.constants_for((wg_x, wg_y));
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&name),
            layout: Some(match kernel.binds {
                Binds::Gather => &self.gather_pipeline_layout,
                Binds::Bag => &self.bag_pipeline_layout,
                Binds::Hash => &self.hash_pipeline_layout,
            }),
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &constants, ..Default::default() },
            cache: None,
        });
        if let Some(e) = scope.pop().await {
            return Err(Error::Gpu { what: kernel.name, message: format!("{name}: {e}"), source: Some(crate::Cause::new(e)) });
        }
        self.pipelines.lock().map_err(|_| poisoned())?.insert(key, pipeline.clone());
        Ok(pipeline)
    }

    /// Creates a buffer, turning out-of-memory and validation failures into typed errors.
    pub(crate) async fn create_buffer(&self, what: &'static str, size: u64, usage: wgpu::BufferUsages, contents: Option<&[u8]>) -> Result<Buffer, Error> {
        self.allocate(what, size, usage, contents, None).await
    }

    /// A buffer for one lookup — its ids, parameters, output or readback — taken from the idle
    /// ones the engine keeps where one fits (no allocation, no zero-fill by wgpu, no error
    /// scope), else allocated; it goes idle again when its last handle goes. `contents` are
    /// queued as a write. Scratch is pooled by size class (the buffer may be larger than
    /// `size`: bind the range used), an output by its exact size (a caller may see it whole).
    /// A buffer larger than the pool keeps is allocated and destroyed as any other.
    pub(crate) async fn pooled(&self, what: &'static str, size: u64, usage: wgpu::BufferUsages, contents: Option<&[u8]>, fit: Fit) -> Result<Buffer, Error> {
        self.check_lost()?;
        let bytes = size.max(4).next_multiple_of(4);
        if bytes > self.pool_max_buffer {
            return self.allocate(what, size, usage, contents, None).await;
        }
        let usage = if contents.is_some() { usage | wgpu::BufferUsages::COPY_DST } else { usage };
        let class = match fit {
            // Never past what the exact size could be bound as.
            Fit::Class => size_class(bytes).min(self.limits.max_storage_buffer_binding_size.min(self.limits.max_buffer_size)).max(bytes),
            Fit::Exact => bytes,
        };
        let key = memory::PoolKey { usage: usage.bits(), size: class };
        let buffer = match self.registry.take(key, what) {
            Some(counted) => {
                let inner = counted.buffer.clone().expect("an idle buffer exists");
                // In a browser nothing runs on another thread (wgpu's web buffers are not Send).
                #[cfg_attr(web, allow(clippy::arc_with_non_send_sync))]
                let counted = Arc::new(counted);
                Buffer { inner, counted }
            }
            None => self.allocate(what, class, usage, None, Some(key)).await?,
        };
        if let Some(bytes) = contents {
            self.write_words(&buffer, bytes);
        }
        Ok(buffer)
    }

    /// Queues a write of `bytes` at the start of `buffer` (a `COPY_DST` buffer at least as
    /// large, rounded up to whole words): whole words, as a queued write needs, the padding of
    /// a last partial word 0.
    fn write_words(&self, buffer: &wgpu::Buffer, bytes: &[u8]) {
        let whole = bytes.len() & !3;
        if whole > 0 {
            self.queue.write_buffer(buffer, 0, &bytes[..whole]);
        }
        if whole < bytes.len() {
            let mut tail = [0u8; 4];
            tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
            self.queue.write_buffer(buffer, whole as u64, &tail);
        }
    }

    /// Allocates a buffer (pooled under `pool` once it goes idle, if given).
    async fn allocate(
        &self,
        what: &'static str,
        size: u64,
        usage: wgpu::BufferUsages,
        contents: Option<&[u8]>,
        pool: Option<memory::PoolKey>,
    ) -> Result<Buffer, Error> {
        self.check_lost()?;
        if size > self.limits.max_buffer_size {
            return Err(Error::LimitExceeded { what, requested: size, max: self.limits.max_buffer_size });
        }
        // Buffers are at least 4 bytes so an empty lookup still has something to bind.
        let size = size.max(4).next_multiple_of(4);
        // From here on `counted` gives the bytes back if anything below fails.
        let (mut counted, mut held) = self.registry.reserve(what, size);
        if let Some(budget) = self.memory_budget {
            if held > budget && self.registry.idle_bytes() > 0 {
                // Idle buffers go before the budget refuses anything.
                drop(counted);
                self.registry.release_idle();
                (counted, held) = self.registry.reserve(what, size);
            }
            if held > budget {
                return Err(Error::LimitExceeded { what: "GPU memory budget of the engine (bytes held)", requested: held, max: budget });
            }
        }
        counted.pool = pool;
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        // Natively the contents go in through a mapping at creation. In a browser a queued write
        // is cheaper, as the mapping makes a JS copy of the range first (docs/benchmarks.md,
        // "Design measurements").
        let queued_write = cfg!(web) && contents.is_some();
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(what),
            size,
            usage: if queued_write { usage | wgpu::BufferUsages::COPY_DST } else { usage },
            mapped_at_creation: contents.is_some() && !queued_write,
        });
        if let Some(bytes) = contents {
            if queued_write {
                self.write_words(&buffer, bytes);
            } else {
                if let Ok(mut view) = buffer.slice(..bytes.len() as u64).get_mapped_range_mut() {
                    view.copy_from_slice(bytes);
                }
                buffer.unmap();
            }
        }
        let validation = validation.pop().await;
        let oom = oom.pop().await;
        // A lost device fails allocations too: say that rather than what it caused.
        self.check_lost()?;
        if oom.is_some() {
            return Err(Error::OutOfMemory { what });
        }
        if let Some(e) = validation {
            return Err(Error::Gpu { what, message: e.to_string(), source: Some(crate::Cause::new(e)) });
        }
        let mut counted = counted;
        counted.buffer = Some(buffer.clone());
        // In a browser nothing runs on another thread (wgpu's web buffers are not Send).
        #[cfg_attr(web, allow(clippy::arc_with_non_send_sync))]
        let counted = Arc::new(counted);
        Ok(Buffer { inner: buffer, counted })
    }
}

/// Runs `submit` (which queues work on `ctx`'s queue) inside a validation error scope, so that a
/// submission wgpu refuses — a bug in edo, or a buffer destroyed under it — is [`Error::Gpu`]
/// rather than an output that was never written. (Natively such an error would otherwise reach
/// the device's handler; in a browser it would be lost among the page's own.)
pub(crate) async fn checked_submit(ctx: &Context, what: &'static str, submit: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
    let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let submitted = submit();
    // Popped at once (the scope covers the submission only); its answer is awaited below.
    let refused = scope.pop();
    submitted?;
    match refused.await {
        Some(e) => {
            ctx.check_lost()?;
            Err(Error::Gpu { what, message: e.to_string(), source: Some(crate::Cause::new(e)) })
        }
        None => Ok(()),
    }
}

/// Copies `len` values at byte `offset` of `buffer` (a `COPY_SRC` buffer) back to the host once
/// all work submitted before has finished. The host vector is allocated fallibly: a readback
/// larger than host (or WASM) memory is [`Error::HostOutOfMemory`].
pub(crate) async fn read_buffer<T: bytemuck::Pod>(ctx: &Context, buffer: &wgpu::Buffer, offset: u64, len: usize) -> Result<Vec<T>, Error> {
    ctx.check_lost()?;
    let size = len as u64 * std::mem::size_of::<T>() as u64;
    if size == 0 {
        return Ok(Vec::new());
    }
    let out = host_vec::<T>(len)?;
    let staging = readback_buffer(ctx, size).await?;
    let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("edo readback") });
    encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
    ctx.queue.submit([encoder.finish()]);
    map_read(ctx, &staging, out, len).await
}

/// An empty host vector with room for `len` values, allocated fallibly.
pub(crate) fn host_vec<T>(len: usize) -> Result<Vec<T>, Error> {
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(len).map_err(|_| Error::HostOutOfMemory { what: "readback", bytes: (len * std::mem::size_of::<T>()) as u64 })?;
    Ok(out)
}

/// A buffer to copy `size` bytes into and map for reading (pooled).
pub(crate) async fn readback_buffer(ctx: &Context, size: u64) -> Result<Buffer, Error> {
    ctx.pooled("readback", size, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST, None, Fit::Class).await
}

/// The first `len` values of `staging` into `out` (empty, with room for them), once the work
/// already submitted that copies them there has finished.
pub(crate) async fn map_read<T: bytemuck::Pod>(ctx: &Context, staging: &Buffer, mut out: Vec<T>, len: usize) -> Result<Vec<T>, Error> {
    let size = len as u64 * std::mem::size_of::<T>() as u64;
    // Out of the pool until it is unmapped: a read given up half-way (its future dropped in a
    // browser) must not hand a buffer still mapping to the next lookup.
    staging.keep_out_of_pool(true);
    let (tx, rx) = crate::oneshot::channel();
    staging.slice(..size).map_async(wgpu::MapMode::Read, move |r| tx.send(r));
    ctx.poll_wait()?;
    match rx.await {
        Some(Ok(())) => {}
        Some(Err(e)) => return Err(ctx.check_lost().err().unwrap_or(Error::Readback { message: e.to_string(), source: Some(crate::Cause::new(e)) })),
        None => return Err(ctx.check_lost().err().unwrap_or(Error::Readback { message: "map callback dropped".into(), source: None })),
    }
    let view = staging
        .slice(..size)
        .get_mapped_range()
        .map_err(|e| ctx.check_lost().err().unwrap_or(Error::Readback { message: e.to_string(), source: Some(crate::Cause::new(e)) }))?;
    // Byte for byte into the values: a mapped range need not be aligned for T.
    out.resize(len, T::zeroed());
    bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&view);
    drop(view);
    // (A mapped buffer may be dropped as it is; unmapping one the device took away is an error.)
    if ctx.check_lost().is_ok() {
        staging.unmap();
        staging.keep_out_of_pool(false);
    }
    Ok(out)
}

/// How a pooled buffer's size is chosen ([`Context::pooled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fit {
    /// Scratch: rounded up to a size class, so lookups of similar sizes share buffers.
    Class,
    /// An output: its exact size, which a caller binding it whole may rely on.
    Exact,
}

/// The size class of a scratch buffer of `bytes`: at least 256, then 8 classes per power of two
/// (less than 1/8 more than asked).
fn size_class(bytes: u64) -> u64 {
    if bytes <= 256 {
        return 256;
    }
    let step = bytes.next_power_of_two() / 16;
    bytes.next_multiple_of(step)
}

fn poisoned() -> Error {
    Error::gpu("pipeline cache", "lock poisoned by a panic on another thread")
}

/// The layout every edo kernel uses: binding 0 a uniform parameter block, then `inputs`
/// read-only storage buffers, then one read-write storage buffer (the output).
fn kernel_layout(device: &wgpu::Device, label: &str, inputs: u32) -> (wgpu::BindGroupLayout, wgpu::PipelineLayout) {
    let entry = |binding, ty| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer { ty, has_dynamic_offset: false, min_binding_size: None },
        count: None,
    };
    let entries: Vec<_> = std::iter::once(entry(0, wgpu::BufferBindingType::Uniform))
        .chain((1..=inputs).map(|b| entry(b, wgpu::BufferBindingType::Storage { read_only: true })))
        .chain([entry(inputs + 1, wgpu::BufferBindingType::Storage { read_only: false })])
        .collect();
    let group = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(label), entries: &entries });
    let pipeline =
        device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor { label: Some(label), bind_group_layouts: &[Some(&group)], immediate_size: 0 });
    (group, pipeline)
}
