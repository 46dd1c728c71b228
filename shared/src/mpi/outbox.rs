//! [`Outbox`]: non-blocking sends of owned or shared buffers
//! (`MPI_Isend`), kept until MPI is done with them (one shared buffer, a
//! weights frame, may go to several ranks at once: MPI only reads it). The learner's transport thread never
//! blocks on a send, so an actor that is itself sending cannot deadlock
//! it. rsmpi 0.8 ties a non-blocking send's buffer to a scope, which an
//! open-ended event loop cannot give; this owns the buffers instead.
#![allow(unsafe_code)]

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// Sends in flight, each with the buffer MPI reads from.
#[derive(Debug, Default)]
pub struct Outbox {
    pending: Vec<(Arc<Vec<u8>>, ffi::MPI_Request)>,
}

impl Outbox {
    /// Starts sending `bytes` to `dest` with `tag`; the buffer is kept
    /// until the send completes.
    pub fn send(
        &mut self,
        comm: &SimpleCommunicator,
        dest: i32,
        tag: i32,
        bytes: impl Into<Arc<Vec<u8>>>,
    ) {
        let bytes = bytes.into();
        let len = c_int::try_from(bytes.len()).expect("an MPI message is below 2 GiB");
        // SAFETY: the buffer's heap allocation does not move when the Arc
        // is moved into `pending`; it is never written to (shared, not
        // mutable), and not freed until MPI_Test/MPI_Wait report the
        // request complete, since `pending` holds a reference until then.
        let request = unsafe {
            let mut request = ffi::RSMPI_REQUEST_NULL;
            ffi::MPI_Isend(
                bytes.as_ptr() as *const c_void,
                len,
                ffi::RSMPI_UINT8_T,
                dest,
                tag,
                comm.as_raw(),
                &mut request,
            );
            request
        };
        self.pending.push((bytes, request));
    }

    /// Frees the buffers of completed sends; returns how many are still
    /// in flight.
    pub fn progress(&mut self) -> usize {
        self.pending.retain_mut(|(_, request)| {
            let mut done: c_int = 0;
            // SAFETY: `request` is a live request started by `send`; a
            // completed one is set to MPI_REQUEST_NULL by MPI_Test.
            unsafe { ffi::MPI_Test(request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
            done == 0
        });
        self.pending.len()
    }

    /// Waits for every send in flight.
    pub fn flush(&mut self) {
        for (_, request) in &mut self.pending {
            // SAFETY: as in `progress`.
            unsafe { ffi::MPI_Wait(request, ffi::RSMPI_STATUS_IGNORE) };
        }
        self.pending.clear();
    }
}

impl Drop for Outbox {
    /// A buffer is never freed under a send in flight.
    fn drop(&mut self) {
        self.flush();
    }
}
