//! Transports as the learner sees them: whatever carries actors' messages
//! (QUIC, in-process channels, MPI) runs a [`session::Session`] per
//! actor, which hands them to the active run through its
//! [`Intake`](crate::vocab::Intake) and
//! delivers the run's answers. Transports know nothing of workflows: a run
//! is an `Intake`, and what stands behind it (the run thread, `seed`'s
//! inference front, the `rma` pools) is the workflow's business.

pub mod inproc;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod quic;
pub mod session;
#[cfg(test)]
mod tests;
