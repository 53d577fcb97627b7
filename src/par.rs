//! Data parallelism over row blocks: scoped threads natively, one thread in the browser.
//!
//! The CPU path splits work into one contiguous block of rows per core; blocks are large enough
//! that spawning costs nothing measurable, and contiguous so each thread streams its own output.

/// Worker threads the CPU path uses (all available cores natively, 1 on wasm).
#[cfg_attr(web, allow(dead_code))]
pub fn threads() -> usize {
    #[cfg(native)]
    {
        // Asked once: on Linux `available_parallelism` reads the cgroup's CPU quota from /sys,
        // which took longer (~20 µs) than a small lookup itself.
        static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let all = *THREADS.get_or_init(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
        match LIMIT.with(|l| l.get()) {
            0 => all,
            n => n.min(all),
        }
    }
    #[cfg(web)]
    {
        1
    }
}

#[cfg(native)]
thread_local! {
    /// [`with_threads`]'s limit on this thread (0: none).
    static LIMIT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs `f` with the CPU path limited to at most `n` threads on the calling thread (the
/// benchmark suite's one-thread CPU backend). In the browser there is one thread anyway.
#[cfg_attr(web, allow(dead_code))]
pub fn with_threads<R>(n: usize, f: impl FnOnce() -> R) -> R {
    #[cfg(native)]
    {
        struct Restore(usize);
        impl Drop for Restore {
            fn drop(&mut self) {
                LIMIT.with(|l| l.set(self.0));
            }
        }
        let _restore = Restore(LIMIT.with(|l| l.replace(n.max(1))));
        f()
    }
    #[cfg(web)]
    {
        let _ = n;
        f()
    }
}

/// Splits `out` into blocks of whole rows (`row_len` elements each) and runs `f(first_row, block)`
/// on each, in parallel when there are at least `min_rows_per_thread` rows per thread.
/// Returns the result of the lowest block that returned `Some`.
pub fn for_each_chunk_mut<T, E, F>(out: &mut [T], row_len: usize, min_rows_per_thread: usize, f: F) -> Option<E>
where
    T: Send,
    E: Send,
    F: Fn(usize, &mut [T]) -> Option<E> + Sync,
{
    #[cfg(web)]
    {
        // One thread, but many calls: V8 runs a WASM function on baseline code until it has
        // been called often enough and switches to optimised code at a call boundary, never
        // inside a running loop. One call over a whole table would run on baseline code
        // throughout (slower; see docs/benchmarks.md, "Design measurements"), so blocks go
        // through an opaque function pointer the compiler cannot inline here.
        let _ = min_rows_per_thread;
        let f: &dyn Fn(usize, &mut [T]) -> Option<E> = std::hint::black_box(&f);
        let block_rows = (WEB_BLOCK_VALUES / row_len.max(1)).max(1);
        out.chunks_mut(block_rows * row_len.max(1)).enumerate().find_map(|(i, block)| f(i * block_rows, block))
    }
    #[cfg(native)]
    {
        let rows = out.len().checked_div(row_len).unwrap_or(0);
        let n = threads().min(rows / min_rows_per_thread.max(1)).max(1);
        if n == 1 {
            return f(0, out);
        }
        let rows_per = rows.div_ceil(n);
        std::thread::scope(|s| {
            let handles: Vec<_> = out
                .chunks_mut(rows_per * row_len)
                .enumerate()
                .map(|(i, block)| {
                    let f = &f;
                    s.spawn(move || f(i * rows_per, block))
                })
                .collect();
            // Join all, keep the first failure in block order.
            let mut first = None;
            for h in handles {
                let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                if first.is_none() {
                    first = r;
                }
            }
            first
        })
    }
}

/// Values per call of the block function in the browser (see [`for_each_chunk_mut`]).
#[cfg(web)]
const WEB_BLOCK_VALUES: usize = 1 << 12;
