//! A sampled batch of R2D2 sequences laid out for the device
//! ([`Layout`]): each sequence's burn-in steps right-aligned in a burn
//! block, its training steps and bootstrap
//! observation from the top of a main block, and per training step the
//! n-step discounted reward sum, the row its target bootstraps from and
//! that bootstrap's discount (0 past a termination); with the value
//! rescaling h and its inverse.

use rlfleet_replay::{ObsStore, Sequence};
use tch::Tensor;

/// Host arrays, time-major (`[t * batch + b]`); observations as the
/// replay keeps them (a uint8 env's as bytes, uploaded as bytes).
#[derive(Debug)]
pub(super) struct Layout {
    /// `[burn * batch, obs_dim]`; the main block
    /// `[(unroll + 1) * batch, obs_dim]` holds the bootstrap observation
    /// after the training steps.
    pub x_burn: ObsStore,
    pub x_main: ObsStore,
    pub states: Vec<f32>,
    /// `[unroll * batch]`: the action taken, 1 where a step trains, the
    /// n-step reward sum, the main-block row the target bootstraps from
    /// and the bootstrap's discount.
    pub actions: Vec<i64>,
    pub mask: Vec<f32>,
    pub returns: Vec<f32>,
    pub boot_rows: Vec<i64>,
    pub boot_disc: Vec<f32>,
}

impl Layout {
    /// Lays out `seqs` (each at most `burn` burn-in steps and `unroll`
    /// training steps) with `n`-step targets discounted by `gamma`.
    pub fn new(
        seqs: &[Sequence<'_>],
        od: usize,
        (burn, unroll): (usize, usize),
        n: usize,
        gamma: f64,
    ) -> Layout {
        let b = seqs.len();
        let bytes = seqs.first().is_some_and(|s| s.obs.is_bytes());
        let mut l = Layout {
            x_burn: ObsStore::new(burn * b * od, bytes),
            x_main: ObsStore::new((unroll + 1) * b * od, bytes),
            states: Vec::new(),
            actions: vec![0; unroll * b],
            mask: vec![0.0; unroll * b],
            returns: vec![0.0; unroll * b],
            boot_rows: vec![0; unroll * b],
            boot_disc: vec![0.0; unroll * b],
        };
        for (j, s) in seqs.iter().enumerate() {
            let beta = s.burn as usize;
            let len = s.steps() - beta;
            assert!(
                beta <= burn && len <= unroll && len >= 1,
                "a sequence of this run"
            );
            l.states.extend_from_slice(s.state);
            for t in 0..beta {
                let pos = (burn - beta + t) * b + j;
                s.obs.write_row(t, od, &mut l.x_burn, pos * od);
            }
            for t in 0..=len {
                let pos = t * b + j;
                s.obs.write_row(beta + t, od, &mut l.x_main, pos * od);
            }
            for t in 0..len {
                let pos = t * b + j;
                let m = n.min(len - t);
                let mut g = 0.0;
                for k in (0..m).rev() {
                    g = f64::from(s.rewards[beta + t + k]) + gamma * g;
                }
                l.actions[pos] = s.actions[beta + t] as i64;
                l.mask[pos] = 1.0;
                l.returns[pos] = g as f32;
                l.boot_rows[pos] = ((t + m) * b + j) as i64;
                let ends = s.terminated && t + m == len;
                l.boot_disc[pos] = if ends {
                    0.0
                } else {
                    gamma.powi(m as i32) as f32
                };
            }
        }
        l
    }
}

/// h(x) = sign(x)(√(|x| + 1) − 1) + εx.
pub(super) fn rescale(x: &Tensor, eps: f64) -> Tensor {
    x.sign() * ((x.abs() + 1.0).sqrt() - 1.0) + x * eps
}

/// h⁻¹(x) = sign(x)(((√(1 + 4ε(|x| + 1 + ε)) − 1) / 2ε)² − 1) (the
/// identity at ε = 0 is h's inverse without the linear term).
pub(super) fn unrescale(x: &Tensor, eps: f64) -> Tensor {
    if eps == 0.0 {
        return x.sign() * ((x.abs() + 1.0).square() - 1.0);
    }
    let root = ((x.abs() + 1.0 + eps) * (4.0 * eps) + 1.0).sqrt();
    x.sign() * (((root - 1.0) / (2.0 * eps)).square() - 1.0)
}
