//! The experience workflows' conversation: an actor's [`Experience`]
//! batches (or [`WorkRequest`]s) and the learner's [`Ack`]s, in order.

use super::handshake::{EpisodeStart, WeightsMsg};
use rkyv::{Archive, Deserialize, Serialize};

/// Experience as per-env runs of steps, each observation once: a run of
/// `T` steps carries `T + 1` observations — the one its first action was
/// chosen for, then the one each step led to. A run ends where its episode
/// ends or where the batch does; an env that starts another episode in the
/// same batch starts another run; a run that continues in the next batch
/// starts there with the observation this one ended on. Observations
/// travel as f32 (`obs`) or, in a run whose env's observations are bytes
/// (`Welcome.obs_u8`), as those bytes (`obs_u8`); the other is empty. The
/// columns hold the runs one after another.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Steps {
    pub runs: Vec<StepRun>,
    /// `Σ (steps + 1) × obs_dim` values.
    pub obs: Vec<f32>,
    pub obs_u8: Vec<u8>,
    /// `Σ steps × action_dim` values.
    pub actions: Vec<f32>,
    /// `Σ steps` values.
    pub rewards: Vec<f32>,
    /// The log-probability of each step's action under the weights that
    /// chose it (a density for a continuous action), `Σ steps` values; or
    /// empty, from a policy that gives none (epsilon-greedy). PPO and
    /// IMPALA weigh each step by it.
    pub logp: Vec<f32>,
    /// With a recurrent core: the policy core's state each run's first
    /// action was chosen from, `runs × state_len` values; or empty. PPO
    /// and IMPALA run their policy from it where the run starts their
    /// trajectory.
    pub states: Vec<f32>,
}

/// One run of [`Steps`]: `steps` steps of `env` in `episode`.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepRun {
    pub env: u32,
    pub episode: u64,
    /// At least 1.
    pub steps: u32,
    /// The episode's step count at the run's first observation (0: the
    /// observation `reset` gave).
    pub first: u32,
    /// How the run's last step left the episode: [`RUN_GOES_ON`],
    /// [`RUN_TERMINATED`] (no bootstrap from the final observation) or
    /// [`RUN_TRUNCATED`] (the final observation bootstraps).
    pub end: u8,
}

/// [`StepRun::end`]: the episode goes on after the run.
pub const RUN_GOES_ON: u8 = 0;
/// [`StepRun::end`]: the run's last step ended the episode in a terminal
/// state.
pub const RUN_TERMINATED: u8 = 1;
/// [`StepRun::end`]: the run's last step ended the episode by a time
/// limit.
pub const RUN_TRUNCATED: u8 = 2;

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
/// key and is never trained twice. Its steps are shared: the actor keeps
/// the batch until it is acknowledged, and in process the learner reads
/// the same steps (a clone copies no step).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Experience {
    pub actor_id: String,
    pub session_id: u64,
    pub seq: u64,
    /// Version of the weights that chose the actions.
    pub policy_version: u64,
    pub steps: std::sync::Arc<Steps>,
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

/// Weights on their way on a QUIC stream of their own: the version and
/// the stream's id. Streams are opened in the order of their versions, and
/// a newer one resets the older one's if it is still being sent.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightsApart {
    pub version: u64,
    pub stream: u64,
}

/// Reply to `Experience` and `WorkRequest`.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Ack {
    pub seq: u64,
    /// The batch was already trained on (a resend): it was not used again.
    pub duplicate: bool,
    /// Newer weights than the actor's, if any.
    pub weights: Option<WeightsMsg>,
    /// Newer weights sent apart from this `Ack` (over QUIC, on a stream of
    /// their own, so that their lost datagrams do not hold it back).
    pub weights_apart: Option<WeightsApart>,
    pub epsilon: f32,
    pub starts: Vec<EpisodeStart>,
    /// The actor's pool on the learner is full (`rma` with overflow =
    /// `reject`, `rma-queue-pop-all`): the batch was not taken and nothing
    /// in it was counted; send it again.
    pub full: bool,
}
