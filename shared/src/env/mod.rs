//! Environments: the [`Env`] trait, spaces, and the registry of built-ins.
//!
//! Every built-in is a [`Dynamics`] (the physics, exactly as Gymnasium writes
//! it) wrapped in [`TimeLimited`], which adds seeding and truncation at the
//! registered `max_episode_steps`, as `gymnasium.make` does. Any other
//! Gymnasium-API environment runs through the embedded interpreter
//! (the `python` module, feature `python`); [`EnvSource`] names either
//! kind and builds it.

mod acrobot;
mod cartpole;
mod collective;
mod counting;
mod frame_stack;
mod heat_rod;
mod memory_corridor;
mod mountain_car;
mod mountain_car_continuous;
mod numpy_scalar;
mod pendulum;
#[cfg(feature = "python")]
pub mod python;
mod rng;
mod source;
mod space;
mod time_limit;
mod timed;

pub use acrobot::Acrobot;
pub use cartpole::CartPole;
pub use collective::{Collective, Solo, share};
pub use counting::{COUNTING_MAX_STEPS, Counting};
pub use frame_stack::{FrameStack, Stacker, newest, stacked_spec};
pub use heat_rod::{HEAT_MAX_STEPS, HEAT_SEGMENTS, HeatRod};
pub use memory_corridor::{CORRIDOR, MEMORY_MAX_STEPS, MemoryCorridor};
pub use mountain_car::MountainCar;
pub use mountain_car_continuous::MountainCarContinuous;
pub use pendulum::Pendulum;
pub use rng::EnvRng;
pub use source::{EnvError, EnvSource, GYMNASIUM_PREFIX, PYTHON_PREFIX, is_python_id};
pub use space::Space;
pub use time_limit::{Dynamics, TimeLimited};
pub use timed::{EnvCall, EnvReply, EnvThread, Timed};

use std::borrow::Cow;

/// An action handed to [`Env::step`]: an index for discrete action spaces, a
/// slice of `f32` (Gymnasium's dtype) for continuous ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action<'a> {
    Discrete(usize),
    Continuous(&'a [f32]),
}

/// What a step returns besides the observation (written into the caller's
/// buffer, so stepping allocates nothing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub reward: f64,
    /// The MDP reached a terminal state (no bootstrapping past it).
    pub terminated: bool,
    /// The episode was cut by the time limit (bootstrapping is still valid).
    pub truncated: bool,
}

impl Step {
    /// The episode is over, one way or the other.
    pub fn done(&self) -> bool {
        self.terminated || self.truncated
    }
}

/// The element type an environment's observations have before rlfleet
/// flattens them to `f32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObsDtype {
    F32,
    F64,
    /// Images: values 0..=255 (a network scales them by 1/255).
    U8,
    /// Boolean planes (MinAtar's, for one): values 0 and 1, carried and
    /// stored as bytes like `U8`, seen by a network as they are.
    Bool,
}

impl ObsDtype {
    /// Observations travel and are stored as one byte per value.
    pub fn is_bytes(self) -> bool {
        matches!(self, ObsDtype::U8 | ObsDtype::Bool)
    }
}

/// Static facts about an environment, as Gymnasium registers them.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvSpec {
    /// The id as the run config names it (`CartPole-v1`,
    /// `gymnasium:LunarLander-v3`, `python:pkg.mod:Env`).
    pub id: Cow<'static, str>,
    /// Flat: a `Box` observation of any shape is flattened in C order.
    pub observation_space: Space,
    /// The observation's shape before flattening.
    pub obs_shape: Vec<usize>,
    pub obs_dtype: ObsDtype,
    pub action_space: Space,
    /// The time limit (`None`: the env has none of its own).
    pub max_episode_steps: Option<u32>,
    /// The mean return Gymnasium calls "solved", when it names one.
    pub reward_threshold: Option<f64>,
}

/// An exception an environment raised (Python envs), as one line: type,
/// message and the last traceback frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EnvFault(pub String);

impl EnvSpec {
    /// Length of a flat observation.
    pub fn obs_dim(&self) -> usize {
        self.observation_space.flat_dim()
    }
}

