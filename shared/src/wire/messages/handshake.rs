//! Joining a run: the actor's [`Hello`], the learner's [`Welcome`] (with
//! the network's description and weights), and what both carry.

use crate::config::{AgentKind, WorkflowKind};
use rkyv::{Archive, Deserialize, Serialize};

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
    /// The run (its id or name) this actor serves alone; empty: whichever
    /// run the daemon assigns it to.
    pub run: String,
    /// The actor leaves when its first run ends (`--once`): the daemon
    /// never moves it to another run.
    pub once: bool,
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
    /// as bytes (`Steps::obs_u8`).
    pub obs_u8: bool,
    /// The run's `frame_stack`: observations (`obs_dim`, `obs_shape`) are
    /// the env's last `frame_stack` frames, and requests and batches carry
    /// single frames (`obs_dim / frame_stack` values each).
    pub frame_stack: u32,
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
    /// The recurrent core before the output layer: `[units, layers]`
    /// (`[0, 0]`: none). Each env's state is zeroed at its episode's start.
    pub core: [u32; 2],
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
    /// The actor may go on acting with its weights while newer ones
    /// announced in an `Ack` (`Ack.weights_apart`) are still on their way,
    /// and load them when they land; else it waits for them. False for
    /// `sync` (a round acts with the round's weights) and for runs that
    /// bound the policy lag (`distributed.max_policy_lag`).
    pub weights_may_trail: bool,
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
    /// Its input is uint8 values 0..=255, scaled by 1/255 (boolean planes,
    /// bytes too on the wire, are not).
    pub scaled: bool,
    /// Per layer: output channels, kernel, stride.
    pub layers: Vec<[u32; 3]>,
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
