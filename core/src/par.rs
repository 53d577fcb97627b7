//! Data parallelism over row blocks: a pool of threads natively (rayon's, edo's own), one thread in the browser.
//!
//! The CPU path splits work into contiguous blocks of rows, so each thread streams its own
//! output: one block per core, or smaller ones handed to whichever thread is free. The calling
//! thread works on the blocks too and never waits for a pool thread that has not started (see
//! `run_blocks`).

#[cfg(native)]
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(native)]
use std::sync::{Arc, Mutex};

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
        let blocks: Vec<Slot<T, E>> = out.chunks_mut(rows_per * row_len).map(|b| Mutex::new((Some(b), None))).collect();
        run_blocks(&blocks, rows_per, n, &f)
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
        if threads > 1 {
            let blocks: Vec<Slot<T, E>> = out.chunks_mut(block_rows * row_len).map(|b| Mutex::new((Some(b), None))).collect();
            return run_blocks(&blocks, block_rows, threads, &f);
        }
    }
    let _ = rows;
    out.chunks_mut(block_rows * row_len.max(1)).enumerate().find_map(|(i, block)| f(i * block_rows, block))
}

/// A block's rows until a thread takes them, then what the block function returned.
#[cfg(native)]
type Slot<'a, T, E> = Mutex<(Option<&'a mut [T]>, Option<E>)>;

