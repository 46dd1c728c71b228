//! The message types: an IPC boundary, so plain data — type definitions
//! and their derives, no behaviour (the tidy check holds it: no `impl` or
//! `fn` in this folder). One file per conversation: `handshake.rs`
//! (hello, welcome, weights), `experience.rs` (batches and their
//! acknowledgement), `seed.rs` (observations and actions), `control.rs`
//! (stop, decline and errors). What the types do is in the files beside this
//! folder.

mod control;
mod experience;
mod handshake;
mod seed;

pub use control::{Decline, ErrorCode, ErrorMsg, Stop};
pub use experience::{
    Ack, EnvFaultReport, EpisodeResult, Experience, RUN_GOES_ON, RUN_TERMINATED, RUN_TRUNCATED,
    StepRun, Steps, WeightsApart, WorkRequest,
};
pub use handshake::{EpisodeStart, Hello, TorsoMsg, WeightsMsg, Welcome};
pub use seed::{Actions, Observations};

use rkyv::{Archive, Deserialize, Serialize};

/// One frame's content.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "a Welcome goes out once per session; boxing it saves nothing that matters"
)]
pub enum Message {
    Hello(Hello),
    Welcome(Welcome),
    Observations(Observations),
    Actions(Actions),
    Experience(Experience),
    Ack(Ack),
    Stop(Stop),
    Error(ErrorMsg),
    WorkRequest(WorkRequest),
    /// The weights of the message in the next frame (an `Ack` or `Welcome`
    /// sent without them): a weights frame is encoded once per published
    /// version and the same bytes go to every actor.
    Weights(WeightsMsg),
    Decline(Decline),
}
