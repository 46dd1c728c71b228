//! Agents: networks and optimizers in tch behind the [`Agent`] trait (its
//! parts: [`Act`], [`Learn`], [`Persist`], [`Parallel`]), and [`Policy`]:
//! acting from published weights.

mod a2c;
mod adam;
#[cfg(test)]
mod byte_tests;
mod critic;
#[cfg(feature = "mpi")]
pub mod data_parallel;
mod dqn;
mod greedy;
mod impala;
mod off_policy;
mod on_device;
mod optimizer;
mod policy_value;
mod ppo;
mod probe;
mod q_state;
mod r2d2;
mod rollout;
mod sac;
mod sequences;
mod td3;
pub mod vtrace;

pub use a2c::A2c;
pub use adam::Adam;
pub use dqn::Dqn;
pub use greedy::GreedyPolicy;
pub use impala::Impala;
pub use optimizer::{Optimizer, Rmsprop};
pub use ppo::Ppo;
pub use probe::{Probe, ProbeLine};
pub use r2d2::R2d2;
pub use sac::Sac;
pub use td3::Td3;

pub(crate) use crate::device::{copy_into, to_vec};
pub(crate) use on_device::{batch_on_device, kept_on_device, rows_on_device, stacked_frames};
use rlfleet_replay::Transition;
use rlfleet_shared::config::{AgentKind, RunConfig};
use rlfleet_shared::env::EnvSpec;
use tch::Device;

