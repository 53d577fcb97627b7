//! The device's side of measuring: submissions timed by the device's timestamps or the wall
//! clock, and the device's own copy (a buffer copy and a copy kernel), which the GPU cases'
//! figures are ratios to. Only with the GPU path (`gpu` feature).

use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use web_time::Instant;

use edo::{Engine, Error};

use super::{median, more_calls};

/// Seconds per repetition of what `encode` records, the work staying on the device: warm-up
/// submissions of one repetition or more (as many as make one last
/// [`MIN_SAMPLE_S`](super::MIN_SAMPLE_S)) for at least [`WARM_S`] and until the device's speed settles (on a GPU, not on an adapter that is the
/// CPU), then `reps` submissions of as many. A slow case is not repeated past what the clock
/// needs: SwiftShader's bags of the browser's tiny suite took 0.35 s a call, four calls a sample.
/// Timed by the device's timestamps around the repetitions where it has them ([`device_clock`];
/// in a browser too, where `timestamp-query` is granted), else by the wall clock around submit
/// and wait, which includes the submission overhead a caller pays too.
pub(crate) async fn time_device(engine: &Engine, reps: usize, encode: impl Fn(&mut wgpu::CommandEncoder)) -> Result<Vec<f64>, Error> {
    let stamps = Stamps::new(engine);
    let submit = |per: usize| {
        let mut encoder = engine.device().create_command_encoder(&Default::default());
        if let Some(s) = &stamps {
            s.mark(&mut encoder, 0);
        }
        for _ in 0..per {
            encode(&mut encoder);
        }
        if let Some(s) = &stamps {
            s.mark(&mut encoder, 1);
            s.resolve(&mut encoder);
        }
        let t = Instant::now();
        engine.queue().submit([encoder.finish()]);
        t
    };
    let seconds = async |t: Instant| -> Result<f64, Error> {
        engine.work_done().await?;
        let wall = t.elapsed().as_secs_f64();
        let device = match &stamps {
            Some(s) => s.seconds(engine).await,
            None => None,
        };
        Ok(device.unwrap_or(wall))
    };
    let warm = Instant::now();
    // One call first, untimed: what a driver does lazily on first use would make the first
    // sample long and stop the calibration at one call of a fast kernel.
    seconds(submit(1)).await?;
    let mut per = 1;
    let mut took = seconds(submit(per)).await?;
    while let Some(more) = more_calls(per, took).filter(|_| per < MAX_PER_SUBMISSION) {
        per = more.min(MAX_PER_SUBMISSION);
        took = seconds(submit(per)).await?;
    }
    // Warm-up: a GPU that idled between cases runs at low clocks until load raises them (an
    // H200 idles at 345 MHz of its 1 980, and its first suite run measured half the speed of a
    // second). Samples are taken once the device has been busy for WARM_S and a sample is no
    // longer 2 % faster than the one before it; at most WARM_MAX_S. Not on an adapter that is
    // the CPU (lavapipe, SwiftShader): it has no GPU clocks to raise.
    let software = engine.adapter().device_type == format!("{:?}", wgpu::DeviceType::Cpu);
    let mut last = took / per as f64;
    while !software && warm.elapsed().as_secs_f64() < WARM_MAX_S {
        let now = seconds(submit(per)).await? / per as f64;
        let settled = now > 0.98 * last;
        last = now;
        if settled && warm.elapsed().as_secs_f64() >= WARM_S {
            break;
        }
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        times.push(seconds(submit(per)).await? / per as f64);
    }
    Ok(times)
}

/// The most repetitions one submission records.
const MAX_PER_SUBMISSION: usize = 1024;

/// Least wall time a device case spends on warm-up submissions before its samples (see
/// [`time_device`]), and most.
const WARM_S: f64 = 0.1;
const WARM_MAX_S: f64 = 1.0;

/// How the device cases time `engine`'s work: `"timestamps"` (the device's own, around the
/// work; a browser's are coarsened, to 100 µs in Chrome, a hundredth of a browser sample's
/// 10 ms) or `"wall clock"` (around submit and wait).
pub fn device_clock(engine: &Engine) -> &'static str {
    if engine.device().features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        "timestamps"
    } else {
        "wall clock"
    }
}

/// Two timestamps around the work of a submission, and the buffers they are read back through.
struct Stamps {
    set: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    read: wgpu::Buffer,
    /// Nanoseconds per tick.
    period: f64,
}

