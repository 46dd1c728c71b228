//! MountainCarContinuous-v0, as Gymnasium 1.x computes it — including its
//! mixed precision: the state is float64 right after a reset and float32 after
//! every step, and the action is float32 (see [`super::numpy_scalar`]).

use super::numpy_scalar::Num::{self, F32, F64, Py};
use super::time_limit::{Dynamics, continuous};
use super::{Action, EnvRng, EnvSpec, ObsDtype, Space};
use std::borrow::Cow;

const MIN_POSITION: f64 = -1.2;
const MAX_POSITION: f64 = 0.6;
const MAX_SPEED: f64 = 0.07;
const GOAL_POSITION: f64 = 0.45;
const POWER: f64 = 0.0015;

/// Drive an under-powered car up a hill, continuous force in [-1, 1].
#[derive(Debug, Clone)]
pub struct MountainCarContinuous {
    spec: EnvSpec,
    position: Num,
    velocity: Num,
}

impl Default for MountainCarContinuous {
    fn default() -> Self {
        MountainCarContinuous {
            spec: EnvSpec {
                id: Cow::Borrowed("MountainCarContinuous-v0"),
                observation_space: Space::Box {
                    low: vec![MIN_POSITION as f32, -MAX_SPEED as f32],
                    high: vec![MAX_POSITION as f32, MAX_SPEED as f32],
                },
                obs_shape: vec![2],
                obs_dtype: ObsDtype::F32,
                action_space: Space::uniform_box(1, -1.0, 1.0),
                max_episode_steps: Some(999),
                reward_threshold: Some(90.0),
            },
            position: F64(0.0),
            velocity: F64(0.0),
        }
    }
}

impl Dynamics for MountainCarContinuous {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, rng: &mut EnvRng, _seed: Option<u64>) {
        self.position = F64(rng.uniform(-0.6, -0.4));
        self.velocity = F64(0.0);
    }

    fn step(&mut self, action: Action<'_>) -> (f64, bool) {
        let a = continuous(action, &self.spec.id);
        // force = min(max(action[0], min_action), max_action)
        let mut force = F32(a);
        if Py(-1.0).gt(force) {
            force = Py(-1.0);
        }
        if Py(1.0).lt(force) {
            force = Py(1.0);
        }
        let position = self.position;
        let cos_term = Py((Py(3.0) * position).value().cos());
        let mut velocity = self.velocity + (force * Py(POWER) - Py(0.0025) * cos_term);
        if velocity.gt(Py(MAX_SPEED)) {
            velocity = Py(MAX_SPEED);
        }
        if velocity.lt(Py(-MAX_SPEED)) {
            velocity = Py(-MAX_SPEED);
        }
        let mut position = position + velocity;
        if position.gt(Py(MAX_POSITION)) {
            position = Py(MAX_POSITION);
        }
        if position.lt(Py(MIN_POSITION)) {
            position = Py(MIN_POSITION);
        }
        if position.eq_num(Py(MIN_POSITION)) && velocity.lt(Py(0.0)) {
            velocity = Py(0.0);
        }
        let terminated = position.ge(Py(GOAL_POSITION)) && velocity.ge(Py(0.0));
        let mut reward = if terminated { 100.0 } else { 0.0 };
        reward -= (a as f64).powi(2) * 0.1;
        // self.state = np.array([position, velocity], dtype=np.float32)
        self.position = F32(position.value() as f32);
        self.velocity = F32(velocity.value() as f32);
        (reward, terminated)
    }

    fn observe(&self, obs: &mut [f32]) {
        obs[0] = self.position.value() as f32;
        obs[1] = self.velocity.value() as f32;
    }

    fn state(&self) -> Vec<f64> {
        vec![self.position.value(), self.velocity.value()]
    }

    /// Sets a float64 state, as a reset leaves it.
    fn set_state(&mut self, state: &[f64]) {
        self.position = F64(state[0]);
        self.velocity = F64(state[1]);
    }
}