pub use rlfleet_checkpoint::{AgentState, NamedTensor, Weights};

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("weights have {got} values, this network has {expected}")]
    WeightsLength { expected: usize, got: usize },
    #[error(transparent)]
    MissingTensor(#[from] rlfleet_checkpoint::MissingTensor),
    #[error("weights contain a non-finite value at index {0}")]
    NonFinite(usize),
    #[error(transparent)]
    Replay(#[from] rlfleet_replay::ImageError),
    #[error("this agent keeps no replay to restore")]
    NoReplay,
}

/// A learner-side algorithm: every part below. A workflow holds a
/// `Box<dyn Agent>` and imports the parts it calls, so what a module uses
/// of an agent is written in its imports; an agent implements each part
/// (an empty `impl Parallel for X {}` where it has nothing to add).
pub trait Agent: Act + Learn + Persist + Parallel + Send {}

impl<T: Act + Learn + Persist + Parallel + Send> Agent for T {}

/// Acting: actions for observations, and the exploration actors use.
pub trait Act {
    /// Picks an action for one observation, exploring as the schedule says
    /// at `env_steps`. Writes the action into `action` (a discrete index is
    /// written as `action[0]`).
    fn act(&mut self, obs: &[f32], env_steps: u64, action: &mut [f32]);

    /// [`Act::act`] for `n` observations at once (one forward pass where
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

    /// The log-probability (a density for a continuous action) of the
    /// action the last [`Act::act`] picked, for an agent that samples its
    /// actions and weighs each step by its behaviour policy (PPO, IMPALA);
    /// `None` for the others.
    fn last_logp(&self) -> Option<f32> {
        None
    }

    /// The exploration rate at `env_steps` that actors acting for this
    /// agent use (0 when the agent explores otherwise).
    fn epsilon(&self, _env_steps: u64) -> f64 {
        0.0
    }

    /// The exploration rate of the actor that joined `actor`-th (0 first)
    /// at `env_steps`: [`Act::epsilon`] for every actor, unless the
    /// agent gives each its own (R2D2's ladder).
    fn actor_epsilon(&self, env_steps: u64, _actor: u64) -> f64 {
        self.epsilon(env_steps)
    }
}

/// Learning: experience in (transition by transition, episode ends,
/// episodes played again), gradient steps out, and what training reports.
pub trait Learn {
    /// The next step of `episode` observed was acted from the recurrent
    /// state `state` (the policy core's, as the actor or the `seed` front
    /// held it before acting). An agent whose trajectories train a core
    /// (PPO, IMPALA) runs the policy from it when the step starts one,
    /// instead of a state it made itself.
    fn acted_from(&mut self, _episode: u64, _state: &[f32]) {}

    /// Stores experience.
    fn observe(&mut self, t: &Transition<'_>);

    /// Stores experience whose observations are a uint8 env's bytes. Every
    /// agent that keeps experience (DQN, PPO, A2C, SAC, TD3, and the
    /// data-parallel wrapper) keeps them as bytes and uploads bytes; by
    /// default (agents that keep no observation) they are widened.
    fn observe_bytes(&mut self, t: &Transition<'_, u8>) {
        let (obs, next_obs) = t.widened();
        self.observe(&t.with_obs(&obs, &next_obs));
    }

    /// Episode `episode` ended: every transition of it has been observed
    /// (on-policy agents train on it).
    fn end_episode(&mut self, _episode: u64) {}

    /// Episode `episode` is handed out again, to be played from its start:
    /// what was observed of the earlier play and is still waiting (n-step
    /// windows, open on-policy trajectories) is let go, so that it does not
    /// mix with the new play. Transitions already stored stay.
    fn abandon_episode(&mut self, _episode: u64) {}

    /// Episodes it holds state of (n-step windows, open trajectories,
    /// recurrent states), each let go at its episode's end.
    fn open_episodes(&self) -> usize {
        0
    }

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

    /// What TensorBoard shows of training at `env_steps`: the latest loss
    /// and what the agent adds (exploration, learning rate, gradient norm,
    /// entropy). Reads from the device.
    fn scalars(&self, _env_steps: u64) -> Vec<(&'static str, f64)> {
        self.last_loss()
            .map(|l| vec![("train/loss", l)])
            .unwrap_or_default()
    }

    fn train_steps(&self) -> u64;

    /// Transitions currently held for training.
    fn replay_len(&self) -> usize;

    /// Bytes the replay holds (its own accounting; 0 without one).
    fn replay_bytes(&self) -> usize {
        0
    }

    /// Gradient steps [`Learn::train`] would take at `env_steps` once its
    /// replay is full enough (a data-parallel group agrees on it first);
    /// 0 for agents without such a schedule.
    fn scheduled_steps(&self, _env_steps: u64) -> u32 {
        0
    }
}

/// Persisting: the published weights and the whole state (and the
/// replay, where the agent keeps one), out and back in.
pub trait Persist {
    fn weights(&self) -> Weights;

    fn load_weights(&mut self, w: &Weights) -> Result<(), AgentError>;

    fn state(&self) -> AgentState;

    fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError>;

    /// The replay's contents, for a checkpoint with `checkpoint.replay`
    /// (`None` for agents without a replay). N-step windows of open
    /// episodes are not in it: every episode open at a checkpoint is
    /// played again from its start after a restore.
    fn replay_image(&self) -> Option<rlfleet_replay::ReplayImage> {
        None
    }

    /// Puts back a replay [`Persist::replay_image`] saved.
    fn restore_replay(&mut self, _img: &rlfleet_replay::ReplayImage) -> Result<(), AgentError> {
        Err(AgentError::NoReplay)
    }
}

/// Membership of a data-parallel group (the `ml-*` workflows): every
/// method has a default for an agent that trains alone.
pub trait Parallel {
    /// Makes every gradient step average its gradient with other learners
    /// through `reduce` before the optimizer uses it. False when the agent
    /// cannot (it then trains alone).
    fn set_gradient_reduce(&mut self, _reduce: Box<dyn GradientReduce>) -> bool {
        false
    }

    /// Data-parallel learners: the transitions observed from here on go to
    /// learner `learner`'s replay (`ml-rma` picks one per batch).
    fn route_to(&mut self, _learner: usize) {}

    /// The run ended: a data-parallel group checks its learners here.
    fn finish_run(&mut self, _output_dir: &std::path::Path) -> anyhow::Result<()> {
        Ok(())
    }
}

/// Averages a gradient over a group of learners, in place; every learner
/// gets the same result.
pub trait GradientReduce: Send + std::fmt::Debug {
    fn mean(&mut self, grad: &mut [f32]);
}

/// Acts from published weights, without training state.
pub trait Policy: Send {
    fn load(&mut self, w: &Weights) -> Result<(), AgentError>;
    /// The greedy (evaluation) action for one observation.
    fn act(&mut self, obs: &[f32], action: &mut [f32]);
    /// An episode begins: a recurrent core's state goes back to zeros.
    fn begin_episode(&mut self) {}
    fn version(&self) -> u64;
}

/// Builds the agent a run config asks for.
pub fn build_agent(cfg: &RunConfig, spec: &EnvSpec, device: Device) -> Box<dyn Agent> {
    let torso = cfg.torso(spec);
    match cfg.agent {
        AgentKind::Dqn => Box::new(Dqn::new(&cfg.dqn, spec, torso, cfg.seed, device)),
        AgentKind::Probe => Box::new(Probe::new(cfg, spec)),
        AgentKind::A2c => Box::new(A2c::with_core(
            &cfg.a2c,
            spec,
            torso,
            (cfg.model.core(), cfg.model.max_seq_len),
            cfg.seed,
            device,
        )),
        AgentKind::Ppo => Box::new(Ppo::with_core(
            &cfg.ppo,
            spec,
            torso,
            (cfg.model.core(), cfg.model.max_seq_len),
            cfg.seed,
            device,
        )),
        AgentKind::Impala => Box::new(Impala::with_core(
            &cfg.impala,
            spec,
            torso,
            (cfg.model.core(), cfg.model.max_seq_len),
            cfg.seed,
            device,
        )),
        AgentKind::R2d2 => Box::new(R2d2::new(
            &cfg.r2d2,
            spec,
            torso,
            cfg.model
                .core()
                .expect("r2d2 runs a recurrent core (validated)"),
            cfg.seed,
            device,
        )),
        AgentKind::Td3 => Box::new(Td3::new(&cfg.td3, true, spec, cfg.seed, device)),
        AgentKind::Ddpg => Box::new(Td3::new(&cfg.ddpg.as_td3(), false, spec, cfg.seed, device)),
        AgentKind::Sac => Box::new(Sac::new(&cfg.sac, spec, cfg.seed, device)),
    }
}

/// Builds a CPU policy that acts greedily with the agent's published weights.
pub fn build_policy(cfg: &RunConfig, spec: &EnvSpec) -> Box<dyn Policy> {
    Box::new(GreedyPolicy::new(cfg, spec))
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

/// The gradients of `loss` with respect to each of `params`, as fresh
/// tensors: nothing accumulates into `params`' `.grad`, so no pass zeroes
/// it before and adds into it after (each a pass over every parameter).
/// A parameter the loss does not reach gets zeros.
pub(crate) fn gradients<const N: usize>(
    loss: &tch::Tensor,
    params: [&tch::Tensor; N],
) -> [tch::Tensor; N] {
    let mut grads = tch::Tensor::run_backward(&[loss], &params, false, false).into_iter();
    std::array::from_fn(|i| match grads.next() {
        Some(g) if g.defined() => g,
        Some(_) => params[i].zeros_like(),
        None => panic!("one gradient per input"),
    })
}

/// A tensor of an agent's state, flattened, under `name`.
pub(crate) fn named(name: &str, t: &tch::Tensor) -> NamedTensor {
    NamedTensor {
        name: name.into(),
        shape: vec![t.numel()],
        data: to_vec(t),
    }
}

/// Restores tensors from a state by name: checks every one's length first,
/// so a bad state changes nothing.
pub(crate) fn restore(
    s: &AgentState,
    tensors: &mut [(&str, &mut tch::Tensor)],
) -> Result<(), AgentError> {
    for (name, t) in tensors.iter() {
        check_weights(&s.tensor(name)?.data, t.numel())?;
    }
    for (name, t) in tensors.iter_mut() {
        copy_into(t, &s.tensor(name)?.data);
    }
    Ok(())
}
