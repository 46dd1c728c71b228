//! CartPole-v1, as Gymnasium 1.x computes it (float64 state, Euler
//! integration, float32 observations, 500-step limit).

use super::time_limit::{Dynamics, discrete};
use super::{Action, EnvRng, EnvSpec, ObsDtype, Space};
use std::borrow::Cow;

const GRAVITY: f64 = 9.8;
const MASSCART: f64 = 1.0;
const MASSPOLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASSPOLE + MASSCART;
const LENGTH: f64 = 0.5;
const POLEMASS_LENGTH: f64 = MASSPOLE * LENGTH;
const FORCE_MAG: f64 = 10.0;
const TAU: f64 = 0.02;
const X_THRESHOLD: f64 = 2.4;

fn theta_threshold() -> f64 {
    12.0 * 2.0 * std::f64::consts::PI / 360.0
}

/// The cart-pole balancing task (Barto, Sutton & Anderson).
#[derive(Debug, Clone)]
pub struct CartPole {
    spec: EnvSpec,
    state: [f64; 4],
    /// Gymnasium's `steps_beyond_terminated`: reward 1 on the terminating
    /// step, 0 on any step taken after it.
    stepped_past_termination: Option<u32>,
}

impl Default for CartPole {
    fn default() -> Self {
        let th = theta_threshold() as f32 * 2.0;
        let high = vec![X_THRESHOLD as f32 * 2.0, f32::INFINITY, th, f32::INFINITY];
        CartPole {
            spec: EnvSpec {
                id: Cow::Borrowed("CartPole-v1"),
                observation_space: Space::Box {
                    low: high.iter().map(|h| -h).collect(),
                    high,
                },
                obs_shape: vec![4],
                obs_dtype: ObsDtype::F32,
                action_space: Space::Discrete { n: 2 },
                max_episode_steps: Some(500),
                reward_threshold: Some(475.0),
            },
            state: [0.0; 4],
            stepped_past_termination: None,
        }
    }
}

impl Dynamics for CartPole {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, rng: &mut EnvRng, _seed: Option<u64>) {
        for s in &mut self.state {
            *s = rng.uniform(-0.05, 0.05);
        }
        self.stepped_past_termination = None;
    }

    fn step(&mut self, action: Action<'_>) -> (f64, bool) {
        let a = discrete(action, 2, &self.spec.id);
        let [mut x, mut x_dot, mut theta, mut theta_dot] = self.state;
        let force = if a == 1 { FORCE_MAG } else { -FORCE_MAG };
        let costheta = theta.cos();
        let sintheta = theta.sin();
        let temp = (force + POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS;
        let thetaacc = (GRAVITY * sintheta - costheta * temp)
            / (LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) / TOTAL_MASS));
        let xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;
        x += TAU * x_dot;
        x_dot += TAU * xacc;
        theta += TAU * theta_dot;
        theta_dot += TAU * thetaacc;
        self.state = [x, x_dot, theta, theta_dot];
        let th = theta_threshold();
        // Written as Gymnasium writes it.
        #[allow(clippy::manual_range_contains)]
        let terminated = x < -X_THRESHOLD || x > X_THRESHOLD || theta < -th || theta > th;
        let reward = if !terminated {
            1.0
        } else {
            match &mut self.stepped_past_termination {
                None => {
                    self.stepped_past_termination = Some(0);
                    1.0
                }
                Some(n) => {
                    *n += 1;
                    0.0
                }
            }
        };
        (reward, terminated)
    }

    fn observe(&self, obs: &mut [f32]) {
        for (o, s) in obs.iter_mut().zip(self.state) {
            *o = s as f32;
        }
    }

    fn state(&self) -> Vec<f64> {
        self.state.to_vec()
    }

    fn set_state(&mut self, state: &[f64]) {
        self.state.copy_from_slice(state);
        self.stepped_past_termination = None;
    }
}
