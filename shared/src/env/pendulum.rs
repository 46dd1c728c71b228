//! Pendulum-v1, as Gymnasium 1.x computes it (float64 state, float32 torque
//! whose square and scaling stay float32 under NumPy 2, 200-step limit).

use super::time_limit::{Dynamics, continuous};
use super::{Action, EnvRng, EnvSpec, ObsDtype, Space};
use std::borrow::Cow;
use std::f64::consts::PI;

const MAX_SPEED: f64 = 8.0;
const MAX_TORQUE: f32 = 2.0;
const DT: f64 = 0.05;
const G: f64 = 10.0;
const M: f64 = 1.0;
const L: f64 = 1.0;

/// Swing a pendulum up and keep it upright.
#[derive(Debug, Clone)]
pub struct Pendulum {
    spec: EnvSpec,
    th: f64,
    thdot: f64,
}

impl Default for Pendulum {
    fn default() -> Self {
        let high = vec![1.0, 1.0, MAX_SPEED as f32];
        Pendulum {
            spec: EnvSpec {
                id: Cow::Borrowed("Pendulum-v1"),
                observation_space: Space::Box {
                    low: high.iter().map(|h| -h).collect(),
                    high,
                },
                obs_shape: vec![3],
                obs_dtype: ObsDtype::F32,
                action_space: Space::uniform_box(1, -MAX_TORQUE, MAX_TORQUE),
                max_episode_steps: Some(200),
                reward_threshold: None,
            },
            th: 0.0,
            thdot: 0.0,
        }
    }
}

/// `((x + pi) % (2 * pi)) - pi` with Python's floored modulo.
fn angle_normalize(x: f64) -> f64 {
    (x + PI).rem_euclid(2.0 * PI) - PI
}

impl Dynamics for Pendulum {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, rng: &mut EnvRng, _seed: Option<u64>) {
        self.th = rng.uniform(-PI, PI);
        self.thdot = rng.uniform(-1.0, 1.0);
    }

    fn step(&mut self, action: Action<'_>) -> (f64, bool) {
        let u = continuous(action, &self.spec.id).clamp(-MAX_TORQUE, MAX_TORQUE);
        let (th, thdot) = (self.th, self.thdot);
        let n = angle_normalize(th);
        // 0.001 * (u**2) is float32 arithmetic under NumPy 2.
        let costs = n * n + 0.1 * (thdot * thdot) + (0.001f32 * (u * u)) as f64;
        let torque_term = (3.0 / (M * L * L)) as f32 * u;
        let newthdot = thdot + (3.0 * G / (2.0 * L) * th.sin() + torque_term as f64) * DT;
        let newthdot = newthdot.clamp(-MAX_SPEED, MAX_SPEED);
        self.th = th + newthdot * DT;
        self.thdot = newthdot;
        (-costs, false)
    }

    fn observe(&self, obs: &mut [f32]) {
        obs[0] = self.th.cos() as f32;
        obs[1] = self.th.sin() as f32;
        obs[2] = self.thdot as f32;
    }

    fn state(&self) -> Vec<f64> {
        vec![self.th, self.thdot]
    }

    fn set_state(&mut self, state: &[f64]) {
        self.th = state[0];
        self.thdot = state[1];
    }
}
