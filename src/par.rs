//! Data parallelism over row blocks: a pool of threads natively (rayon's, edo's own), one thread in the browser.
//!
//! The CPU path splits work into one contiguous block of rows per core, contiguous so each
//! thread streams its own output.

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
        // The blocks run on a pool whose threads live from call to call: a call wakes them
        // rather than spawning threads (~30 µs each), so a batch of a few dozen texts is worth
        // splitting, and a worker's thread-local buffers outlive the call. The calling thread runs
        // the first block itself, so the pool has one thread fewer than the cores: an idle worker
        // spinning for work beside two busy threads on two cores took a third of a core from them.
        // The first failure in block order wins.
        let Some(pool) = pool() else {
            return out.chunks_mut(rows_per * row_len).enumerate().find_map(|(i, block)| f(i * rows_per, block));
        };
        let mut results: Vec<Option<E>> = Vec::new();
        results.resize_with(n, || None);
        let mut blocks = out.chunks_mut(rows_per * row_len).zip(results.iter_mut()).enumerate();
        let f = &f;
        pool.in_place_scope(|s| {
            let own = blocks.next();
            for (i, (block, result)) in blocks {
                s.spawn(move |_| *result = f(i * rows_per, block));
            }
            if let Some((_, (block, result))) = own {
                *result = f(0, block);
            }
        });
        results.into_iter().flatten().next()
    }
}

/// The CPU path's worker threads: one fewer than the cores (the caller is the other), made at the
/// first parallel call. Its own pool, not rayon's global one, which an application may size or
/// fill as it likes. `None` when the system would not start the threads: then the blocks run one
/// after another.
#[cfg(native)]
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let all = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new().num_threads(all.saturating_sub(1).max(1)).thread_name(|i| format!("edo-cpu-{i}")).build().ok()
    })
    .as_ref()
}

/// Values per call of the block function in the browser (see [`for_each_chunk_mut`]).
#[cfg(web)]
const WEB_BLOCK_VALUES: usize = 1 << 12;
