//! [`TimeLimited`]: seeding plus truncation around a [`Dynamics`], the part
//! of `gymnasium.make` that every classic-control environment shares.

use super::{Action, Env, EnvRng, EnvSpec, Step};

/// The physics of one environment, written to match Gymnasium's arithmetic.
pub trait Dynamics: Send {
    fn spec(&self) -> &EnvSpec;
    /// Samples the initial state from `rng` (seeded by the wrapper).
    fn reset(&mut self, rng: &mut EnvRng, seed: Option<u64>);
    /// Advances the state; returns `(reward, terminated)`.
    fn step(&mut self, action: Action<'_>) -> (f64, bool);
    /// Writes the observation of the current state.
    fn observe(&self, obs: &mut [f32]);
    fn state(&self) -> Vec<f64>;
    fn set_state(&mut self, state: &[f64]);
}

/// A [`Dynamics`] with a generator and Gymnasium's `TimeLimit` wrapper.
#[derive(Debug)]
pub struct TimeLimited<D> {
    dynamics: D,
    rng: Option<EnvRng>,
    elapsed: u32,
}

impl<D: Dynamics> TimeLimited<D> {
    pub fn new(dynamics: D) -> Self {
        TimeLimited {
            dynamics,
            rng: None,
            elapsed: 0,
        }
    }

    pub fn dynamics(&self) -> &D {
        &self.dynamics
    }
}

impl<D: Dynamics> Env for TimeLimited<D> {
    fn spec(&self) -> &EnvSpec {
        self.dynamics.spec()
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        let rng = match (seed, &mut self.rng) {
            (Some(s), slot) => slot.insert(EnvRng::from_seed(s)),
            (None, Some(rng)) => rng,
            (None, slot) => slot.insert(EnvRng::from_clock()),
        };
        self.dynamics.reset(rng, seed);
        self.elapsed = 0;
        self.dynamics.observe(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Step {
        let (reward, terminated) = self.dynamics.step(action);
        self.elapsed += 1;
        self.dynamics.observe(obs);
        Step {
            reward,
            terminated,
            truncated: self
                .dynamics
                .spec()
                .max_episode_steps
                .is_some_and(|m| self.elapsed >= m),
        }
    }

    fn state(&self) -> Vec<f64> {
        self.dynamics.state()
    }

    fn set_state(&mut self, state: &[f64]) {
        self.dynamics.set_state(state)
    }

    fn elapsed_steps(&self) -> u32 {
        self.elapsed
    }
}

/// Panics with Gymnasium's message for an action outside a discrete space.
pub(crate) fn discrete(action: Action<'_>, n: usize, id: &str) -> usize {
    match action {
        Action::Discrete(a) if a < n => a,
        other => panic!("{id}: invalid action {other:?}, expected Discrete({n})"),
    }
}

/// The first value of a continuous action, panicking on a discrete one.
pub(crate) fn continuous(action: Action<'_>, id: &str) -> f32 {
    match action {
        Action::Continuous([a, ..]) => *a,
        other => panic!("{id}: invalid action {other:?}, expected a Box of shape (1,)"),
    }
}
