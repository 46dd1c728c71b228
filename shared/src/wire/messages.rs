//! The message types. They are an IPC boundary: plain data, no behaviour.

use crate::config::{AgentKind, WorkflowKind};
use rkyv::{Archive, Deserialize, Serialize};

/// One frame's content.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
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
}

impl Message {
    /// A short name for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Hello(_) => "hello",
            Message::Welcome(_) => "welcome",
            Message::Observations(_) => "observations",
            Message::Actions(_) => "actions",
            Message::Experience(_) => "experience",
            Message::Ack(_) => "ack",
            Message::Stop(_) => "stop",
            Message::Error(_) => "error",
            Message::WorkRequest(_) => "work request",
        }
    }
}

/// First message of every connection, actor to learner.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Hello {
    pub protocol: u32,
    pub software: String,
    /// Stable across reconnects of one actor process.
    pub actor_id: String,
    /// Chosen afresh at every connect.
    pub session_id: u64,
    /// The shared secret, when the learner is configured with one.
    pub token: String,
    /// How many environments this actor can run.
    pub env_capacity: u32,
}

/// A weights publication: version and raw flat f32 parameters (shared:
/// every acknowledgement that carries one version holds the same copy).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct WeightsMsg {
    pub version: u64,
    pub data: std::sync::Arc<[f32]>,
}

/// "Environment `env` now plays episode `episode`, reset with `seed`."
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpisodeStart {
    pub env: u32,
    pub episode: u64,
    pub seed: u64,
}

/// The assignment, learner to actor, in reply to `Hello` once a run is
/// active.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Welcome {
    pub run_id: String,
    pub workflow: WorkflowKind,
    /// The env's id as the run config names it (built in, `gymnasium:` or
    /// `python:`); a Python env is built with the three fields below.
    pub env_id: String,
    /// Keyword arguments for the Python env, as a JSON object (empty: none).
    pub env_kwargs: String,
    /// `module:attr` wrappers applied to the Python env in order.
    pub env_wrappers: Vec<String>,
    /// Absolute folders put in front of the actor's `sys.path`.
    pub python_path: Vec<String>,
    pub obs_dim: u32,
    /// The observation's shape before flattening (its product is `obs_dim`).
    pub obs_shape: Vec<u32>,
    /// The env's observations are uint8 (images): experience carries them
    /// as bytes (`Transitions::obs_u8`).
    pub obs_u8: bool,
    /// Scalars per action (1 for a discrete index).
    pub action_dim: u32,
    /// Discrete actions: how many (0: a continuous `Box`).
    pub action_n: u32,
    /// The agent, and its network's hidden layer widths.
    pub agent: AgentKind,
    pub hidden: Vec<u32>,
    /// The Q-network has a dueling head (one more output, the state value,
    /// first).
    pub dueling: bool,
    /// The convolutional torso before `hidden` (`None`: an MLP).
    pub torso: Option<TorsoMsg>,
    /// The policy network as an ONNX model whose weights are its `params`
    /// input (`rlfleet_shared::onnx`), for actors that infer with ONNX
    /// Runtime.
    pub onnx: Vec<u8>,
    /// Environments the actor runs (at most its capacity).
    pub n_envs: u32,
    /// Seeds the actor's exploration.
    pub seed: u64,
    /// `async`: send a batch every this many steps (or at an episode end).
    pub batch_step_frequency: u32,
    /// `sync`: steps per round.
    pub steps_per_round: u32,
    /// `distributed.env_step_timeout_secs` (0: none).
    pub env_step_timeout_secs: f64,
    /// Batches the actor may have sent without seeing their `Ack` (1: wait
    /// for each reply, as `async` does; more for `nb-async`,
    /// `async-window` and the `rma` workflows).
    pub in_flight: u32,
    /// Exploration the actor uses until the next reply: epsilon for a
    /// Q-network, the Gaussian noise std (half-range units) for a tanh
    /// policy head.
    pub epsilon: f32,
    /// Initial weights (none for `seed`: they never leave the learner).
    pub weights: Option<WeightsMsg>,
    pub starts: Vec<EpisodeStart>,
}

/// A convolutional torso (`rlfleet_shared::nets::ConvTorso`) on the wire;
/// whether its input is bytes follows `Welcome.obs_u8`.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TorsoMsg {
    /// `[channels, height, width]` as the network sees the image.
    pub input: [u32; 3],
    /// Observations arrive as `[height, width, channels]`.
    pub channels_last: bool,
    /// IMPALA's residual stacks (else plain convolutions).
    pub impala: bool,
    /// Per layer: output channels, kernel, stride.
    pub layers: Vec<[u32; 3]>,
}

