//! Measuring on the machine at hand: medians, the device's own copy, memcpy on the CPU
//! path's threads. Benchmarks report their figures as ratios to these, measured in the same run,
//! because absolute times on shared machines (and on lavapipe) mean little. The same timing
//! serves `edo bench …` natively and the benchmark suite in a browser tab (`web-time`'s clock).

use web_time::Instant;

use edo::Error;

#[cfg(feature = "gpu")]
mod device;
#[cfg(feature = "gpu")]
pub use device::*;

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
