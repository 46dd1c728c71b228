//! [`Window`]: a one-sided MPI RMA window (`MPI_Win_allocate`) whose
//! lifetime is tied to the communicator it was made on, and [`Epoch`]: a
//! passive-target access epoch on one rank's part of it (`MPI_Win_lock` /
//! `MPI_Win_unlock`) with `Put`, `Get`, `Accumulate`, `Fetch_and_op` and
//! `Compare_and_swap`. Every operation is bounds-checked against the
//! target's size (learned at allocation) and completed (`MPI_Win_flush`)
//! before it returns, so the caller's buffers are free again and results
//! are ready; the lock is released when the epoch is dropped.
#![allow(unsafe_code)]

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;
use std::os::raw::{c_int, c_void};

/// One window over the ranks of a communicator.
pub struct Window<'c> {
    raw: ffi::MPI_Win,
    comm: &'c SimpleCommunicator,
    /// Bytes each rank exposes.
    sizes: Vec<usize>,
}

// SAFETY: MPI is initialised at MPI_THREAD_MULTIPLE (`super::init`), so a
// window may be used from whichever thread holds it; `&mut`-free methods
// only issue MPI calls, which that level allows from any thread.
unsafe impl Send for Window<'_> {}

impl std::fmt::Debug for Window<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("sizes", &self.sizes)
            .finish()
    }
}

impl<'c> Window<'c> {
    /// Collective over `comm`: every rank exposes `bytes` (zeroed) and
    /// learns what the others expose.
    pub fn allocate(comm: &'c SimpleCommunicator, bytes: usize) -> Window<'c> {
        let mut sizes = vec![0u64; comm.size() as usize];
        comm.all_gather_into(&(bytes as u64), &mut sizes[..]);
        let mut base: *mut u8 = std::ptr::null_mut();
        // SAFETY: MPI writes the window handle and the base address of
        // `bytes` bytes it allocated; the memory is zeroed before any
        // other rank may touch it (the barrier below).
        let raw = unsafe {
            let mut raw = ffi::RSMPI_WIN_NULL;
            ffi::MPI_Win_allocate(
                bytes as ffi::MPI_Aint,
                1,
                ffi::RSMPI_INFO_NULL,
                comm.as_raw(),
                &mut base as *mut *mut u8 as *mut c_void,
                &mut raw,
            );
            if bytes > 0 {
                std::ptr::write_bytes(base, 0, bytes);
            }
            raw
        };
        comm.barrier();
        Window {
            raw,
            comm,
            sizes: sizes.into_iter().map(|s| s as usize).collect(),
        }
    }

    pub fn comm(&self) -> &'c SimpleCommunicator {
        self.comm
    }

    /// Bytes `rank` exposes.
    pub fn size_of(&self, rank: i32) -> usize {
        self.sizes.get(rank as usize).copied().unwrap_or(0)
    }

    /// Opens a passive-target epoch on `rank` (exclusive: no other epoch
    /// on that rank overlaps it).
    pub fn lock(&self, rank: i32, exclusive: bool) -> Epoch<'_, 'c> {
        assert!(
            (0..self.sizes.len() as i32).contains(&rank),
            "rank {rank} is not in the window's communicator"
        );
        let kind = if exclusive {
            ffi::MPI_LOCK_EXCLUSIVE
        } else {
            ffi::MPI_LOCK_SHARED
        } as c_int;
        // SAFETY: a valid window and rank; unlocked in Epoch::drop.
        unsafe { ffi::MPI_Win_lock(kind, rank, 0, self.raw) };
        Epoch { win: self, rank }
    }
}

impl Drop for Window<'_> {
    /// Collective, like the allocation: every rank frees its window.
    fn drop(&mut self) {
        // SAFETY: no epoch outlives the window (they borrow it).
        unsafe { ffi::MPI_Win_free(&mut self.raw) };
    }
}

/// A locked rank of a window.
#[derive(Debug)]
pub struct Epoch<'w, 'c> {
    win: &'w Window<'c>,
    rank: i32,
}

