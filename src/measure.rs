//! Measuring on the machine at hand: medians, the device's own buffer copy, memcpy on the CPU
//! path's threads. Benchmarks report their figures as ratios to these, measured in the same run,
//! because absolute times on shared machines (and on lavapipe) mean little.

use std::time::Instant;

use crate::{Engine, Error};

/// Threads the CPU path uses (all available cores natively).
pub fn threads() -> usize {
    crate::par::threads()
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

/// Seconds per repetition of the work `encode` records: one warm-up, then `iters` timed
/// submissions of a few repetitions each, median per repetition. Wall clock around submit and
/// wait, so it includes the submission overhead a caller pays too.
pub fn time_gpu(engine: &Engine, iters: usize, encode: impl Fn(&mut wgpu::CommandEncoder)) -> Result<f64, Error> {
    const REPS: usize = 4;
    let device = engine.device();
    let run = || -> Result<f64, Error> {
        let mut encoder = device.create_command_encoder(&Default::default());
        for _ in 0..REPS {
            encode(&mut encoder);
        }
        let t = Instant::now();
        engine.queue().submit([encoder.finish()]);
        engine.wait_idle()?;
        Ok(t.elapsed().as_secs_f64() / REPS as f64)
    };
    run()?;
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        times.push(run()?);
    }
    Ok(median(times))
}

/// The device's own `copy_buffer_to_buffer` of `bytes`, in bytes read + written per second.
pub fn gpu_copy_gbps(engine: &Engine, bytes: u64, iters: usize) -> Result<f64, Error> {
    let bytes = bytes.max(4).next_multiple_of(4);
    let mk = |usage| engine.device().create_buffer(&wgpu::BufferDescriptor { label: Some("copy bench"), size: bytes, usage, mapped_at_creation: false });
    let src = mk(wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::STORAGE);
    let dst = mk(wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::STORAGE);
    let seconds = time_gpu(engine, iters, |enc| enc.copy_buffer_to_buffer(&src, 0, &dst, 0, bytes))?;
    Ok(2.0 * bytes as f64 / seconds / 1e9)
}

/// memcpy of `bytes` split over the CPU path's threads, in bytes read + written per second.
pub fn cpu_memcpy_gbps(bytes: usize, iters: usize) -> f64 {
    let n = bytes / 4;
    let src: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut dst = vec![0f32; n];
    let chunk = 16 * 1024;
    let once = |dst: &mut [f32]| {
        crate::par::for_each_chunk_mut(dst, chunk.min(n.max(1)), 1, |first, block| {
            let first = first * chunk.min(n.max(1));
            block.copy_from_slice(&src[first..first + block.len()]);
            None::<()>
        });
    };
    once(&mut dst);
    let seconds = median(
        (0..iters.max(1))
            .map(|_| {
                let t = Instant::now();
                once(&mut dst);
                t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    std::hint::black_box(&dst);
    2.0 * bytes as f64 / seconds / 1e9
}
