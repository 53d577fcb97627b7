//! Measuring on the machine at hand: medians, the device's own buffer copy, memcpy on the CPU
//! path's threads. Benchmarks report their figures as ratios to these, measured in the same run,
//! because absolute times on shared machines (and on lavapipe) mean little. The same timing
//! serves `edo bench …` natively and the benchmark suite in a browser tab (`web-time`'s clock).

use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use web_time::Instant;

use edo::{Engine, Error};

/// Threads the CPU path uses (all available cores natively).
pub fn threads() -> usize {
    edo::par::threads()
}

/// The median of measurements (the upper middle one of an even count; NaN for none).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Median wall time of `iters` runs of `f` (after one untimed run), with the last result.
pub fn timed<T>(iters: usize, mut f: impl FnMut() -> Result<T, Error>) -> Result<(T, f64), Error> {
    let mut out = f()?;
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters.max(1) {
        let t = Instant::now();
        out = f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    Ok((out, median(times)))
}

/// The shortest stretch of time one sample may be: calls shorter than it are repeated within a
/// sample and the sample divided by the count. Browsers give `performance.now()` a coarse
/// resolution (100 µs in Chromium without cross-origin isolation), so a sample there spans more.
pub(crate) const MIN_SAMPLE_S: f64 = if cfg!(web) { 0.01 } else { 0.001 };

/// The next number of calls per sample after `n` calls took `seconds`, or `None` once a sample
/// lasts [`MIN_SAMPLE_S`]. A time is trusted for the estimate only when it is well above the
/// clock's resolution (a call that reads as 0 µs on a 100 µs clock may take 90).
pub(crate) fn more_calls(n: usize, seconds: f64) -> Option<usize> {
    if seconds >= MIN_SAMPLE_S || n >= 1 << 20 {
        None
    } else if seconds >= MIN_SAMPLE_S / 8.0 {
        Some(((n as f64 * MIN_SAMPLE_S / seconds).ceil() as usize).max(n + 1))
    } else {
        Some(n * 8)
    }
}

/// The first call of `f` (seconds), then `reps` samples of seconds per call, each sample as many
/// calls as make it last [`MIN_SAMPLE_S`].
pub(crate) fn sample_calls(reps: usize, mut f: impl FnMut() -> Result<(), Error>) -> Result<(f64, Vec<f64>), Error> {
    let t = Instant::now();
    f()?;
    let first = t.elapsed().as_secs_f64();
    let mut sample = |n: usize| -> Result<f64, Error> {
        let t = Instant::now();
        for _ in 0..n {
            f()?;
        }
        Ok(t.elapsed().as_secs_f64())
    };
    let mut n = 1;
    while let Some(more) = more_calls(n, sample(n)?) {
        n = more;
    }
    let times = (0..reps).map(|_| Ok(sample(n)? / n as f64)).collect::<Result<_, Error>>()?;
    Ok((first, times))
}

/// Seconds per repetition of what `encode` records, the work staying on the device: a warm-up
/// submission of four repetitions, then `reps` submissions of at least four each (more when four
/// take less than [`MIN_SAMPLE_S`]). Timed by the device's timestamps around the repetitions
/// where it has them ([`device_clock`]; in a browser too, where `timestamp-query` is granted),
/// else by the wall clock around submit and wait, which includes the submission overhead a
/// caller pays too.
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
    let mut per = 4;
    let mut took = seconds(submit(per)).await?;
    while let Some(more) = more_calls(per, took).filter(|&m| m <= 1024) {
        per = more;
        took = seconds(submit(per)).await?;
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        times.push(seconds(submit(per)).await? / per as f64);
    }
    Ok(times)
}

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
        let slice = self.read.slice(..);
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
        let ticks = {
            let view = slice.get_mapped_range().ok()?;
            let tick = |at: usize| u64::from_le_bytes(view[at..at + 8].try_into().expect("8 bytes"));
            [tick(0), tick(8)]
        };
        self.read.unmap();
        (ticks[1] > ticks[0]).then(|| (ticks[1] - ticks[0]) as f64 * self.period * 1e-9)
    }
}

/// Median seconds per repetition of the work `encode` records, the work staying on the device:
/// a warm-up, then `iters` timed submissions of at least four repetitions each.
#[cfg(native)]
pub fn time_gpu(engine: &Engine, iters: usize, encode: impl Fn(&mut wgpu::CommandEncoder)) -> Result<f64, Error> {
    Ok(median(pollster::block_on(time_device(engine, iters.max(1), encode))?))
}

/// The device's own `copy_buffer_to_buffer` of `bytes`, in bytes read + written per second.
pub(crate) async fn device_copy_gbps(engine: &Engine, bytes: u64, iters: usize) -> Result<f64, Error> {
    let bytes = bytes.max(4).next_multiple_of(4);
    let mk = |usage| engine.device().create_buffer(&wgpu::BufferDescriptor { label: Some("copy bench"), size: bytes, usage, mapped_at_creation: false });
    let src = mk(wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::STORAGE);
    let dst = mk(wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::STORAGE);
    let times = time_device(engine, iters.max(1), |enc| enc.copy_buffer_to_buffer(&src, 0, &dst, 0, bytes)).await?;
    Ok(2.0 * bytes as f64 / median(times).max(1e-9) / 1e9)
}

/// The device's own `copy_buffer_to_buffer` of `bytes`, in bytes read + written per second
/// (native; the benchmark suite awaits the same measurement in a browser).
#[cfg(native)]
pub fn gpu_copy_gbps(engine: &Engine, bytes: u64, iters: usize) -> Result<f64, Error> {
    pollster::block_on(device_copy_gbps(engine, bytes, iters))
}

/// memcpy of `bytes` split over the CPU path's threads, in bytes read + written per second.
pub fn cpu_memcpy_gbps(bytes: usize, iters: usize) -> f64 {
    let n = bytes / 4;
    let src: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut dst = vec![0f32; n];
    let chunk = (16 * 1024).min(n.max(1));
    let once = || {
        edo::par::for_each_chunk_mut(&mut dst, chunk, 1, |first, block| {
            let first = first * chunk;
            block.copy_from_slice(&src[first..first + block.len()]);
            None::<()>
        });
        std::hint::black_box(&dst);
        Ok(())
    };
    let seconds = sample_calls(iters.max(1), once).map_or(f64::NAN, |(_, times)| median(times));
    2.0 * bytes as f64 / seconds.max(1e-9) / 1e9
}