impl Stamps {
    /// Where the device has timestamps.
    fn new(engine: &Engine) -> Option<Stamps> {
        if device_clock(engine) != "timestamps" {
            return None;
        }
        let device = engine.device();
        let set = device.create_query_set(&wgpu::QuerySetDescriptor { label: Some("bench timestamps"), ty: wgpu::QueryType::Timestamp, count: 2 });
        let buffer = |usage| device.create_buffer(&wgpu::BufferDescriptor { label: Some("bench timestamps"), size: 16, usage, mapped_at_creation: false });
        let resolved = buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC);
        let read = buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        Some(Stamps { set, resolved, read, period: engine.queue().get_timestamp_period() as f64 })
    }

    /// Timestamp `index` at the end of an empty compute pass: after the work recorded before.
    fn mark(&self, encoder: &mut wgpu::CommandEncoder, index: u32) {
        let writes = wgpu::ComputePassTimestampWrites { query_set: &self.set, beginning_of_pass_write_index: None, end_of_pass_write_index: Some(index) };
        drop(encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("bench timestamp"), timestamp_writes: Some(writes) }));
    }

    fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.resolve_query_set(&self.set, 0..2, &self.resolved, 0);
        encoder.copy_buffer_to_buffer(&self.resolved, 0, &self.read, 0, 16);
    }

    /// Seconds between the two timestamps of the finished submission; `None` if they cannot be
    /// read or make no sense (then the wall clock is used).
    async fn seconds(&self, engine: &Engine) -> Option<f64> {
        let bytes = read_mappable(engine, &self.read).await?;
        let tick = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let ticks = [tick(0), tick(8)];
        (ticks[1] > ticks[0]).then(|| (ticks[1] - ticks[0]) as f64 * self.period * 1e-9)
    }
}

/// The bytes of a `MAP_READ` buffer whose writes were submitted; `None` if it cannot be mapped.
async fn read_mappable(engine: &Engine, buffer: &wgpu::Buffer) -> Option<Vec<u8>> {
    let slice = buffer.slice(..);
    // Set by the mapping's callback: whether it mapped, and who waits for it.
    let state: Arc<Mutex<(Option<bool>, Option<Waker>)>> = Arc::default();
    let done = state.clone();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let mut st = done.lock().unwrap_or_else(|p| p.into_inner());
        st.0 = Some(r.is_ok());
        if let Some(w) = st.1.take() {
            w.wake();
        }
    });
    // Natively the device is polled for the callback; a browser calls it on its own.
    #[cfg(native)]
    engine.device().poll(wgpu::PollType::wait_indefinitely()).ok()?;
    #[cfg(not(native))]
    let _ = engine;
    let mapped = std::future::poll_fn(|cx| {
        let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
        match st.0 {
            Some(ok) => Poll::Ready(ok),
            None => {
                st.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    })
    .await;
    if !mapped {
        return None;
    }
    let bytes = slice.get_mapped_range().ok()?.to_vec();
    buffer.unmap();
    Some(bytes)
}

/// Median seconds per repetition of the work `encode` records, the work staying on the device:
/// a warm-up, then `iters` timed submissions of as many repetitions as make one last 1 ms (at
/// most 1024).
#[cfg(native)]
pub fn time_gpu(engine: &Engine, iters: usize, encode: impl Fn(&mut wgpu::CommandEncoder)) -> Result<f64, Error> {
    Ok(median(pollster::block_on(time_device(engine, iters.max(1), encode))?))
}

/// The device's copy bandwidth, two ways, in bytes read + written per second (GB/s).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct DeviceCopy {
    /// `copy_buffer_to_buffer`. A driver may run it on a DMA engine far below what kernels
    /// stream: NVIDIA's Vulkan driver copies 1 GiB at 851 GB/s on an H200, whose gather
    /// kernels reach 3.7 TB/s.
    pub buffer: f64,
    /// A compute shader copying 16-byte words ([`COPY_WGSL`]): what a kernel can stream.
    pub shader: f64,
}

impl DeviceCopy {
    /// The reference for ratios: the faster of the two (the device's copy, as a kernel
    /// reaching it would see it).
    pub fn best(&self) -> f64 {
        self.buffer.max(self.shader)
    }
}

/// The copy kernel: one vec4 of words per invocation and step, a grid stride over the binding.
pub const COPY_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
    let stride = n.x * 256u;
    let len = arrayLength(&dst);
    for (var i = g.x; i < len; i += stride) {
        dst[i] = src[i];
    }
}
"#;

