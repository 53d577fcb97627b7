//! Fallible allocation of zeroed buffers: a table or an output too large for memory is
//! [`Error::HostOutOfMemory`], not an aborted process (or, in a browser, an aborted module).

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
        Ok(Vec::from_raw_parts(ptr, len, len))
    }
}

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
}
