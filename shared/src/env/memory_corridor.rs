//! MemoryCorridor-v0: a task only an agent with memory can solve. Step 0
//! shows a cue (left or right); a corridor of 5 to 15 steps follows whose
//! observations say nothing of it; at the corridor's end the agent names
//! the cue: +1 when it names it, −1 otherwise, and the episode ends.
//! Actions in the corridor only walk on. An agent that sees only the
//! current observation cannot do better than chance (a mean return of 0);
//! one that remembers the cue gets 1.
//!
//! The observation is `[cue_left, cue_right, at_end]`: `[1, 0, 0]` or
//! `[0, 1, 0]` at step 0, `[0, 0, 0]` in the corridor, `[0, 0, 1]` where
//! the cue is to be named. Actions: 0 names left, 1 names right. The cue
//! and the corridor's length are drawn from the reset's generator.

use super::time_limit::{Dynamics, discrete};
use super::{Action, EnvRng, EnvSpec, ObsDtype, Space};
use std::borrow::Cow;

/// The shortest and the longest corridor.
pub const CORRIDOR: (u32, u32) = (5, 15);

/// Steps of the longest episode: the cue, the corridor, the answer.
pub const MEMORY_MAX_STEPS: u32 = CORRIDOR.1 + 2;

#[derive(Debug, Clone)]
pub struct MemoryCorridor {
    spec: EnvSpec,
    /// 0: left, 1: right.
    cue: u64,
    corridor: u32,
    /// Steps taken in the episode.
    t: u32,
}

impl Default for MemoryCorridor {
    fn default() -> Self {
        MemoryCorridor {
            spec: EnvSpec {
                id: Cow::Borrowed("MemoryCorridor-v0"),
                observation_space: Space::uniform_box(3, 0.0, 1.0),
                obs_shape: vec![3],
                obs_dtype: ObsDtype::F32,
                action_space: Space::Discrete { n: 2 },
                max_episode_steps: Some(MEMORY_MAX_STEPS),
                reward_threshold: Some(0.95),
            },
            cue: 0,
            corridor: CORRIDOR.0,
            t: 0,
        }
    }
}

impl MemoryCorridor {
    /// The cue of the episode (0: left, 1: right).
    pub fn cue(&self) -> u64 {
        self.cue
    }

    /// The step at whose observation the cue is to be named.
    fn answer_step(&self) -> u32 {
        self.corridor + 1
    }
}

impl Dynamics for MemoryCorridor {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, rng: &mut EnvRng, _seed: Option<u64>) {
        self.cue = rng.next_u64() % 2;
        let lengths = u64::from(CORRIDOR.1 - CORRIDOR.0 + 1);
        self.corridor = CORRIDOR.0 + (rng.next_u64() % lengths) as u32;
        self.t = 0;
    }

    fn step(&mut self, action: Action<'_>) -> (f64, bool) {
        let a = discrete(action, 2, &self.spec.id) as u64;
        if self.t == self.answer_step() {
            self.t += 1;
            return (if a == self.cue { 1.0 } else { -1.0 }, true);
        }
        self.t += 1;
        (0.0, false)
    }

    fn observe(&self, obs: &mut [f32]) {
        obs.fill(0.0);
        if self.t == 0 {
            obs[self.cue as usize] = 1.0;
        } else if self.t == self.answer_step() {
            obs[2] = 1.0;
        }
    }

    fn state(&self) -> Vec<f64> {
        vec![self.cue as f64, f64::from(self.corridor), f64::from(self.t)]
    }

    fn set_state(&mut self, state: &[f64]) {
        self.cue = state[0] as u64;
        self.corridor = state[1] as u32;
        self.t = state[2] as u32;
    }
}

#[cfg(test)]
mod tests {
    use crate::env::{Action, Env, TimeLimited};

    use super::*;

    /// Plays one episode from `seed`: `policy` sees the observation and
    /// what it remembers of the episode's first one.
    fn play(seed: u64, policy: impl Fn(&[f32], &[f32]) -> usize) -> (f64, u32) {
        let mut env = TimeLimited::new(MemoryCorridor::default());
        let mut obs = [0f32; 3];
        env.reset(Some(seed), &mut obs);
        let first = obs;
        let (mut ret, mut steps) = (0.0, 0);
        loop {
            let step = env.step(Action::Discrete(policy(&obs, &first)), &mut obs);
            ret += step.reward;
            steps += 1;
            if step.terminated || step.truncated {
                assert!(step.terminated, "the answer ends it before the limit");
                return (ret, steps);
            }
        }
    }

    /// Remembering the cue earns 1 every time; the current observation
    /// alone (which is the same at every answer) earns about 0; corridors
    /// of every length from 5 to 15 occur and the cue goes both ways.
    #[test]
    fn only_memory_names_the_cue() {
        let n = 2000;
        let (mut lengths, mut remembered, mut forgetful) = (Vec::new(), 0.0, 0.0);
        for seed in 0..n {
            let (r, steps) = play(seed, |_, first| usize::from(first[1] == 1.0));
            remembered += r;
            lengths.push(steps - 2);
            forgetful += play(seed, |_, _| 0).0;
        }
        assert_eq!(remembered, n as f64);
        let chance = forgetful / n as f64;
        assert!(chance.abs() < 0.1, "{chance}");
        lengths.sort_unstable();
        lengths.dedup();
        assert_eq!(lengths, (CORRIDOR.0..=CORRIDOR.1).collect::<Vec<_>>());
    }

    #[test]
    fn the_cue_shows_at_step_0_only_and_the_answer_step_says_so() {
        let mut env = TimeLimited::new(MemoryCorridor::default());
        let mut obs = [0f32; 3];
        env.reset(Some(11), &mut obs);
        let cue = env.dynamics().cue() as usize;
        assert_eq!(obs[cue], 1.0);
        assert_eq!(obs.iter().sum::<f32>(), 1.0);
        let mut seen = vec![obs];
        loop {
            let step = env.step(Action::Discrete(1), &mut obs);
            if step.terminated {
                break;
            }
            seen.push(obs);
        }
        let (last, corridor) = seen[1..].split_last().unwrap();
        assert!(corridor.iter().all(|o| *o == [0.0; 3]));
        assert_eq!(*last, [0.0, 0.0, 1.0]);
    }
}
