//! [`Engine`]: picking an adapter, making the device (or taking the caller's), the limits edo needs,
//! and what an engine reports.

use super::*;
use edo_core::Error as CoreError;

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

pub fn limit_value(limits: &wgpu::Limits, name: &str) -> u64 {
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
pub fn check_limits(limits: &wgpu::Limits) -> Result<(), Error> {
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
pub fn check_prepared_dim(dim: usize) -> Result<(), Error> {
    if dim == 0 {
        return Err(CoreError::ZeroDim.into());
    }
    if dim > MAX_PREPARED_DIM {
        return Err(CoreError::LimitExceeded { what: "values per row", requested: dim as u64, max: MAX_PREPARED_DIM as u64 }.into());
    }
    Ok(())
}

/// The words of a row of `dim` values of `format` on the GPU with rows aligned to
/// `row_alignment` bytes, once both are checked as `Engine::prepare_rows` and
/// `Engine::prepare_model` take them.
pub fn prepared_row_words(format: Format, dim: usize, row_alignment: usize) -> Result<usize, Error> {
    crate::format::check_row_alignment(row_alignment)?;
    check_prepared_dim(dim)?;
    Ok(crate::format::aligned_row_words(format.row_words(dim), row_alignment))
}

/// A GPU device ready to hold tables and run lookups. Cheap to clone (reference counted).
#[derive(Clone)]
pub struct Engine {
    #[doc(hidden)]
    pub ctx: Arc<Context>,
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

    #[doc(hidden)]
    pub async fn pick(instance: &wgpu::Instance, options: &EngineOptions) -> Result<(wgpu::Device, wgpu::Queue), Error> {
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

    #[doc(hidden)]
    pub async fn request_device(adapter: &wgpu::Adapter) -> Result<(wgpu::Device, wgpu::Queue), Error> {
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
    /// (`edo::RecoveringEngine` calls it); nothing of this engine's tables or caches comes
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

    #[doc(hidden)]
    pub fn on_device((device, queue): (wgpu::Device, wgpu::Queue), options: EngineOptions, origin: Origin) -> Result<Engine, Error> {
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

    #[doc(hidden)]
    pub fn build(device: wgpu::Device, queue: wgpu::Queue, options: EngineOptions, lost: Arc<Lost>, origin: Origin) -> Engine {
        let limits = device.limits();
        let info = device.adapter_info();
        let binding_max = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        let max_binding_bytes = options.max_binding_bytes.map_or(binding_max, |b| b.min(binding_max)).max(4);
        // A kernel's shape is (x, workgroup_size / x) with x from 1 to 32, so y may be the whole size.
        let workgroup_size = options.workgroup_size.clamp(1, limits.max_compute_invocations_per_workgroup.min(limits.max_compute_workgroup_size_y).max(1));
        let (gather_layout, gather_pipeline_layout) = kernel_layout(&device, "edo gather", Binds::Gather);
        let (bag_layout, bag_pipeline_layout) = kernel_layout(&device, "edo bag", Binds::Bag);
        let (hash_layout, hash_pipeline_layout) = kernel_layout(&device, "edo hash", Binds::Hash);
        let (probe_layout, probe_pipeline_layout) = kernel_layout(&device, "edo live probe", Binds::Probe);
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
            probe_layout,
            probe_pipeline_layout,
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
    /// refuses, [`edo_core::Error::ZeroDim`] for a dim of 0 and [`edo_core::Error::LimitExceeded`] for one past
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
