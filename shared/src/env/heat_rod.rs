//! HeatRod-v0: a small parallel simulation — a rod whose cells are split
//! over the ranks of an env group — with a heater to steer. The built-in
//! env that uses [`Collective`]: each sub-step exchanges the boundary
//! cells of every rank's share (an allgather), and the observation and
//! reward come from an allreduce of per-segment sums. On one rank
//! ([`Solo`]) it is the same simulation, value for value: the sums of a
//! segment are taken by the one rank that holds it, so K = 1, 2, 4 and 8
//! give bit-identical episodes.
//!
//! Physics: explicit 1-D diffusion (coefficient 0.2 per sub-step, cold
//! ends), 16 sub-steps per step; the heater adds 0, 0.5 or 1 times 0.005
//! per sub-step to the middle quarter of the rod (actions 0, 1, 2). The
//! observation is the mean temperature of 8 equal segments and the target;
//! the reward is minus the distance of the middle quarter's mean
//! temperature from the target. A reset draws the initial profile's
//! amplitude from U(0, 1) and the target from U(0.2, 0.8). 100 steps, no
//! termination. A random policy scores about −21, a thermostat about −3.

use super::collective::{Collective, Solo, share};
use super::time_limit::{Dynamics, discrete};
use super::{Action, EnvRng, EnvSpec, ObsDtype, Space};
use std::borrow::Cow;

/// Segments the observation averages over.
pub const HEAT_SEGMENTS: usize = 8;
/// Steps per episode.
pub const HEAT_MAX_STEPS: u32 = 100;
const DIFFUSION: f64 = 0.2;
const POWER: f64 = 0.005;

/// The heated rod, this rank's share of it.
#[derive(Debug)]
pub struct HeatRod {
    spec: EnvSpec,
    comm: Box<dyn Collective>,
    cells: usize,
    substeps: u32,
    /// The global index of this rank's first cell.
    first: usize,
    /// This rank's cells.
    u: Vec<f64>,
    next: Vec<f64>,
    target: f64,
    /// Segment means, then the target.
    coarse: [f64; HEAT_SEGMENTS + 1],
}

impl Default for HeatRod {
    fn default() -> Self {
        HeatRod::new(32, 16, Box::new(Solo))
    }
}

impl HeatRod {
    /// A rod of `cells` cells (a multiple of 8, at least as many as the
    /// group has ranks) stepped `substeps` times per step, split over
    /// `comm`'s ranks.
    pub fn new(cells: usize, substeps: u32, comm: Box<dyn Collective>) -> HeatRod {
        HeatRod::try_new(cells, substeps, comm).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`HeatRod::new`] from `env_kwargs` (`cells`, `substeps`; defaults
    /// 32 and 16): the knob that makes the env as heavy as a benchmark
    /// wants (the dynamics' time scales change with the size).
    pub fn from_kwargs(kwargs_json: &str, comm: Box<dyn Collective>) -> Result<HeatRod, String> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Kwargs {
            #[serde(default = "cells")]
            cells: usize,
            #[serde(default = "substeps")]
            substeps: u32,
        }
        fn cells() -> usize {
            32
        }
        fn substeps() -> u32 {
            16
        }
        let k: Kwargs = if kwargs_json.is_empty() {
            serde_json::from_str("{}")
        } else {
            serde_json::from_str(kwargs_json)
        }
        .map_err(|e| format!("HeatRod-v0 takes env_kwargs cells and substeps: {e}"))?;
        HeatRod::try_new(k.cells, k.substeps, comm)
    }

    fn try_new(cells: usize, substeps: u32, comm: Box<dyn Collective>) -> Result<HeatRod, String> {
        if !cells.is_multiple_of(HEAT_SEGMENTS) || cells < comm.size().max(HEAT_SEGMENTS) {
            return Err(format!(
                "HeatRod-v0: cells = {cells} must be a multiple of {HEAT_SEGMENTS} and at least \
                 the group's {} ranks",
                comm.size()
            ));
        }
        if substeps == 0 {
            return Err("HeatRod-v0: substeps must be at least 1".into());
        }
        let mine = share(cells, comm.rank(), comm.size());
        let n = HEAT_SEGMENTS + 1;
        Ok(HeatRod {
            spec: EnvSpec {
                id: Cow::Borrowed("HeatRod-v0"),
                observation_space: Space::Box {
                    low: vec![0.0; n],
                    high: vec![10.0; n],
                },
                obs_shape: vec![n],
                obs_dtype: ObsDtype::F32,
                action_space: Space::Discrete { n: 3 },
                max_episode_steps: Some(HEAT_MAX_STEPS),
                reward_threshold: None,
            },
            first: mine.start,
            u: vec![0.0; mine.len()],
            next: vec![0.0; mine.len()],
            comm,
            cells,
            substeps,
            target: 0.5,
            coarse: [0.0; HEAT_SEGMENTS + 1],
        })
    }

