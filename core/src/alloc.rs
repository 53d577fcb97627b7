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
pub fn zeroed<T: bytemuck::Zeroable>(len: usize, what: &'static str) -> Result<Vec<T>, Error> {
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
        let mut buf = Vec::from_raw_parts(ptr, len, len);
        advise_huge_pages(&mut buf);
        Ok(buf)
    }
}

/// Asks Linux to back the whole 2 MiB pages inside `buf` with transparent huge pages
/// (`MADV_HUGEPAGE`), for buffers of 4 MiB or more; best called before the pages are first
/// written. A hint: refused or not, nothing changes but speed.
#[cfg(target_os = "linux")]
pub(crate) fn advise_huge_pages<T>(buf: &mut [T]) {
    const HUGE: usize = 2 << 20;
    let (ptr, bytes) = (buf.as_mut_ptr() as usize, std::mem::size_of_val(buf));
    if bytes < 2 * HUGE {
        return;
    }
    let start = ptr.next_multiple_of(HUGE);
    let end = (ptr + bytes) / HUGE * HUGE;
    if end > start {
        // SAFETY: madvise with MADV_HUGEPAGE changes no memory contents; the range is inside
        // `buf` and starts on a page.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn advise_huge_pages<T>(_buf: &mut [T]) {}

#[cfg(test)]
pub(crate) mod tests {
    use crate::Error;

    #[test]
    fn buffers_too_large_for_memory_are_errors() {
        assert_eq!(super::zeroed::<u32>(15, "x").unwrap(), vec![0; 15]);
        assert!(super::zeroed::<f32>(0, "x").unwrap().is_empty());
        // A size past isize, and (64-bit) one past any address space (4 EiB).
        #[cfg(target_pointer_width = "64")]
        let lens = [1 << 62, 1 << 60];
        #[cfg(not(target_pointer_width = "64"))]
        let lens = [usize::MAX / 2];
        for len in lens {
            assert!(matches!(super::zeroed::<f32>(len, "x"), Err(Error::HostOutOfMemory { what: "x", .. })), "{len}");
        }
    }

    /// Whether the mapping that holds `addr` is advised for huge pages (the `hg` flag in
    /// `/proc/self/smaps`); `None` where this kernel, sandbox or emulator does not say (no
    /// transparent huge pages, no `VmFlags` in smaps, or an emulator that ignores the advice).
    #[cfg(target_os = "linux")]
    pub(crate) fn huge_pages_advised(addr: usize) -> Option<bool> {
        // qemu-user (the aarch64 tests' runner sets EDO_EMULATED) takes madvise and does nothing.
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() || std::env::var_os("EDO_EMULATED").is_some() {
            return None;
        }
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().and_then(|r| r.split_once('-'));
            if let Some((Ok(start), Ok(end))) = range.map(|(a, b)| (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))) {
                inside = (start..end).contains(&addr);
            } else if let Some(flags) = line.strip_prefix("VmFlags:").filter(|_| inside) {
                return Some(flags.split_whitespace().any(|f| f == "hg"));
            }
        }
        assert!(!smaps.contains("VmFlags:"), "no mapping holds {addr:#x}");
        None
    }

    /// A buffer of 16 MiB is advised for transparent huge pages: the mapping that holds its
    /// middle carries the `hg` flag in `/proc/self/smaps`.
    #[cfg(target_os = "linux")]
    #[test]
    fn large_buffers_ask_for_huge_pages() {
        let large = super::zeroed::<u32>(4 << 20, "x").unwrap();
        match huge_pages_advised(large.as_ptr() as usize + (8 << 20)) {
            Some(advised) => assert!(advised),
            None => eprintln!("SKIPPED: this kernel or sandbox does not list huge-page advice"),
        }
    }
}
