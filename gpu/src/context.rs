//! [`Context`]: the device, queue, limits and shared state every GPU table, cache and job holds;
//! its buffer pool, pipeline cache and device-loss bookkeeping.

use super::*;
use edo_core::Error as CoreError;

pub struct Context {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub limits: wgpu::Limits,
    pub adapter: AdapterSummary,
    pub max_binding_bytes: u64,
    pub workgroup_size: u32,
    /// [`EngineOptions::shader_checks`].
    #[doc(hidden)]
    pub shader_checks: bool,
    /// The largest buffer the pool keeps (1/16 of [`EngineOptions::pool_bytes`]).
    #[doc(hidden)]
    pub pool_max_buffer: u64,
    pub gather_layout: wgpu::BindGroupLayout,
    pub gather_pipeline_layout: wgpu::PipelineLayout,
    pub bag_layout: wgpu::BindGroupLayout,
    pub bag_pipeline_layout: wgpu::PipelineLayout,
    pub hash_layout: wgpu::BindGroupLayout,
    pub hash_pipeline_layout: wgpu::PipelineLayout,
    #[cfg_attr(web, allow(dead_code))]
    pub probe_layout: wgpu::BindGroupLayout,
    pub probe_pipeline_layout: wgpu::PipelineLayout,
    /// Compiled pipelines, keyed by everything that makes one: the kernel (its sources and
    /// override constants follow from its [`ShaderId`]) and the workgroup shape.
    #[doc(hidden)]
    pub pipelines: Mutex<HashMap<PipelineKey, wgpu::ComputePipeline>>,
    /// Bytes of the buffers edo holds (see [`Buffer`]), and the budget for them.
    #[doc(hidden)]
    pub registry: Arc<memory::Registry>,
    #[doc(hidden)]
    pub memory_budget: Option<u64>,
    pub pressure: PressureStages,
    #[doc(hidden)]
    pub lost: Arc<Lost>,
    /// How the engine was made, so [`Engine::rebuild`] can make another the same way.
    #[doc(hidden)]
    pub origin: Origin,
}