/// The device's copy of `bytes` (rounded up to 16) both ways: `copy_buffer_to_buffer` and
/// [`COPY_WGSL`] over bindings of at most the device's limit.
pub(crate) async fn device_copies(engine: &Engine, bytes: u64, iters: usize) -> Result<DeviceCopy, Error> {
    let bytes = bytes.max(16).next_multiple_of(16);
    let device = engine.device();
    let mk = |usage| device.create_buffer(&wgpu::BufferDescriptor { label: Some("copy bench"), size: bytes, usage, mapped_at_creation: false });
    let src = mk(wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::STORAGE);
    let dst = mk(wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::STORAGE);
    let gbps = |times: Vec<f64>| 2.0 * bytes as f64 / median(times).max(1e-9) / 1e9;
    let buffer = gbps(time_device(engine, iters.max(1), |enc| enc.copy_buffer_to_buffer(&src, 0, &dst, 0, bytes)).await?);

    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor { label: Some("copy bench"), source: wgpu::ShaderSource::Wgsl(COPY_WGSL.into()) });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("copy bench"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let layout = pipeline.get_bind_group_layout(0);
    let limits = engine.limits();
    // Bindings as large as the device allows, at offsets its alignment allows.
    let align = u64::from(limits.min_storage_buffer_offset_alignment).max(16);
    let chunk = (limits.max_storage_buffer_binding_size.min(bytes) / align * align).max(align).min(bytes);
    let groups: Vec<(wgpu::BindGroup, u32)> = (0..bytes)
        .step_by(chunk as usize)
        .map(|at| {
            let size = chunk.min(bytes - at);
            let size = std::num::NonZeroU64::new(size);
            let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("copy bench"),
                layout: &layout,
                entries: &[
                    wgpu::BindGroupEntry { binding: 0, resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: &src, offset: at, size }) },
                    wgpu::BindGroupEntry { binding: 1, resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: &dst, offset: at, size }) },
                ],
            });
            // Enough workgroups to fill any device, each invocation a few vec4s.
            let workgroups = (size.map_or(0, |s| s.get()) / 16).div_ceil(256 * 4).clamp(1, u64::from(limits.max_compute_workgroups_per_dimension)) as u32;
            (group, workgroups)
        })
        .collect();
    // Known words at the head and tail of the source, for the check below.
    let probe = bytes.min(1 << 20);
    let tail = bytes - probe;
    let pattern = |at: u64| -> Vec<u8> { (at / 4..(at + probe) / 4).flat_map(|w| (w as u32 ^ 0x9e37_79b9).to_le_bytes()).collect() };
    engine.queue().write_buffer(&src, 0, &pattern(0));
    engine.queue().write_buffer(&src, tail, &pattern(tail));
    let shader = gbps(
        time_device(engine, iters.max(1), |enc| {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("copy bench"), timestamp_writes: None });
            pass.set_pipeline(&pipeline);
            for (group, workgroups) in &groups {
                pass.set_bind_group(0, group, &[]);
                pass.dispatch_workgroups(*workgroups, 1, 1);
            }
        })
        .await?,
    );
    // A copy kernel that copied nothing would be fast: the check that it copied.
    let read = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("copy bench check"),
        size: 2 * probe,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(&dst, 0, &read, 0, probe);
    encoder.copy_buffer_to_buffer(&dst, tail, &read, probe, probe);
    engine.queue().submit([encoder.finish()]);
    engine.work_done().await?;
    let Some(copied) = read_mappable(engine, &read).await else {
        return Err(Error::gpu("benchmark check", "the copy kernel's output could not be read back".to_string()));
    };
    if copied != [pattern(0), pattern(tail)].concat() {
        return Err(Error::gpu("benchmark check", "the copy kernel's output differs from its input".to_string()));
    }
    Ok(DeviceCopy { buffer, shader })
}

/// The device's copy of `bytes` both ways (`device_copies`, native; the benchmark suite
/// awaits the same measurement in a browser).
#[cfg(native)]
pub fn gpu_copies(engine: &Engine, bytes: u64, iters: usize) -> Result<DeviceCopy, Error> {
    pollster::block_on(device_copies(engine, bytes, iters))
}

/// The device's copy of `bytes` ([`DeviceCopy::best`] of [`gpu_copies`]), in bytes read +
/// written per second.
#[cfg(native)]
pub fn gpu_copy_gbps(engine: &Engine, bytes: u64, iters: usize) -> Result<f64, Error> {
    Ok(gpu_copies(engine, bytes, iters)?.best())
}
