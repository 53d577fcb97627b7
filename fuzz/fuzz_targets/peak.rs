//! Counts the bytes a fuzz target holds, so a run can require that reading an input never holds
//! more than a stated multiple of the input's size (plus a fixed allowance for tables and
//! tokenizer state every input builds): what a header claims without the bytes to back it must
//! not be allocated.
//!
//! Every target includes this file (`#[path] mod peak;`) and wraps its body in [`bounded`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(live, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let live = LIVE.fetch_add(new_size - layout.size(), Relaxed) + new_size - layout.size();
                PEAK.fetch_max(live, Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` on `data` and panics (a libFuzzer crash) if it held more than `factor × data.len() +
/// allowance` bytes beyond what was live before it. `EDO_FUZZ_PEAK=1` prints each input's peak
/// and size instead, to measure a target.
pub fn bounded(data: &[u8], factor: usize, allowance: usize, f: impl FnOnce(&[u8])) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    f(data);
    let held = PEAK.load(Relaxed).saturating_sub(base);
    if std::env::var_os("EDO_FUZZ_PEAK").is_some() {
        eprintln!("peak {held} bytes for {} bytes of input", data.len());
        return;
    }
    let bound = factor.saturating_mul(data.len()).saturating_add(allowance);
    assert!(held <= bound, "held {held} bytes for {} bytes of input: more than {factor} × input + {allowance}", data.len());
}