impl TorsoMsg {
    pub fn new(t: &crate::nets::ConvTorso) -> TorsoMsg {
        TorsoMsg {
            input: t.input.map(|d| d as u32),
            channels_last: t.channels_last,
            impala: t.kind == crate::nets::TorsoKind::Impala,
            layers: t
                .layers
                .iter()
                .map(|l| [l.out, l.kernel, l.stride].map(|d| d as u32))
                .collect(),
        }
    }

    /// The torso, refused by name when its layers do not fit its image.
    pub fn torso(&self, bytes: bool) -> Result<crate::nets::ConvTorso, String> {
        let t = crate::nets::ConvTorso {
            input: self.input.map(|d| d as usize),
            channels_last: self.channels_last,
            bytes,
            kind: if self.impala {
                crate::nets::TorsoKind::Impala
            } else {
                crate::nets::TorsoKind::Plain
            },
            layers: self
                .layers
                .iter()
                .map(|&[out, kernel, stride]| crate::nets::ConvLayer {
                    out: out as usize,
                    kernel: kernel as usize,
                    stride: stride as usize,
                })
                .collect(),
        };
        t.check()?;
        Ok(t)
    }
}

/// SEED request: one observation per environment, with the outcome of the
/// previous action.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Observations {
    pub seq: u64,
    /// `n_envs * obs_dim` values; for a finished env, its final observation.
    pub obs: Vec<f32>,
    /// The same as bytes instead, in a run whose observations are uint8
    /// (`Welcome.obs_u8`; `obs` is empty then).
    pub obs_u8: Vec<u8>,
    /// Reward of the previous action, per env.
    pub rewards: Vec<f32>,
    /// [`super::flags`] per env.
    pub flags: Vec<u8>,
    /// Episodes abandoned because their env raised (the env is idle now).
    pub faults: Vec<EnvFaultReport>,
}

/// SEED reply: one action per environment, and new episodes for the envs
/// whose episode ended.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Actions {
    pub seq: u64,
    pub policy_version: u64,
    /// `n_envs * action_dim` values (ignored for finished or idle envs).
    pub actions: Vec<f32>,
    pub starts: Vec<EpisodeStart>,
}

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

impl Welcome {
    /// Actions are discrete indices.
    pub fn discrete_actions(&self) -> bool {
        self.action_n > 0
    }

    /// The env this welcome asks the actor to run, with its Python options.
    pub fn env_source(&self) -> crate::env::EnvSource {
        crate::env::EnvSource {
            id: self.env_id.clone(),
            kwargs_json: self.env_kwargs.clone(),
            wrappers: self.env_wrappers.clone(),
            python_path: self.python_path.clone(),
        }
    }
}

impl Transitions {
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Appends one transition's observations, as bytes when `as_u8` (the
    /// env's uint8 values, exact), else as f32.
    pub fn push_obs(&mut self, obs: &[f32], next_obs: &[f32], as_u8: bool) {
        if as_u8 {
            self.obs_u8.extend(obs.iter().map(|&x| x as u8));
            self.next_obs_u8.extend(next_obs.iter().map(|&x| x as u8));
        } else {
            self.obs.extend_from_slice(obs);
            self.next_obs.extend_from_slice(next_obs);
        }
    }

    /// Row `i`'s observation and next observation as f32, into `obs` and
    /// `next` (`obs_dim` values each).
    pub fn obs_row(&self, i: usize, obs: &mut [f32], next: &mut [f32]) {
        let od = obs.len();
        if self.obs_u8.is_empty() {
            obs.copy_from_slice(&self.obs[i * od..(i + 1) * od]);
            next.copy_from_slice(&self.next_obs[i * od..(i + 1) * od]);
        } else {
            for (d, &x) in obs.iter_mut().zip(&self.obs_u8[i * od..(i + 1) * od]) {
                *d = f32::from(x);
            }
            for (d, &x) in next.iter_mut().zip(&self.next_obs_u8[i * od..(i + 1) * od]) {
                *d = f32::from(x);
            }
        }
    }

    /// Removes every transition of `episode` (`obs_dim` and `act_dim`
    /// values per row).
    pub fn drop_episode(&mut self, episode: u64, obs_dim: usize, act_dim: usize) {
        let keep: Vec<bool> = self.episode.iter().map(|&e| e != episode).collect();
        let rows = |v: &mut Vec<f32>, width: usize| {
            let mut i = 0;
            v.retain(|_| {
                let k = keep[i / width];
                i += 1;
                k
            });
        };
        rows(&mut self.obs, obs_dim);
        rows(&mut self.next_obs, obs_dim);
        let mut i = 0;
        self.obs_u8.retain(|_| {
            i += 1;
            keep[(i - 1) / obs_dim]
        });
        let mut i = 0;
        self.next_obs_u8.retain(|_| {
            i += 1;
            keep[(i - 1) / obs_dim]
        });
        rows(&mut self.actions, act_dim);
        rows(&mut self.rewards, 1);
        let mut i = 0;
        self.terminated.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        self.episode.retain(|&e| e != episode);
    }
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }
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

