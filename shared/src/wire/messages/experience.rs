//! The experience workflows' conversation: an actor's [`Experience`]
//! batches (or [`WorkRequest`]s) and the learner's [`Ack`]s, in order.

use super::handshake::{EpisodeStart, WeightsMsg};
use rkyv::{Archive, Deserialize, Serialize};

/// A batch of transitions, column by column. Observations travel as f32
/// (`obs`, `next_obs`) or, in a run whose env's observations are uint8
/// (`Welcome.obs_u8`), as those bytes (`obs_u8`, `next_obs_u8`): a quarter
/// of the bandwidth. The other pair is empty.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Transitions {
    pub obs: Vec<f32>,
    pub actions: Vec<f32>,
    pub rewards: Vec<f32>,
    pub next_obs: Vec<f32>,
    pub obs_u8: Vec<u8>,
    pub next_obs_u8: Vec<u8>,
    pub terminated: Vec<u8>,
    /// The episode each transition belongs to.
    pub episode: Vec<u64>,
}

/// An episode that ended on an actor.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct EpisodeResult {
    pub episode: u64,
    pub env: u32,
    pub ret: f64,
    pub length: u32,
}

/// An exception an actor's env raised (a Python env): the episode it was
/// playing is abandoned (its unsent steps dropped) and the env rebuilt; the
/// learner re-issues the episode.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct EnvFaultReport {
    pub episode: u64,
    pub env: u32,
    /// Exception type, message and last traceback frame.
    pub error: String,
}

/// Experience from an actor (`async`, `sync`). `(actor_id, session_id,
/// seq)` identifies it: a batch resent after a reconnect keeps its original
/// key and is never trained twice.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Experience {
    pub actor_id: String,
    pub session_id: u64,
    pub seq: u64,
    /// Version of the weights that chose the actions.
    pub policy_version: u64,
    pub transitions: Transitions,
    pub finished: Vec<EpisodeResult>,
    /// Episodes abandoned because their env raised.
    pub faults: Vec<EnvFaultReport>,
    /// Environments that need an episode.
    pub idle_envs: Vec<u32>,
    /// Every env of the actor is idle after this batch: if the learner
    /// has no episode to give it, this is its end sentinel
    /// (`rma-queue-pop-all`).
    pub last: bool,
}

/// "Give me work" (the experience workflows): the actor has envs with
/// nothing to play and no transitions to send. Answered with an `Ack`, in
/// order with its batches, whose sequence numbers it shares.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct WorkRequest {
    pub actor_id: String,
    pub session_id: u64,
    pub seq: u64,
    /// Episodes abandoned because their env raised.
    pub faults: Vec<EnvFaultReport>,
    /// Environments that need an episode.
    pub idle_envs: Vec<u32>,
    /// Every env of the actor is idle: if the learner has no episode to
    /// give it, this is its end sentinel (`rma-queue-pop-all`).
    pub last: bool,
}

/// Reply to `Experience` and `WorkRequest`.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Ack {
    pub seq: u64,
    /// The batch was already trained on (a resend): it was not used again.
    pub duplicate: bool,
    /// Newer weights than the actor's, if any.
    pub weights: Option<WeightsMsg>,
    pub epsilon: f32,
    pub starts: Vec<EpisodeStart>,
    /// The actor's pool on the learner is full (`rma` with overflow =
    /// `reject`, `rma-queue-pop-all`): the batch was not taken and nothing
    /// in it was counted; send it again.
    pub full: bool,
}