impl Epoch<'_, '_> {
    fn check(&self, offset: usize, len: usize, align: usize) {
        let size = self.win.size_of(self.rank);
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= size),
            "RMA access of {len} bytes at {offset} is outside rank {}'s {size} bytes",
            self.rank
        );
        assert!(
            offset.is_multiple_of(align),
            "RMA offset {offset} is not aligned to {align}"
        );
    }

    fn flush(&self) {
        // SAFETY: a valid window with an epoch open on `rank`.
        unsafe { ffi::MPI_Win_flush(self.rank, self.win.raw) };
    }

    /// Writes `data` at `offset` of the target.
    pub fn put(&self, offset: usize, data: &[u8]) {
        self.check(offset, data.len(), 1);
        // SAFETY: in bounds (checked); `data` stays borrowed until the
        // flush completes the put.
        unsafe {
            ffi::MPI_Put(
                data.as_ptr() as *const c_void,
                data.len() as c_int,
                ffi::RSMPI_UINT8_T,
                self.rank,
                offset as ffi::MPI_Aint,
                data.len() as c_int,
                ffi::RSMPI_UINT8_T,
                self.win.raw,
            );
        }
        self.flush();
    }

    /// Reads `out.len()` bytes at `offset` of the target.
    pub fn get(&self, offset: usize, out: &mut [u8]) {
        self.check(offset, out.len(), 1);
        // SAFETY: in bounds (checked); `out` holds `out.len()` bytes.
        unsafe {
            self.get_raw(
                offset,
                out.as_mut_ptr().cast(),
                out.len(),
                ffi::RSMPI_UINT8_T,
            )
        }
    }

    /// Reads the `u64`s at `offset` (8-aligned).
    pub fn get_u64s(&self, offset: usize, out: &mut [u64]) {
        self.check(offset, 8 * out.len(), 8);
        // SAFETY: in bounds (checked); `out` holds `out.len()` u64s.
        unsafe {
            self.get_raw(
                offset,
                out.as_mut_ptr().cast(),
                out.len(),
                ffi::RSMPI_UINT64_T,
            )
        }
    }

    /// `MPI_Get` of `count` elements of `datatype` at `offset` into `out`,
    /// flushed.
    ///
    /// # Safety
    /// The range was checked against the window, and `out` is valid for
    /// `count` elements of `datatype` (it stays borrowed by the caller
    /// until the flush has completed the get).
    unsafe fn get_raw(
        &self,
        offset: usize,
        out: *mut c_void,
        count: usize,
        datatype: ffi::MPI_Datatype,
    ) {
        // SAFETY: as the caller promises.
        unsafe {
            ffi::MPI_Get(
                out,
                count as c_int,
                datatype,
                self.rank,
                offset as ffi::MPI_Aint,
                count as c_int,
                datatype,
                self.win.raw,
            );
        }
        self.flush();
    }

    /// Adds `values` element-wise to the `u64`s at `offset` (atomic per
    /// element with other accumulates).
    pub fn accumulate_u64s(&self, offset: usize, values: &[u64]) {
        self.check(offset, 8 * values.len(), 8);
        // SAFETY: in bounds; `values` borrowed until the flush.
        unsafe {
            ffi::MPI_Accumulate(
                values.as_ptr() as *const c_void,
                values.len() as c_int,
                ffi::RSMPI_UINT64_T,
                self.rank,
                offset as ffi::MPI_Aint,
                values.len() as c_int,
                ffi::RSMPI_UINT64_T,
                ffi::RSMPI_SUM,
                self.win.raw,
            );
        }
        self.flush();
    }

    /// Atomically adds `value` to the `u64` at `offset`; returns the value
    /// before.
    pub fn fetch_add_u64(&self, offset: usize, value: u64) -> u64 {
        self.check(offset, 8, 8);
        let mut before = 0u64;
        // SAFETY: in bounds; both buffers live until the flush.
        unsafe {
            ffi::MPI_Fetch_and_op(
                &value as *const u64 as *const c_void,
                &mut before as *mut u64 as *mut c_void,
                ffi::RSMPI_UINT64_T,
                self.rank,
                offset as ffi::MPI_Aint,
                ffi::RSMPI_SUM,
                self.win.raw,
            );
        }
        self.flush();
        before
    }

    /// Atomically replaces the `u64` at `offset` with `new` if it equals
    /// `expected`; returns the value before (equal to `expected` when
    /// swapped).
    pub fn compare_and_swap_u64(&self, offset: usize, expected: u64, new: u64) -> u64 {
        self.check(offset, 8, 8);
        let mut before = 0u64;
        // SAFETY: in bounds; all three buffers live until the flush.
        unsafe {
            ffi::MPI_Compare_and_swap(
                &new as *const u64 as *const c_void,
                &expected as *const u64 as *const c_void,
                &mut before as *mut u64 as *mut c_void,
                ffi::RSMPI_UINT64_T,
                self.rank,
                offset as ffi::MPI_Aint,
                self.win.raw,
            );
        }
        self.flush();
        before
    }
}

impl Drop for Epoch<'_, '_> {
    fn drop(&mut self) {
        // SAFETY: the epoch was opened by `Window::lock` on this rank.
        unsafe { ffi::MPI_Win_unlock(self.rank, self.win.raw) };
    }
}
