//! [`EnvComm`]: one env instance's communicator over the ranks of its env
//! group, as the env sees it ([`crate::env::Collective`]), with the
//! [`Abandon`] handle that gets a call stuck in one of its collectives out
//! (another rank raised before reaching it); and the grouping of a job's
//! actor ranks ([`env_groups`]).

#![allow(unsafe_code)]

use crate::env::Collective;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use std::os::raw::{c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A communicator an env owns (a duplicate of its group's, made by every
/// rank of the group together when the env is built). Its collectives
/// are non-blocking underneath: a call waiting in one returns by
/// unwinding (silently, no panic message) once [`Abandon::abandon`] is
/// called, leaving the operation and its buffers to MPI.
pub struct EnvComm {
    comm: SimpleCommunicator,
    abandoned: Arc<AtomicBool>,
}

/// Gets the calls of one env's collectives out (see [`EnvComm`]): for a
/// Python env, those made through the `comm` it was given too.
#[derive(Debug, Clone)]
pub struct Abandon {
    flag: Arc<AtomicBool>,
    handle: i32,
}

/// The payload a call unwinds with when its env is abandoned.
#[derive(Debug)]
pub struct Abandoned;

// SAFETY: MPI runs at MPI_THREAD_MULTIPLE (`super::init`), so a
// communicator may be used from any one thread at a time; an env is used
// by one thread at a time, and `EnvComm` is not `Sync`.
unsafe impl Send for EnvComm {}

impl std::fmt::Debug for EnvComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvComm")
            .field("rank", &self.comm.rank())
            .field("size", &self.comm.size())
            .finish()
    }
}

impl EnvComm {
    pub fn new(comm: SimpleCommunicator) -> (EnvComm, Abandon) {
        let flag = Arc::new(AtomicBool::new(false));
        // SAFETY: converts a valid communicator handle; no memory is touched.
        let handle = unsafe { ffi::MPI_Comm_c2f(comm.as_raw()) };
        let abandon = Abandon {
            flag: flag.clone(),
            handle,
        };
        (
            EnvComm {
                comm,
                abandoned: flag,
            },
            abandon,
        )
    }

    /// Waits for `request` (whose buffers `keep` holds), or unwinds once
    /// abandoned, leaking `keep`: MPI may still write into it.
    fn wait<T>(&self, mut request: ffi::MPI_Request, keep: Box<T>) -> Box<T> {
        let mut backoff = super::Backoff::new(256, std::time::Duration::from_micros(100));
        loop {
            let mut done: c_int = 0;
            // SAFETY: `request` is an active request of this process.
            unsafe { ffi::MPI_Test(&mut request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
            if done != 0 {
                return keep;
            }
            if self.abandoned.load(Ordering::Relaxed) {
                Box::leak(keep);
                std::panic::resume_unwind(Box::new(Abandoned));
            }
            backoff.wait();
        }
    }
}

impl Abandon {
    /// Makes every collective of the env's communicator, now or later,
    /// give up.
    pub fn abandon(&self) {
        self.flag.store(true, Ordering::Relaxed);
        #[cfg(feature = "python")]
        crate::env::python::abandon_comm(self.handle);
    }
}

impl Collective for EnvComm {
    fn rank(&self) -> usize {
        self.comm.rank() as usize
    }

    fn size(&self) -> usize {
        self.comm.size() as usize
    }

    fn all_gather(&self, mine: &[f64]) -> Vec<f64> {
        let n = mine.len();
        let bufs = Box::new((mine.to_vec(), vec![0.0f64; n * self.size()]));
        let mut request = ffi::MPI_Request(std::ptr::null_mut());
        // SAFETY: the buffers live in `bufs` until the request completes
        // (or forever, leaked, if abandoned).
        unsafe {
            ffi::MPI_Iallgather(
                bufs.0.as_ptr() as *const c_void,
                n as c_int,
                ffi::RSMPI_DOUBLE,
                bufs.1.as_ptr() as *mut c_void,
                n as c_int,
                ffi::RSMPI_DOUBLE,
                self.comm.as_raw(),
                &mut request,
            )
        };
        self.wait(request, bufs).1
    }

    fn all_sum(&self, values: &mut [f64]) {
        let n = values.len();
        let bufs = Box::new((values.to_vec(), vec![0.0f64; n]));
        let mut request = ffi::MPI_Request(std::ptr::null_mut());
        // SAFETY: as in `all_gather`.
        unsafe {
            ffi::MPI_Iallreduce(
                bufs.0.as_ptr() as *const c_void,
                bufs.1.as_ptr() as *mut c_void,
                n as c_int,
                ffi::RSMPI_DOUBLE,
                ffi::RSMPI_SUM,
                self.comm.as_raw(),
                &mut request,
            )
        };
        values.copy_from_slice(&self.wait(request, bufs).1);
    }

    fn fortran_handle(&self) -> Option<i32> {
        // SAFETY: converts a valid communicator handle; no memory is touched.
        Some(unsafe { ffi::MPI_Comm_c2f(self.comm.as_raw()) })
    }
}

/// The actor ranks of a job as env groups of `k` consecutive ranks (in
/// world-rank order): each group's first rank leads. Fails, naming the
/// ranks, when a rank was started with another `--ranks-per-env` or the
/// ranks do not divide into groups of `k`.
pub fn env_groups(actors: &[(i32, u32)], k: u32) -> Result<Vec<Vec<i32>>, String> {
    if let Some((rank, theirs)) = actors.iter().find(|(_, r)| *r != k) {
        return Err(format!(
            "actor rank {rank} was started with --ranks-per-env {theirs}; the run says \
             ranks_per_env = {k} (give every `actor-client mpi` the run's value)"
        ));
    }
    let k = k.max(1) as usize;
    if !actors.len().is_multiple_of(k) {
        return Err(format!(
            "ranks_per_env = {k} splits the actor ranks into groups of {k}, and this job has \
             {} actor ranks (a multiple of {k} is needed)",
            actors.len()
        ));
    }
    Ok(actors
        .chunks(k)
        .map(|g| g.iter().map(|(r, _)| *r).collect())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_consecutive_ranks_and_disagreement_is_named() {
        let a = [(1, 2), (2, 2), (3, 2), (4, 2)];
        assert_eq!(env_groups(&a, 2).unwrap(), vec![vec![1, 2], vec![3, 4]]);
        let e = env_groups(&a[..3], 2).unwrap_err();
        assert!(e.contains("3 actor ranks"), "{e}");
        let e = env_groups(&[(1, 2), (2, 1)], 2).unwrap_err();
        assert!(
            e.contains("actor rank 2") && e.contains("--ranks-per-env 1"),
            "{e}"
        );
        assert_eq!(env_groups(&[(5, 1)], 1).unwrap(), vec![vec![5]]);
    }
}
