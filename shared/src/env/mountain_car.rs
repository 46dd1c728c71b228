//! MountainCar-v0, as Gymnasium 1.x computes it (float64 state, float32
//! observations, 200-step limit).

use super::time_limit::{Dynamics, discrete};
use super::{Action, EnvRng, EnvSpec, ObsDtype, Space};
use std::borrow::Cow;

const MIN_POSITION: f64 = -1.2;
const MAX_POSITION: f64 = 0.6;
const MAX_SPEED: f64 = 0.07;
const GOAL_POSITION: f64 = 0.5;
const FORCE: f64 = 0.001;
const GRAVITY: f64 = 0.0025;

/// Drive an under-powered car up a hill (Moore, 1990), discrete actions.
#[derive(Debug, Clone)]
pub struct MountainCar {
    spec: EnvSpec,
    position: f64,
    velocity: f64,
}

impl Default for MountainCar {
    fn default() -> Self {
        MountainCar {
            spec: EnvSpec {
                id: Cow::Borrowed("MountainCar-v0"),
                observation_space: Space::Box {
                    low: vec![MIN_POSITION as f32, -MAX_SPEED as f32],
                    high: vec![MAX_POSITION as f32, MAX_SPEED as f32],
                },
                obs_shape: vec![2],
                obs_dtype: ObsDtype::F32,
                action_space: Space::Discrete { n: 3 },
                max_episode_steps: Some(200),
                reward_threshold: Some(-110.0),
            },
            position: 0.0,
            velocity: 0.0,
        }
    }
}

impl Dynamics for MountainCar {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, rng: &mut EnvRng, _seed: Option<u64>) {
        self.position = rng.uniform(-0.6, -0.4);
        self.velocity = 0.0;
    }

    fn step(&mut self, action: Action<'_>) -> (f64, bool) {
        let a = discrete(action, 3, &self.spec.id) as i64;
        let mut velocity = self.velocity;
        velocity += (a - 1) as f64 * FORCE + (3.0 * self.position).cos() * (-GRAVITY);
        velocity = velocity.clamp(-MAX_SPEED, MAX_SPEED);
        let mut position = self.position + velocity;
        position = position.clamp(MIN_POSITION, MAX_POSITION);
        if position == MIN_POSITION && velocity < 0.0 {
            velocity = 0.0;
        }
        let terminated = position >= GOAL_POSITION && velocity >= 0.0;
        self.position = position;
        self.velocity = velocity;
        (-1.0, terminated)
    }

    fn observe(&self, obs: &mut [f32]) {
        obs[0] = self.position as f32;
        obs[1] = self.velocity as f32;
    }

    fn state(&self) -> Vec<f64> {
        vec![self.position, self.velocity]
    }

    fn set_state(&mut self, state: &[f64]) {
        self.position = state[0];
        self.velocity = state[1];
    }
}
