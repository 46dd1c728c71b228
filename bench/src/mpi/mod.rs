//! MPI benchmarks (feature `mpi`), each under real `mpirun`:
//!
//! - `rma`: the one-sided operations of [`rlfleet_shared::mpi::Window`] —
//!   each a whole passive-target epoch (lock, the operation, flush, unlock)
//!   from rank 1 on rank 0's window — and a mailbox deposit, against an
//!   8-byte two-sided ping-pong measured in the same job.
//! - `transports`: `async` and `rma` with 4 actors over MPI and over QUIC on
//!   this machine, the transport alone (DQN never trains: `learning_starts`
//!   is past the run's end): transitions/s and env steps/s, MPI against QUIC.
//! - `learners`: DQN trained by the multi-learner workflows on 2 learner
//!   ranks against their single-learner counterparts on 1: env steps/s
//!   and gradient steps/s.

mod learners;
mod rma;
mod transports;

pub use learners::learners;
pub use rma::{rma, rma_check, rma_ranks};
pub use transports::transports;

use std::process::Command;

pub(crate) fn mpirun() -> Command {
    let mut c = Command::new("mpirun");
    c.arg("--oversubscribe")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    c
}
