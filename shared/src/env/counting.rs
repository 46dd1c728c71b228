//! Counting-v0: a deterministic environment whose state counts steps, for
//! workflow conformance tests (every transition is recognisable).
//!
//! The observation is `[tag, t, last_action]`: `tag` is the reset seed modulo
//! 2^24 (exact in f32), `t` the step index within the episode. The reward of
//! step `t` (1-based) is `t`. An episode reset with seed `s` terminates after
//! `5 + s % 13` steps; episodes longer than the 12-step limit are truncated.

use super::time_limit::{Dynamics, discrete};
use super::{Action, EnvRng, EnvSpec, ObsDtype, Space};
use std::borrow::Cow;

/// Steps before truncation.
pub const COUNTING_MAX_STEPS: u32 = 12;

/// The counting environment.
#[derive(Debug, Clone)]
pub struct Counting {
    spec: EnvSpec,
    tag: u64,
    t: u64,
    last_action: u64,
    length: u64,
}

impl Default for Counting {
    fn default() -> Self {
        Counting {
            spec: EnvSpec {
                id: Cow::Borrowed("Counting-v0"),
                observation_space: Space::Box {
                    low: vec![0.0, 0.0, 0.0],
                    high: vec![16_777_215.0, COUNTING_MAX_STEPS as f32, 1.0],
                },
                obs_shape: vec![3],
                obs_dtype: ObsDtype::F32,
                action_space: Space::Discrete { n: 2 },
                max_episode_steps: Some(COUNTING_MAX_STEPS),
                reward_threshold: None,
            },
            tag: 0,
            t: 0,
            last_action: 0,
            length: 5,
        }
    }
}

impl Counting {
    /// Episode length before termination for a reset seed.
    pub fn episode_length(seed: u64) -> u64 {
        5 + seed % 13
    }
}

impl Dynamics for Counting {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, rng: &mut EnvRng, seed: Option<u64>) {
        let s = seed.unwrap_or_else(|| rng.next_u64());
        self.tag = s % (1 << 24);
        self.length = Self::episode_length(s);
        self.t = 0;
        self.last_action = 0;
    }

    fn step(&mut self, action: Action<'_>) -> (f64, bool) {
        self.last_action = discrete(action, 2, &self.spec.id) as u64;
        self.t += 1;
        (self.t as f64, self.t >= self.length)
    }

    fn observe(&self, obs: &mut [f32]) {
        obs[0] = self.tag as f32;
        obs[1] = self.t as f32;
        obs[2] = self.last_action as f32;
    }

    fn state(&self) -> Vec<f64> {
        vec![
            self.tag as f64,
            self.t as f64,
            self.last_action as f64,
            self.length as f64,
        ]
    }

    fn set_state(&mut self, state: &[f64]) {
        self.tag = state[0] as u64;
        self.t = state[1] as u64;
        self.last_action = state[2] as u64;
        self.length = state[3] as u64;
    }
}
