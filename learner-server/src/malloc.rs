//! Keeps the C allocator from mapping and unmapping memory for every
//! mid-sized tensor.
//!
//! libtorch allocates each CPU tensor with the C allocator. glibc serves
//! an allocation above its mmap threshold (128 KiB at start) with a fresh
//! mapping, returned to the kernel when freed. A small network's update
//! frees and allocates a few dozen tensors of a parameter vector's size
//! (a MinAtar DQN: 206,000 floats, 0.8 MB) every step, and each one then
//! costs page faults and page zeroing. Raising the mmap threshold to
//! glibc's maximum (32 MiB) and the trim threshold above it keeps such
//! tensors in the heap, reused. Replay buffers and other large arrays
//! (above 32 MiB) are still mapped on their own.

/// Sets the thresholds (once, at a binary's start, before threads that
/// allocate tensors). Returns whether glibc took both; elsewhere a no-op
/// that returns false.
pub fn keep_tensors_in_the_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use libc::{M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, mallopt};
        // SAFETY: glibc's mallopt(3) only sets allocator parameters; both
        // values are in the ranges it documents (the mmap threshold at
        // most 32 MiB on 64-bit).
        #[allow(unsafe_code)]
        let ok = unsafe {
            mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1
        };
        ok
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    /// glibc takes both settings (this project builds and runs on glibc).
    #[test]
    fn glibc_takes_the_thresholds() {
        assert!(super::keep_tensors_in_the_heap());
    }
}
