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

/// [`for_each_chunk_mut`] with blocks of `block_rows` rows handed out one at a time to whichever
/// thread is free (the caller and the pool's), rather than one equal block per thread: for work
/// whose cost varies from row to row (a text's tokens) and on machines where a thread may be
/// held up, no thread waits on another's last block. Returns the result of the lowest block that
/// returned `Some` (blocks after it may not run).
pub fn for_each_block_balanced<T, E, F>(out: &mut [T], row_len: usize, block_rows: usize, f: F) -> Option<E>
where
    T: Send,
    E: Send,
    F: Fn(usize, &mut [T]) -> Option<E> + Sync,
{
    let block_rows = block_rows.max(1);
    let rows = out.len().checked_div(row_len).unwrap_or(0);
    #[cfg(native)]
    {
        let n_blocks = rows.div_ceil(block_rows);
        let threads = threads().min(n_blocks);
        if let (Some(pool), true) = (pool(), threads > 1) {
            use std::sync::atomic::{AtomicUsize, Ordering};
            use std::sync::Mutex;
            // A block's rows until a thread takes them, then what the block function returned.
            type Slot<'a, T, E> = Mutex<(Option<&'a mut [T]>, Option<E>)>;
            let blocks: Vec<Slot<T, E>> = out.chunks_mut(block_rows * row_len).map(|b| Mutex::new((Some(b), None))).collect();
            // The next block to hand out, and the lowest that failed: blocks past it are skipped,
            // every block before it runs.
            let (next, failed) = (AtomicUsize::new(0), AtomicUsize::new(usize::MAX));
            let work = || loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= blocks.len() || k > failed.load(Ordering::Relaxed) {
                    return;
                }
                // Each block is taken once, by the thread whose fetch_add drew it: never contended.
                let mut slot = blocks[k].lock().unwrap_or_else(|p| p.into_inner());
                let Some(block) = slot.0.take() else { continue };
                let result = f(k * block_rows, block);
                if result.is_some() {
                    failed.fetch_min(k, Ordering::Relaxed);
                }
                slot.1 = result;
            };
            let work = &work;
            pool.in_place_scope(|s| {
                for _ in 1..threads {
                    s.spawn(move |_| work());
                }
                work();
            });
            return blocks.into_iter().find_map(|b| b.into_inner().unwrap_or_else(|p| p.into_inner()).1);
        }
    }
    let _ = rows;
    out.chunks_mut(block_rows * row_len.max(1)).enumerate().find_map(|(i, block)| f(i * block_rows, block))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row is visited once, by the block that holds it, whatever the split; the lowest
    /// failing block's result wins.
    #[test]
    fn balanced_blocks_cover_every_row_once() {
        for (rows, block_rows) in [(0, 8), (1, 8), (7, 8), (8, 8), (9, 8), (1000, 8), (1001, 64), (100, 1)] {
            let mut out = vec![0u32; rows * 3];
            let none = for_each_block_balanced(&mut out, 3, block_rows, |first, block| {
                assert_eq!(block.len() % 3, 0);
                assert!(block.len() <= block_rows * 3);
                for (j, row) in block.chunks_exact_mut(3).enumerate() {
                    row.iter_mut().for_each(|x| *x += (first + j) as u32 + 1);
                }
                None::<()>
            });
            assert!(none.is_none());
            for (i, row) in out.chunks_exact(3).enumerate() {
                assert_eq!(row, [i as u32 + 1; 3], "rows {rows}, blocks of {block_rows}");
            }
        }
        let mut out = vec![0u8; 100];
        let failed = for_each_block_balanced(&mut out, 1, 10, |first, _| (first >= 30).then_some(first));
        // Blocks run in any order, but the blocks before the first failure all run.
        assert_eq!(failed, Some(30));
    }
}