/// How an engine was made: what [`Engine::rebuild`] repeats.
#[derive(Clone)]
pub enum Origin {
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
pub type PipelineKey = (ShaderId, (u32, u32));

/// A callback of [`Engine::on_device_lost`].
pub type LostListener = Box<dyn Fn(&str) + Send + Sync>;

/// A value wgpu wants `Send` (the device-lost callback's captures) in a browser, where edo's
/// code runs on one thread: wasm32 without the `atomics` feature has no other thread to send it
/// to, so the markers hold. (A threaded wasm build would not compile this.)
#[cfg(web)]
pub struct OneThread<T>(pub T);
#[cfg(web)]
impl<T> OneThread<T> {
    /// The value (a method, so a closure captures the wrapper, not the field).
    #[doc(hidden)]
    pub fn get(&self) -> &T {
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
pub struct Lost {
    #[doc(hidden)]
    pub reason: Mutex<Option<String>>,
    #[doc(hidden)]
    pub listeners: Mutex<Vec<LostListener>>,
}

impl Lost {
    #[doc(hidden)]
    pub fn is_marked(&self) -> bool {
        self.reason.lock().map_or(true, |r| r.is_some())
    }

    /// Records the loss and tells the listeners, the first time only (the device-lost callback
    /// and [`Engine::destroy_device`] may both report one loss).
    #[doc(hidden)]
    pub fn mark(&self, reason: String) {
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

impl Context {
    #[doc(hidden)]
    pub fn pressure(&self) -> Option<f64> {
        self.memory_budget.map(|b| self.registry.allocated() as f64 / b.max(1) as f64)
    }

    #[doc(hidden)]
    pub fn check_lost(&self) -> Result<(), Error> {
        match self.lost.reason.lock().ok().and_then(|l| l.clone()) {
            Some(reason) => Err(Error::DeviceLost(reason)),
            None => Ok(()),
        }
    }

    #[doc(hidden)]
    pub fn poll_wait(&self) -> Result<(), Error> {
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
    #[doc(hidden)]
    pub fn workgroup_shape(&self, units: usize, per_invocation: usize) -> (u32, u32) {
        let wg = self.workgroup_size.max(1);
        let x = (units.div_ceil(per_invocation.max(1)).min(1 << 16) as u32).next_power_of_two().clamp(1, 32).min(wg);
        (x, (wg / x).max(1))
    }

    /// Workgroups `(x, y)` of a 2-D grid covering `items` items, `per_group` per workgroup:
    /// WebGPU allows 65 535 workgroups per dimension, so larger dispatches fold into rows of the
    /// grid, which the kernels flatten back (`id_index`, `gid.y · nwg.x · WG + gid.x`).
    #[doc(hidden)]
    pub fn grid(&self, what: &'static str, items: u64, per_group: u64) -> Result<(u32, u32), Error> {
        let groups = items.div_ceil(per_group.max(1));
        let max = self.limits.max_compute_workgroups_per_dimension as u64;
        let x = groups.clamp(1, max);
        let y = groups.div_ceil(x).max(1);
        if y > max {
            return Err(CoreError::LimitExceeded { what, requested: groups, max: max * max }.into());
        }
        Ok((x as u32, y as u32))
    }

    /// A bind group of `resources`, bound in order to bindings 0, 1, 2, … as every kernel's
    /// layout numbers them.
    #[doc(hidden)]
    pub fn bind_group(&self, label: &str, layout: &wgpu::BindGroupLayout, resources: &[wgpu::BindingResource<'_>]) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry<'_>> =
            resources.iter().enumerate().map(|(i, r)| wgpu::BindGroupEntry { binding: i as u32, resource: r.clone() }).collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor { label: Some(label), layout, entries: &entries })
    }

    /// The gather kernel of a table of `format` and `dim`, with its workgroup shape.
    #[doc(hidden)]
    pub async fn gather_pipeline(&self, format: Format, dim: usize, row_words: usize) -> Result<(wgpu::ComputePipeline, (u32, u32)), Error> {
        let shader = ShaderId::gather(format, dim, row_words);
        let shape = self.workgroup_shape(dim / shader.values_per_step(), 4);
        Ok((self.pipeline(shader, shape).await?, shape))
    }

    /// The f16-output gather kernel of `format` for rows of `dim` values, and its shape.
    #[doc(hidden)]
    pub async fn gather_f16_pipeline(&self, format: Format, dim: usize) -> Result<(wgpu::ComputePipeline, (u32, u32)), Error> {
        let shader = ShaderId::GatherF16 { format, vec4: dim.is_multiple_of(4) };
        let shape = self.workgroup_shape(dim.div_ceil(shader.values_per_step()), 4);
        Ok((self.pipeline(shader, shape).await?, shape))
    }

    /// The compute pipeline of a kernel for a workgroup shape, compiled once per engine.
    #[doc(hidden)]
    pub async fn pipeline(&self, shader: ShaderId, (wg_x, wg_y): (u32, u32)) -> Result<wgpu::ComputePipeline, Error> {
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
                Binds::Probe => &self.probe_pipeline_layout,
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
    #[doc(hidden)]
    pub async fn create_buffer(&self, what: &'static str, size: u64, usage: wgpu::BufferUsages, contents: Option<&[u8]>) -> Result<Buffer, Error> {
        self.allocate(what, size, usage, contents, None).await
    }

    /// A buffer for one lookup — its ids, parameters, output or readback — taken from the idle
    /// ones the engine keeps where one fits (no allocation, no zero-fill by wgpu, no error
    /// scope), else allocated; it goes idle again when its last handle goes. `contents` are
    /// queued as a write. Scratch is pooled by size class (the buffer may be larger than
    /// `size`: bind the range used), an output by its exact size (a caller may see it whole).
    /// A buffer larger than the pool keeps is allocated and destroyed as any other.
    #[doc(hidden)]
    pub async fn pooled(&self, what: &'static str, size: u64, usage: wgpu::BufferUsages, contents: Option<&[u8]>, fit: Fit) -> Result<Buffer, Error> {
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
    #[doc(hidden)]
    pub fn write_words(&self, buffer: &wgpu::Buffer, bytes: &[u8]) {
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
    #[doc(hidden)]
    pub async fn allocate(
        &self,
        what: &'static str,
        size: u64,
        usage: wgpu::BufferUsages,
        contents: Option<&[u8]>,
        pool: Option<memory::PoolKey>,
    ) -> Result<Buffer, Error> {
        self.check_lost()?;
        if size > self.limits.max_buffer_size {
            return Err(CoreError::LimitExceeded { what, requested: size, max: self.limits.max_buffer_size }.into());
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
                return Err(CoreError::LimitExceeded { what: "GPU memory budget of the engine (bytes held)", requested: held, max: budget }.into());
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

/// How a pooled buffer's size is chosen ([`Context::pooled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// Scratch: rounded up to a size class, so lookups of similar sizes share buffers.
    Class,
    /// An output: its exact size, which a caller binding it whole may rely on.
    Exact,
}

/// The size class of a scratch buffer of `bytes`: at least 256, then 8 classes per power of two
/// (less than 1/8 more than asked).
pub fn size_class(bytes: u64) -> u64 {
    if bytes <= 256 {
        return 256;
    }
    let step = bytes.next_power_of_two() / 16;
    bytes.next_multiple_of(step)
}

pub fn poisoned() -> Error {
    Error::gpu("pipeline cache", "lock poisoned by a panic on another thread")
}

/// The layout every edo kernel uses: binding 0 a uniform parameter block, then the read-only
/// storage buffers of `binds`, then its read-write ones (one, the output, but for the probe).
pub fn kernel_layout(device: &wgpu::Device, label: &str, binds: Binds) -> (wgpu::BindGroupLayout, wgpu::PipelineLayout) {
    let inputs = binds.inputs();
    let entry = |binding, ty| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer { ty, has_dynamic_offset: false, min_binding_size: None },
        count: None,
    };
    let entries: Vec<_> = std::iter::once(entry(0, wgpu::BufferBindingType::Uniform))
        .chain((1..=inputs).map(|b| entry(b, wgpu::BufferBindingType::Storage { read_only: true })))
        .chain((inputs + 1..=inputs + binds.outputs()).map(|b| entry(b, wgpu::BufferBindingType::Storage { read_only: false })))
        .collect();
    let group = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(label), entries: &entries });
    let pipeline =
        device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor { label: Some(label), bind_group_layouts: &[Some(&group)], immediate_size: 0 });
    (group, pipeline)
}