/// An environment instance. `reset` and `step` write the observation into
/// `obs`, whose length must be [`EnvSpec::obs_dim`].
pub trait Env: Send {
    fn spec(&self) -> &EnvSpec;
    /// Starts an episode. `Some(seed)` reseeds the environment's generator
    /// (reproducible); `None` continues its stream.
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]);
    /// Advances one step. Panics on an action outside the action space, like
    /// Gymnasium's assertion; callers validate untrusted actions first with
    /// [`Space::check_action`].
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Step;
    /// The internal physical state, in Gymnasium's layout, as f64.
    fn state(&self) -> Vec<f64>;
    /// Overwrites the internal physical state (tests drive the reference
    /// implementation and this one from the same states).
    fn set_state(&mut self, state: &[f64]);
    /// Steps taken in the current episode.
    fn elapsed_steps(&self) -> u32;
    /// [`Env::reset`] for callers that contain faults: an env that can raise
    /// (a Python env) returns the exception instead of panicking.
    fn try_reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvFault> {
        self.reset(seed, obs);
        Ok(())
    }
    /// [`Env::step`], returning an env's exception instead of panicking.
    fn try_step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvFault> {
        Ok(self.step(action, obs))
    }
}

/// Names of the built-in environments, for error messages and `--help`.
pub const ENV_IDS: &[&str] = &[
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Pendulum-v1",
    "Counting-v0",
    "MemoryCorridor-v0",
    "HeatRod-v0",
];

/// Builds a built-in environment by its Gymnasium id.
pub fn make(id: &str) -> Result<Box<dyn Env>, UnknownEnv> {
    make_in(id, None)
}

/// Builds a built-in environment whose instance spans the ranks of
/// `comm` (an MPI env group; `None`: this process alone). Only
/// `HeatRod-v0` is partitioned; the others run whole on every rank.
pub fn make_in(id: &str, comm: Option<Box<dyn Collective>>) -> Result<Box<dyn Env>, UnknownEnv> {
    Ok(match id {
        "HeatRod-v0" => Box::new(TimeLimited::new(HeatRod::new(
            32,
            16,
            comm.unwrap_or_else(|| Box::new(Solo)),
        ))),
        "CartPole-v1" => Box::new(TimeLimited::new(CartPole::default())),
        "Acrobot-v1" => Box::new(TimeLimited::new(Acrobot::default())),
        "MountainCar-v0" => Box::new(TimeLimited::new(MountainCar::default())),
        "MountainCarContinuous-v0" => Box::new(TimeLimited::new(MountainCarContinuous::default())),
        "Pendulum-v1" => Box::new(TimeLimited::new(Pendulum::default())),
        "Counting-v0" => Box::new(TimeLimited::new(Counting::default())),
        "MemoryCorridor-v0" => Box::new(TimeLimited::new(MemoryCorridor::default())),
        _ => return Err(UnknownEnv(id.to_string())),
    })
}

/// The spec of a built-in environment without building one.
pub fn spec(id: &str) -> Result<EnvSpec, UnknownEnv> {
    make(id).map(|e| e.spec().clone())
}

/// An environment id that is not built in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown environment `{0}`; built in: {ids}", ids = ENV_IDS.join(", "))]
pub struct UnknownEnv(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_id_builds_and_steps() {
        for id in ENV_IDS {
            let mut env = make(id).unwrap();
            let spec = env.spec().clone();
            assert_eq!(spec.id, *id);
            let mut obs = vec![0.0; spec.obs_dim()];
            env.reset(Some(3), &mut obs);
            let cont = [0.5f32];
            let action = match spec.action_space {
                Space::Discrete { .. } => Action::Discrete(0),
                Space::Box { .. } => Action::Continuous(&cont),
            };
            let step = env.step(action, &mut obs);
            assert!(step.reward.is_finite());
            assert_eq!(env.elapsed_steps(), 1);
        }
    }

    #[test]
    fn unknown_id_names_the_choices() {
        let err = make("Nope-v9").err().unwrap().to_string();
        assert!(
            err.contains("Nope-v9") && err.contains("CartPole-v1"),
            "{err}"
        );
    }

    #[test]
    fn seeded_resets_are_reproducible() {
        for id in ENV_IDS {
            let mut a = make(id).unwrap();
            let mut b = make(id).unwrap();
            let n = a.spec().obs_dim();
            let (mut oa, mut ob) = (vec![0.0; n], vec![0.0; n]);
            a.reset(Some(42), &mut oa);
            b.reset(Some(42), &mut ob);
            assert_eq!(oa, ob, "{id}");
            assert_eq!(a.state(), b.state(), "{id}");
            // Unseeded resets continue the stream identically too.
            a.reset(None, &mut oa);
            b.reset(None, &mut ob);
            assert_eq!(a.state(), b.state(), "{id}");
        }
    }

    #[test]
    fn truncation_happens_at_the_registered_limit() {
        let mut env = make("Pendulum-v1").unwrap();
        let mut obs = vec![0.0; 3];
        env.reset(Some(0), &mut obs);
        let u = [0.0f32];
        for t in 1..=200 {
            let s = env.step(Action::Continuous(&u), &mut obs);
            assert_eq!(s.truncated, t == 200, "step {t}");
            assert!(!s.terminated);
        }
    }
}
