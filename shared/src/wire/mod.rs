//! The wire protocol between actors and the learner: rkyv messages, one per
//! length-prefixed frame, validated with rkyv's checked access before use.
//!
//! Every connection starts with [`Hello`] (which carries
//! [`PROTOCOL_VERSION`]); after that the actor drives a strict request/reply
//! exchange on one bidirectional stream: `Observations -> Actions` (seed) or
//! `Experience -> Ack` (the others). Replies come in request order; an actor
//! may have up to `Welcome::in_flight` experience requests outstanding. Any
//! reply may be [`Stop`] or [`ErrorMsg`] instead. Over MPI an `Ack` or
//! `Welcome` that carries weights, and over QUIC a `Welcome`, travels as a
//! [`Message::Weights`] frame and then the message without them
//! ([`WeightsFrames`]); [`read_frame`] and [`WeightsRejoin`] put them back
//! together. Over QUIC an `Ack`'s weights go alone on a unidirectional
//! stream of their own ([`read_weights`]), announced in the `Ack`
//! ([`WeightsApart`]).

mod frame;
mod messages;
mod names;
mod steps;
mod submission;
mod weights;
mod welcome;

pub use frame::{FrameError, decode, encode, encode_into, read_frame, read_weights, write_frame};
pub use messages::*;
pub use steps::StepRef;
pub use submission::Submission;
pub use weights::{WeightsFrames, WeightsRejoin, attach_weights, take_weights, weights_of};
pub use welcome::core_msg;

/// Bumped whenever a message changes shape; a peer with another version is
/// refused at `Hello` with [`ErrorCode::ProtocolVersion`].
pub const PROTOCOL_VERSION: u32 = 16;

/// The default largest frame accepted (64 MiB), length prefix excluded.
pub const DEFAULT_MAX_FRAME_BYTES: u32 = 64 << 20;

/// The software version sent in `Hello` (for logs and `GET /v1/actors`).
pub const SOFTWARE_VERSION: &str = concat!("rlfleet ", env!("CARGO_PKG_VERSION"));

/// Bits of [`Observations::flags`], one byte per environment.
pub mod flags {
    /// The previous action ended the episode in a terminal state.
    pub const TERMINATED: u8 = 1;
    /// The previous action ended the episode by the time limit.
    pub const TRUNCATED: u8 = 2;
    /// `obs` is the first observation of an episode (no reward attached).
    pub const FRESH: u8 = 4;
    /// The environment has no episode: its `obs` is ignored.
    pub const IDLE: u8 = 8;
}

#[cfg(test)]
mod tests;