/// Runs `f(first_row, block)` on every block, on the calling thread and up to `threads − 1` of the
/// pool's, each taking the next block not yet taken; returns the result of the lowest block that
/// returned `Some` (the blocks after it may not run; every block before it runs).
///
/// The caller starts on the blocks at once and never waits for a worker to wake: a worker woken
/// from sleep can take tens of microseconds to start on a virtual machine — longer than a batch of
/// 32 short texts takes on one thread — and a rayon scope would wait for it even when no block is
/// left. Here the caller, once no block is left, closes the call and waits only for the workers
/// already inside a block; a worker that starts later finds the call closed and touches nothing
/// of it. The closing handshake: a worker counts itself in (`active`) and then reads `closed`; the
/// caller sets `closed` and then reads `active` — both sequentially consistent, so either the
/// caller sees the worker or the worker sees the call closed.
#[cfg(native)]
fn run_blocks<T, E, F>(blocks: &[Slot<'_, T, E>], block_rows: usize, threads: usize, f: &F) -> Option<E>
where
    T: Send,
    E: Send,
    F: Fn(usize, &mut [T]) -> Option<E> + Sync,
{
    // The next block to hand out, and the lowest that failed: blocks past it are skipped.
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
    let collect = || blocks.iter().find_map(|b| b.lock().unwrap_or_else(|p| p.into_inner()).1.take());
    let Some(pool) = pool() else {
        work();
        return collect();
    };
    let work: &(dyn Fn() + Sync) = &work;
    // SAFETY: only the lifetime is erased. Workers call `work` only between counting themselves
    // into `active` and out of it, after reading `closed` as false; this function sets `closed`
    // and then waits for `active` to be 0 before it returns, so no call outlives `work` or the
    // blocks it borrows (see the handshake above).
    let erased: *const (dyn Fn() + Sync + 'static) = unsafe { std::mem::transmute::<*const (dyn Fn() + Sync + '_), _>(work) };
    let call = Arc::new(Call {
        work: erased,
        helpers: AtomicUsize::new(threads - 1),
        active: AtomicUsize::new(0),
        closed: AtomicBool::new(false),
        panic: Mutex::new(None),
    });
    // Workers lingering after the last call join this one at once, so jobs are spawned only for
    // the rest (a job per call regardless would pile up in the pool's queue while a worker
    // lingers through a stream of calls). A worker that stops lingering just after the count was
    // read leaves the call a helper short: the caller runs its blocks either way.
    *LATEST.lock().unwrap_or_else(|p| p.into_inner()) = Arc::downgrade(&call);
    CALLS.fetch_add(1, Ordering::Release);
    let lingering = LINGERING.load(Ordering::Acquire).min(threads - 1);
    for _ in lingering + 1..threads {
        let call = Arc::clone(&call);
        pool.spawn(move || {
            // Only a worker that took part lingers: a job that found its call full or closed
            // goes back to the pool at once.
            if call.run() {
                drop(call);
                linger();
            }
        });
    }
    // The caller's own share, whether or not a worker has started (a panic here still closes the
    // call before it unwinds, below).
    let own = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    call.closed.store(true, Ordering::SeqCst);
    let mut spins = 0u32;
    while call.active.load(Ordering::SeqCst) != 0 {
        // A worker is inside a block (at most one block's work): spin, then let others run.
        if spins < 1 << 10 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
    if let Err(panic) = own {
        std::panic::resume_unwind(panic);
    }
    if let Some(panic) = call.panic.lock().unwrap_or_else(|p| p.into_inner()).take() {
        std::panic::resume_unwind(panic);
    }
    collect()
}

/// How long a worker waits for the next call, spinning, before it goes back to the pool (where it
/// soon sleeps). Callers that come back within it — a Python loop of small batches, a server's
/// next request — find it awake: waking a sleeping thread took longer on a virtual machine than a
/// batch of 32 short texts, so such calls ran on the caller alone. (LLVM's and Intel's OpenMP
/// runtimes spin 200 ms by default, `KMP_BLOCKTIME`.)
#[cfg(native)]
const LINGER: std::time::Duration = std::time::Duration::from_micros(200);

/// The newest parallel call, for lingering workers to join, and how many calls there have been.
#[cfg(native)]
static LATEST: Mutex<std::sync::Weak<Call>> = Mutex::new(std::sync::Weak::new());
#[cfg(native)]
static CALLS: AtomicUsize = AtomicUsize::new(0);
/// Workers spinning in [`linger`] now, waiting for a call (not those inside one).
#[cfg(native)]
static LINGERING: AtomicUsize = AtomicUsize::new(0);

/// A worker's wait after its call (see [`LINGER`]): it joins each newer call that still wants a
/// helper, and goes back to the pool once none has come for `LINGER`.
#[cfg(native)]
fn linger() {
    // (Not a count yet: the first look joins a call made while this worker was in its last.)
    let mut seen = usize::MAX;
    let mut since = std::time::Instant::now();
    let mut spins = 0u32;
    LINGERING.fetch_add(1, Ordering::AcqRel);
    loop {
        let now = CALLS.load(Ordering::Acquire);
        if now != seen {
            seen = now;
            let call = LATEST.lock().unwrap_or_else(|p| p.into_inner()).upgrade();
            if let Some(call) = call {
                LINGERING.fetch_sub(1, Ordering::AcqRel);
                call.run();
                LINGERING.fetch_add(1, Ordering::AcqRel);
            }
            since = std::time::Instant::now();
            continue;
        }
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        // The clock is read now and then, not at every spin; past the first microseconds the
        // wait lets other threads of a busy machine run (on an idle core a yield returns at once).
        if spins.is_multiple_of(64) {
            let waited = since.elapsed();
            if waited > LINGER {
                LINGERING.fetch_sub(1, Ordering::AcqRel);
                return;
            }
            if waited > std::time::Duration::from_micros(20) {
                std::thread::yield_now();
            }
        }
    }
}

/// One parallel call as its workers see it (see [`run_blocks`]).
#[cfg(native)]
struct Call {
    /// The caller's work loop, its lifetime erased: called only while counted in `active`.
    work: *const (dyn Fn() + Sync + 'static),
    /// Workers the call may still take (its thread limit less the caller): a lingering worker and
    /// a spawned job both take one, so the call never has more threads than it asked for.
    helpers: AtomicUsize,
    /// Workers inside the call.
    active: AtomicUsize,
    /// Set by the caller once no block is left to hand out: a worker that has not started yet
    /// must not start.
    closed: AtomicBool,
    /// A worker's panic, for the caller to resume.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

// SAFETY: `work` points at a `Sync` closure, called from several threads only under the handshake
// of `run_blocks`.
#[cfg(native)]
unsafe impl Send for Call {}
#[cfg(native)]
unsafe impl Sync for Call {}

#[cfg(native)]
impl Call {
    /// A worker's part: the blocks left when it starts, unless the call is closed or has all the
    /// helpers it asked for. Whether it took part (the call was open and wanted it).
    fn run(&self) -> bool {
        if self.helpers.fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| h.checked_sub(1)).is_err() {
            return false;
        }
        self.active.fetch_add(1, Ordering::SeqCst);
        let open = !self.closed.load(Ordering::SeqCst);
        if open {
            // SAFETY: counted in `active` with the call open: the caller waits for us.
            let work = unsafe { &*self.work };
            if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
                *self.panic.lock().unwrap_or_else(|p| p.into_inner()) = Some(panic);
            }
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        open
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

    /// Calls of a few small blocks one after another, the pool's threads waking or not in time
    /// for each: every row once, in both splits.
    #[test]
    fn many_small_calls_cover_every_row_once() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for call in 0..3000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let (rows, block_rows) = ((state % 40) as usize, 1 + (state >> 8) as usize % 6);
            let mut out = vec![0u32; rows * 2];
            let visit = |first: usize, block: &mut [u32]| {
                for (j, row) in block.chunks_exact_mut(2).enumerate() {
                    row.iter_mut().for_each(|x| *x += (first + j) as u32 + 1);
                }
                None::<()>
            };
            if call % 2 == 0 {
                assert!(for_each_block_balanced(&mut out, 2, block_rows, visit).is_none());
            } else {
                assert!(for_each_chunk_mut(&mut out, 2, 1, visit).is_none());
            }
            for (i, row) in out.chunks_exact(2).enumerate() {
                assert_eq!(row, [i as u32 + 1; 2], "call {call}: {rows} rows, blocks of {block_rows}");
            }
        }
    }

    /// Blocks on the calling thread and on the pool's.
    #[cfg(native)]
    fn blocks_of(out: &mut [u32]) -> Vec<Slot<'_, u32, usize>> {
        out.chunks_mut(1).map(|b| Mutex::new((Some(b), None))).collect()
    }

    /// With every pool thread held until the call has returned, the caller runs all the blocks
    /// and returns: it does not wait for a worker that has not started. (Waiting would hold the
    /// call until the pool threads give up after a minute, and the check below fails.)
    #[test]
    #[cfg(native)]
    fn a_call_does_not_wait_for_a_worker_that_has_not_started() {
        use std::sync::mpsc;
        use std::time::Duration;
        let pool = pool().expect("the pool's threads start");
        let (release, released) = mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(released));
        let gave_up = Arc::new(AtomicBool::new(false));
        let (started, all_started) = mpsc::channel();
        let holders = pool.current_num_threads();
        for _ in 0..holders {
            let (released, gave_up, started) = (Arc::clone(&released), Arc::clone(&gave_up), started.clone());
            pool.spawn(move || {
                started.send(()).expect("the test waits");
                let wait = released.lock().unwrap_or_else(|p| p.into_inner()).recv_timeout(Duration::from_secs(60));
                if wait.is_err() {
                    gave_up.store(true, Ordering::SeqCst);
                }
            });
        }
        for _ in 0..holders {
            all_started.recv().expect("every pool thread is held");
        }
        let mut out = vec![0u32; 10];
        let caller = std::thread::current().id();
        let result = run_blocks(&blocks_of(&mut out), 1, 4, &|first, block: &mut [u32]| {
            assert_eq!(std::thread::current().id(), caller, "only the caller can run a block");
            block[0] = first as u32 + 1;
            (first == 7).then_some(first)
        });
        assert!(!gave_up.load(Ordering::SeqCst), "the call waited for the held pool");
        assert_eq!(result, Some(7));
        assert_eq!(out[..8], [1, 2, 3, 4, 5, 6, 7, 8]);
        for _ in 0..holders {
            release.send(()).expect("the holders wait");
        }
    }

    /// A worker lingering after a call joins later calls only while they want a helper: a call
    /// of one thread runs on its caller alone, however many workers linger.
    #[test]
    #[cfg(native)]
    fn lingering_workers_join_only_calls_that_want_a_helper() {
        let caller = std::thread::current().id();
        for _ in 0..100 {
            let mut warm = vec![0u32; 64];
            run_blocks(&blocks_of(&mut warm), 1, 2, &|_, _| None::<usize>);
            let mut out = vec![0u32; 6];
            let result = run_blocks(&blocks_of(&mut out), 1, 1, &|first, block: &mut [u32]| {
                assert_eq!(std::thread::current().id(), caller, "a lingering worker joined a call of one thread");
                std::thread::sleep(std::time::Duration::from_micros(30));
                block[0] = first as u32 + 1;
                None::<usize>
            });
            assert_eq!((result, out), (None, vec![1, 2, 3, 4, 5, 6]));
        }
    }

    /// A stream of calls while a worker lingers leaves nothing queued behind it: a job given to
    /// the pool afterwards starts at once. (With a job spawned for every call regardless, 20 000
    /// calls left 20 000 jobs that each found their call over and lingered again: seconds.)
    #[test]
    #[cfg(native)]
    fn a_stream_of_calls_leaves_the_pool_free() {
        let Some(pool) = pool() else { return };
        for _ in 0..20_000 {
            let mut out = vec![0u32; 4];
            run_blocks(&blocks_of(&mut out), 1, 2, &|_, _| None::<usize>);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let start = std::time::Instant::now();
        pool.spawn(move || tx.send(()).expect("the test waits"));
        rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the pool runs the job");
        let waited = start.elapsed();
        assert!(waited < std::time::Duration::from_secs(1), "a job waited {waited:?} behind the stream's leftovers");
    }

    /// A block that panics on a pool thread panics the call, on the calling thread, once every
    /// worker has left the call; one that panics on the caller does too.
    #[test]
    #[cfg(native)]
    fn a_panic_in_a_block_reaches_the_caller() {
        let caller = std::thread::current().id();
        let on_worker = AtomicBool::new(false);
        // A worker takes part only when it starts in time: each call's caller blocks wait long
        // enough for it to, and the call is repeated until one did.
        for _ in 0..50 {
            let mut out = vec![0u32; 40];
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_blocks(&blocks_of(&mut out), 1, 2, &|_, _| {
                    if std::thread::current().id() != caller {
                        on_worker.store(true, Ordering::SeqCst);
                        panic!("a worker's block");
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    None::<usize>
                })
            }));
            if on_worker.load(Ordering::SeqCst) {
                let panic = run.expect_err("the worker's panic reaches the caller");
                assert_eq!(panic.downcast_ref::<&str>(), Some(&"a worker's block"));
                break;
            }
            assert!(run.is_ok());
        }
        assert!(on_worker.load(Ordering::SeqCst), "no pool thread took a block in 50 calls of 80 ms");
        let mut out = vec![0u32; 4];
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_blocks(&blocks_of(&mut out), 1, 2, &|_, _| -> Option<usize> { panic!("every block") })
        }));
        assert!(run.is_err());
    }
}
