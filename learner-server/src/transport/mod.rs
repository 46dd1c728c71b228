//! Transports as the learner sees them: whatever carries actors' messages
//! (QUIC, in-process channels, MPI) runs a [`session::Session`] per
//! actor, which hands them to the active run through its
//! [`Intake`](rlfleet_run::vocab::Intake) and
//! delivers the run's answers. Transports know nothing of workflows: a run
//! is an `Intake`, and what stands behind it (the run thread, `seed`'s
//! inference front, the `rma` pools) is the workflow's business.

use rlfleet_run::metrics::Metrics;
use rlfleet_shared::wire::{Message, WeightsFrames, take_weights};
use std::sync::Arc;

pub mod inproc;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod quic;
pub mod session;
#[cfg(test)]
mod tests;

/// Takes the weights out of an `Ack` or `Welcome` going to an actor over
/// `transport` (one that encodes) and returns the version's shared weights
/// frame to send before the message, encoded at most once per version.
/// Counted in the metrics.
fn weights_frame(
    frames: &WeightsFrames,
    metrics: &Metrics,
    transport: &str,
    msg: &mut Message,
) -> Option<Arc<Vec<u8>>> {
    let w = take_weights(msg)?;
    let (frame, encoded) = frames.frame(&w);
    if encoded {
        metrics.weights_frames_encoded.inc();
    }
    metrics.weights_sent.with_label_values(&[transport]).inc();
    Some(frame)
}