/// What an actor of the experience workflows sends and the learner
/// acknowledges in order: a batch of experience, or a request for work.
/// (Not a message itself: each variant is one.)
#[derive(Debug, Clone, PartialEq)]
// Batches are the common case: boxing one to shrink the rare work request
// would allocate per batch.
#[allow(clippy::large_enum_variant)]
pub enum Submission {
    Batch(Experience),
    Ask(WorkRequest),
}

impl Submission {
    /// The message it travels as.
    pub fn into_message(self) -> Message {
        match self {
            Submission::Batch(e) => Message::Experience(e),
            Submission::Ask(w) => Message::WorkRequest(w),
        }
    }

    /// `msg` as a submission; gives back any other message.
    pub fn from_message(msg: Message) -> Result<Submission, Box<Message>> {
        match msg {
            Message::Experience(e) => Ok(Submission::Batch(e)),
            Message::WorkRequest(w) => Ok(Submission::Ask(w)),
            other => Err(Box::new(other)),
        }
    }

    /// The name of the message it travels as (for logs and errors).
    pub fn kind(&self) -> &'static str {
        match self {
            Submission::Batch(_) => "experience",
            Submission::Ask(_) => "work request",
        }
    }

    /// `msg` is a submission.
    pub fn is_submission(msg: &Message) -> bool {
        matches!(msg, Message::Experience(_) | Message::WorkRequest(_))
    }

    pub fn batch(&self) -> Option<&Experience> {
        match self {
            Submission::Batch(e) => Some(e),
            Submission::Ask(_) => None,
        }
    }

    pub fn actor_id(&self) -> &str {
        match self {
            Submission::Batch(e) => &e.actor_id,
            Submission::Ask(w) => &w.actor_id,
        }
    }

    pub fn session_id(&self) -> u64 {
        match self {
            Submission::Batch(e) => e.session_id,
            Submission::Ask(w) => w.session_id,
        }
    }

    pub fn seq(&self) -> u64 {
        match self {
            Submission::Batch(e) => e.seq,
            Submission::Ask(w) => w.seq,
        }
    }

    pub fn idle_envs(&self) -> &[u32] {
        match self {
            Submission::Batch(e) => &e.idle_envs,
            Submission::Ask(w) => &w.idle_envs,
        }
    }

    /// Episodes the actor abandoned because their env raised.
    pub fn faults(&self) -> &[EnvFaultReport] {
        match self {
            Submission::Batch(e) => &e.faults,
            Submission::Ask(w) => &w.faults,
        }
    }

    pub fn last(&self) -> bool {
        match self {
            Submission::Batch(e) => e.last,
            Submission::Ask(w) => w.last,
        }
    }
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

/// The run ended (or the learner is shutting down).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Stop {
    pub reason: String,
    /// The learner is going away: do not wait for another run.
    pub shutdown: bool,
}

/// A refused message: what was wrong with it. The sender closes the stream
/// or connection after it.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ErrorMsg {
    pub code: ErrorCode,
    pub text: String,
}

/// The codes of [`ErrorMsg`].
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ErrorCode {
    /// The frame did not pass validation.
    BadFrame = 1,
    /// The length prefix is above the configured maximum.
    FrameTooLarge = 2,
    /// `Hello` carried another protocol version.
    ProtocolVersion = 3,
    /// Missing or wrong token.
    Unauthorized = 4,
    /// Array lengths do not fit the run's spaces.
    BadShape = 5,
    /// NaN or infinity in observations, rewards or actions.
    NonFinite = 6,
    /// A message that makes no sense at this point of the exchange.
    Unexpected = 7,
    /// An action outside the action space.
    BadAction = 8,
    /// The learner has as many actors as it takes (`actors.max_actors`).
    TooManyActors = 9,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::BadFrame,
        ErrorCode::FrameTooLarge,
        ErrorCode::ProtocolVersion,
        ErrorCode::Unauthorized,
        ErrorCode::BadShape,
        ErrorCode::NonFinite,
        ErrorCode::Unexpected,
        ErrorCode::BadAction,
        ErrorCode::TooManyActors,
    ];

    /// The label used in metrics.
    pub fn label(self) -> &'static str {
        match self {
            ErrorCode::BadFrame => "bad_frame",
            ErrorCode::FrameTooLarge => "frame_too_large",
            ErrorCode::ProtocolVersion => "protocol_version",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::BadShape => "bad_shape",
            ErrorCode::NonFinite => "non_finite",
            ErrorCode::Unexpected => "unexpected",
            ErrorCode::BadAction => "bad_action",
            ErrorCode::TooManyActors => "too_many_actors",
        }
    }

    pub fn message(self, text: impl Into<String>) -> Message {
        Message::Error(ErrorMsg {
            code: self,
            text: text.into(),
        })
    }
}