    /// Whether global cell `i` is under the heater (the middle quarter).
    fn heated(&self, i: usize) -> bool {
        (3 * self.cells / 8..5 * self.cells / 8).contains(&i)
    }

    /// One explicit diffusion sub-step, with `heat` added under the heater.
    fn substep(&mut self, heat: f64) {
        let ends = [self.u[0], self.u[self.u.len() - 1]];
        let all = self.comm.all_gather(&ends);
        let r = self.comm.rank();
        let left = if r == 0 { 0.0 } else { all[2 * r - 1] };
        let right = all.get(2 * r + 2).copied().unwrap_or(0.0);
        let m = self.u.len();
        for j in 0..m {
            let l = if j == 0 { left } else { self.u[j - 1] };
            let rt = if j + 1 == m { right } else { self.u[j + 1] };
            let mut v = self.u[j] + DIFFUSION * (l - 2.0 * self.u[j] + rt);
            if self.heated(self.first + j) {
                v += heat;
            }
            self.next[j] = v;
        }
        std::mem::swap(&mut self.u, &mut self.next);
    }

    /// Segment means over the whole rod (an allreduce of this rank's sums).
    fn gather(&mut self) {
        let mut sums = [0.0; HEAT_SEGMENTS];
        let per = self.cells / HEAT_SEGMENTS;
        for (j, v) in self.u.iter().enumerate() {
            sums[(self.first + j) / per] += v;
        }
        self.comm.all_sum(&mut sums);
        for (c, s) in self.coarse.iter_mut().zip(sums) {
            *c = s / per as f64;
        }
        self.coarse[HEAT_SEGMENTS] = self.target;
    }

    /// The mean temperature under the heater (segments 3 and 4).
    pub fn heated_mean(&self) -> f64 {
        (self.coarse[3] + self.coarse[4]) / 2.0
    }
}

impl Dynamics for HeatRod {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, rng: &mut EnvRng, _seed: Option<u64>) {
        let amplitude = rng.uniform(0.0, 1.0);
        self.target = rng.uniform(0.2, 0.8);
        for (j, v) in self.u.iter_mut().enumerate() {
            let x = (self.first + j) as f64 + 0.5;
            *v = amplitude * (std::f64::consts::PI * x / self.cells as f64).sin();
        }
        self.gather();
    }

    fn step(&mut self, action: Action<'_>) -> (f64, bool) {
        let level = discrete(action, 3, &self.spec.id) as f64 * 0.5;
        for _ in 0..self.substeps {
            self.substep(level * POWER);
        }
        self.gather();
        (-(self.heated_mean() - self.target).abs(), false)
    }

    fn observe(&self, obs: &mut [f32]) {
        for (o, c) in obs.iter_mut().zip(self.coarse) {
            *o = c as f32;
        }
    }

    /// This rank's cells, then the target.
    fn state(&self) -> Vec<f64> {
        let mut s = self.u.clone();
        s.push(self.target);
        s
    }

    fn set_state(&mut self, state: &[f64]) {
        let m = self.u.len();
        self.u.copy_from_slice(&state[..m]);
        self.target = state[m];
        self.gather();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{Env, TimeLimited};

    fn episode(policy: impl Fn(&[f32]) -> usize, seed: u64) -> f64 {
        let mut env = TimeLimited::new(HeatRod::default());
        let mut obs = vec![0f32; 9];
        env.reset(Some(seed), &mut obs);
        let mut ret = 0.0;
        loop {
            let s = env.step(Action::Discrete(policy(&obs)), &mut obs);
            ret += s.reward;
            if s.done() {
                assert!(s.truncated && !s.terminated);
                return ret;
            }
        }
    }

    #[test]
    fn kwargs_size_the_rod_and_bad_ones_are_named() {
        let rod = HeatRod::from_kwargs(r#"{"cells": 64, "substeps": 2}"#, Box::new(Solo)).unwrap();
        assert_eq!((rod.cells, rod.substeps, rod.u.len()), (64, 2, 64));
        let e = HeatRod::from_kwargs(r#"{"cells": 30}"#, Box::new(Solo)).unwrap_err();
        assert!(e.contains("cells = 30"), "{e}");
        let e = HeatRod::from_kwargs(r#"{"size": 3}"#, Box::new(Solo)).unwrap_err();
        assert!(e.contains("unknown field `size`"), "{e}");
    }

    #[test]
    fn a_thermostat_beats_doing_nothing_and_full_power() {
        let thermostat = |o: &[f32]| {
            let t = (o[3] + o[4]) / 2.0;
            if t < o[8] - 0.02 {
                2
            } else if t < o[8] + 0.02 {
                1
            } else {
                0
            }
        };
        let mean = |p: &dyn Fn(&[f32]) -> usize| (0..20).map(|s| episode(p, s)).sum::<f64>() / 20.0;
        let (good, off, full) = (mean(&thermostat), mean(&|_| 0), mean(&|_| 2));
        assert!(
            good > -5.0 && off < -25.0 && full < -40.0,
            "{good} {off} {full}"
        );
    }
}
