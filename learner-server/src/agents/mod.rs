//! Agents: networks and optimizers in tch behind the [`Agent`] trait, and the
//! [`Policy`] trait for acting from published weights (the evaluator now;
//! actor-side policies later).

mod a2c;
mod adam;
mod dqn;
mod probe;
mod q_policy;

pub use a2c::A2c;
pub use adam::Adam;
pub use dqn::Dqn;
pub use probe::{PROBE_HEADER, Probe};
pub use q_policy::GreedyQPolicy;

use crate::replay::Transition;
use rlfleet_shared::config::{AgentKind, RunConfig};
use rlfleet_shared::env::EnvSpec;
use tch::Device;

/// A weights publication: a version that only grows, and the parameters as
/// raw flat f32 (what goes on the wire).
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    pub version: u64,
    pub data: Vec<f32>,
}

/// A named f32 tensor of an agent's state, for checkpoints.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Everything needed to resume an agent: tensors (networks, optimizer
/// moments) and counters.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentState {
    pub tensors: Vec<NamedTensor>,
    pub train_steps: u64,
    pub version: u64,
    pub optimizer_steps: u64,
}

impl AgentState {
    pub fn tensor(&self, name: &str) -> Result<&NamedTensor, AgentError> {
        self.tensors
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| AgentError::MissingTensor(name.into()))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("weights have {got} values, this network has {expected}")]
    WeightsLength { expected: usize, got: usize },
    #[error("agent state has no tensor `{0}`")]
    MissingTensor(String),
    #[error("weights contain a non-finite value at index {0}")]
    NonFinite(usize),
}

/// A learner-side algorithm.
pub trait Agent: Send {
    /// Picks an action for one observation, exploring as the schedule says
    /// at `env_steps`. Writes the action into `action` (a discrete index is
    /// written as `action[0]`).
    fn act(&mut self, obs: &[f32], env_steps: u64, action: &mut [f32]);
    /// [`Agent::act`] for `n` observations at once (one forward pass where
    /// the agent can); `obs` holds `n` rows, `actions` receives `n` rows.
    fn act_batch(&mut self, obs: &[f32], n: usize, env_steps: u64, actions: &mut [f32]) {
        let (od, ad) = (obs.len() / n.max(1), actions.len() / n.max(1));
        for i in 0..n {
            self.act(
                &obs[i * od..(i + 1) * od],
                env_steps,
                &mut actions[i * ad..(i + 1) * ad],
            );
        }
    }
    /// The exploration rate at `env_steps` that actors acting for this
    /// agent use (0 when the agent explores otherwise).
    fn epsilon(&self, _env_steps: u64) -> f64 {
        0.0
    }
    /// Stores experience.
    fn observe(&mut self, t: &Transition<'_>);
    /// Episode `episode` ended: every transition of it has been observed
    /// (on-policy agents train on it).
    fn end_episode(&mut self, _episode: u64) {}
    /// Trains as the schedule calls for after `env_steps` environment steps;
    /// returns the number of gradient steps taken.
    fn train(&mut self, env_steps: u64) -> u32;
    /// One gradient step now, outside the agent's own schedule (for a
    /// workflow that paces training itself, as `orchestrated`'s rate
    /// limiter does). Returns the items it sampled; 0 when it cannot train.
    fn sample_step(&mut self) -> u32 {
        0
    }
    /// Loss of the latest gradient step (reads it from the device).
    fn last_loss(&self) -> Option<f64>;
    fn train_steps(&self) -> u64;
    /// Transitions currently held for training.
    fn replay_len(&self) -> usize;
    fn weights(&self) -> Weights;
    fn load_weights(&mut self, w: &Weights) -> Result<(), AgentError>;
    fn state(&self) -> AgentState;
    fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError>;
}

/// Acts from published weights, without training state.
pub trait Policy: Send {
    fn load(&mut self, w: &Weights) -> Result<(), AgentError>;
    /// The greedy (evaluation) action for one observation.
    fn act(&mut self, obs: &[f32], action: &mut [f32]);
    fn version(&self) -> u64;
}

/// Builds the agent a run config asks for.
pub fn build_agent(cfg: &RunConfig, spec: &EnvSpec, device: Device) -> Box<dyn Agent> {
    match cfg.agent {
        AgentKind::Dqn => Box::new(Dqn::new(&cfg.dqn, spec, cfg.seed, device)),
        AgentKind::Probe => Box::new(Probe::new(cfg, spec)),
        AgentKind::A2c => Box::new(A2c::new(&cfg.a2c, spec, cfg.seed, device)),
    }
}

/// Builds a CPU policy that acts greedily with the agent's published weights.
pub fn build_policy(cfg: &RunConfig, spec: &EnvSpec) -> Box<dyn Policy> {
    match cfg.agent {
        AgentKind::Dqn | AgentKind::Probe | AgentKind::A2c => {
            Box::new(GreedyQPolicy::new(cfg.policy_hidden(), spec))
        }
    }
}

/// Checks that flat weights fit and are finite.
pub(crate) fn check_weights(data: &[f32], expected: usize) -> Result<(), AgentError> {
    if data.len() != expected {
        return Err(AgentError::WeightsLength {
            expected,
            got: data.len(),
        });
    }
    match data.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(AgentError::NonFinite(i)),
        None => Ok(()),
    }
}

/// Copies a flat f32 tensor out to host memory.
pub(crate) fn to_vec(t: &tch::Tensor) -> Vec<f32> {
    let t = t.to_device(Device::Cpu).contiguous();
    let n = t.numel();
    let mut v = vec![0f32; n];
    t.copy_data(&mut v, n);
    v
}

/// Overwrites a tensor in place with host data of the same length.
pub(crate) fn copy_into(dst: &mut tch::Tensor, data: &[f32]) {
    let src = tch::Tensor::from_slice(data).to_device(dst.device());
    tch::no_grad(|| dst.copy_(&src));
}
