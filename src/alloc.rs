//! Fallible allocation of zeroed buffers: a table or an output too large for memory is
//! [`Error::HostOutOfMemory`], not an aborted process (or, in a browser, an aborted module).
//!
//! On Linux, buffers of 4 MiB or more ask for transparent huge pages (`MADV_HUGEPAGE`; many
//! kernels give them only to memory that asks). A gather reads rows at random all over a
//! table: with 4 KiB pages nearly every row of a table far larger than the TLB's reach costs a
//! page walk, with 2 MiB pages a table of a few GB fits the TLB. CPU gathers of 2 000 000 × 128
//! rows ran 1.05–1.57 × faster (docs/benchmarks.md, "FP8, the K-quants' scales and huge pages").
//! Tables mapped from files are file pages and keep the page size the kernel gives them.

use crate::Error;

/// `len` zeroed values, zeroed as `vec![0; len]` is: by the allocator, with fresh pages
/// untouched. `what` names the buffer in the error.
pub(crate) fn zeroed<T: bytemuck::Zeroable>(len: usize, what: &'static str) -> Result<Vec<T>, Error> {
    let bytes = (len as u128 * std::mem::size_of::<T>() as u128).min(u64::MAX as u128) as u64;
    let oom = Error::HostOutOfMemory { what, bytes };
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| oom.clone())?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: `layout` has a non-zero size; the pointer, when not null, is a fresh allocation of
    // `len` values of T from the global allocator with T's array layout, all bits zero, which
    // is a valid T (`Zeroable`): what `Vec::from_raw_parts` requires, length and capacity `len`.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut T;
        if ptr.is_null() {
            return Err(oom);
        }
        advise_huge_pages(ptr.cast(), layout.size());
        Ok(Vec::from_raw_parts(ptr, len, len))
    }
}

/// Asks Linux to back the whole 2 MiB pages inside `bytes` bytes from `ptr` with transparent huge
/// pages (`MADV_HUGEPAGE`), for buffers of 4 MiB or more. A hint: refused or not, nothing changes
/// but speed.
#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    const HUGE: usize = 2 << 20;
    if bytes < 2 * HUGE {
        return;
    }
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + bytes) / HUGE * HUGE;
    if end > start {
        // SAFETY: madvise with MADV_HUGEPAGE changes no memory contents; the range is inside the
        // allocation and starts on a page.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *mut u8, _bytes: usize) {}

#[cfg(test)]
mod tests {
    use crate::Error;

    #[test]
    fn buffers_too_large_for_memory_are_errors() {
        assert_eq!(super::zeroed::<u32>(15, "x").unwrap(), vec![0; 15]);
        assert!(super::zeroed::<f32>(0, "x").unwrap().is_empty());
        // A size past isize, and one past any address space (4 EiB).
        for len in [1 << 62, 1 << 60] {
            assert!(matches!(super::zeroed::<f32>(len, "x"), Err(Error::HostOutOfMemory { what: "x", .. })), "{len}");
        }
    }

    /// A buffer of 16 MiB is advised for transparent huge pages: the mapping that holds its
    /// middle carries the `hg` flag in `/proc/self/smaps`.
    #[cfg(target_os = "linux")]
    #[test]
    fn large_buffers_ask_for_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            eprintln!("SKIPPED: this kernel has no transparent huge pages");
            return;
        }
        // The VmFlags of the mapping that holds `addr`.
        let flags = |addr: usize| -> Vec<String> {
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let mut inside = false;
            for line in smaps.lines() {
                let range = line.split_whitespace().next().and_then(|r| r.split_once('-'));
                if let Some((Ok(start), Ok(end))) = range.map(|(a, b)| (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))) {
                    inside = (start..end).contains(&addr);
                } else if let Some(flags) = line.strip_prefix("VmFlags:").filter(|_| inside) {
                    return flags.split_whitespace().map(str::to_owned).collect();
                }
            }
            panic!("no mapping holds {addr:#x}");
        };
        if !std::fs::read_to_string("/proc/self/smaps").is_ok_and(|s| s.contains("VmFlags:")) {
            eprintln!("SKIPPED: /proc/self/smaps lists no VmFlags here");
            return;
        }
        let large = super::zeroed::<u32>(4 << 20, "x").unwrap();
        let middle = large.as_ptr() as usize + (8 << 20);
        assert!(flags(middle).iter().any(|f| f == "hg"), "{:?}", flags(middle));
    }
}
