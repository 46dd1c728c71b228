//! What the off-policy continuous agents (DDPG, TD3, SAC) share: Q(s, a)
//! critics over one flat tensor ([`Critics`]: one, or twin), actions
//! rescaled between the env's box and [-1, 1] ([`ActionScale`]), and the
//! Polyak update of target networks.

use crate::nets::FlatMlp;
use tch::{Device, Tensor};

/// `count` Q-networks of the same shape whose parameters lie one after the
/// other in a single flat tensor (so one Adam and one Polyak update cover
/// them all).
#[derive(Debug, Clone)]
pub struct Critics {
    net: FlatMlp,
    count: i64,
}

impl Critics {
    pub fn new(obs_dim: usize, act_dim: usize, hidden: &[u32], count: usize) -> Critics {
        Critics {
            net: FlatMlp::new(obs_dim + act_dim, hidden, 1),
            count: count as i64,
        }
    }

    /// Fresh parameters for every critic (seed with `tch::manual_seed`).
    pub fn init(&self, device: Device) -> Tensor {
        let parts: Vec<Tensor> = (0..self.count).map(|_| self.net.init(device)).collect();
        Tensor::cat(&parts, 0)
    }

    /// Each critic's Q(obs, act), `[batch]` each.
    pub fn each(&self, params: &Tensor, obs: &Tensor, act: &Tensor) -> Vec<Tensor> {
        let x = Tensor::cat(&[obs, act], 1);
        let n = self.net.numel();
        (0..self.count)
            .map(|i| {
                self.net
                    .forward(&params.narrow(0, i * n, n), &x)
                    .squeeze_dim(1)
            })
            .collect()
    }

    /// The smallest of the critics' estimates (the clipped double-Q
    /// target; the one critic's estimate when there is one).
    pub fn min(&self, params: &Tensor, obs: &Tensor, act: &Tensor) -> Tensor {
        self.each(params, obs, act)
            .into_iter()
            .reduce(|a, b| a.minimum(&b))
            .expect("at least one critic")
    }

    /// The first critic's estimate (what DDPG and TD3 move the actor
    /// along).
    pub fn first(&self, params: &Tensor, obs: &Tensor, act: &Tensor) -> Tensor {
        let x = Tensor::cat(&[obs, act], 1);
        let n = self.net.numel();
        self.net.forward(&params.narrow(0, 0, n), &x).squeeze_dim(1)
    }
}

/// Maps actions between an env's box and [-1, 1] (where tanh heads and
/// the replay work).
#[derive(Debug, Clone)]
pub struct ActionScale {
    center: Vec<f32>,
    half: Vec<f32>,
}

impl ActionScale {
    pub fn new(low: &[f32], high: &[f32]) -> ActionScale {
        ActionScale {
            center: low.iter().zip(high).map(|(l, h)| (l + h) / 2.0).collect(),
            half: low.iter().zip(high).map(|(l, h)| (h - l) / 2.0).collect(),
        }
    }

    /// An env action in [-1, 1] units, clipped there.
    pub fn normalize(&self, action: &[f32], out: &mut Vec<f32>) {
        out.clear();
        out.extend(
            action
                .iter()
                .zip(self.center.iter().zip(&self.half))
                .map(|(a, (c, h))| ((a - c) / h).clamp(-1.0, 1.0)),
        );
    }

    /// A uniformly random env action.
    pub fn random<R: rand::Rng>(&self, rng: &mut R, out: &mut [f32]) {
        for (o, (c, h)) in out.iter_mut().zip(self.center.iter().zip(&self.half)) {
            *o = c + h * (2.0 * rng.random::<f32>() - 1.0);
        }
    }
}

/// `target ← (1 - tau)·target + tau·online`, in place.
pub fn polyak(target: &mut Tensor, online: &Tensor, tau: f64) {
    tch::no_grad(|| {
        let _ = target.lerp_(online, tau);
    });
}

/// One Adam step of `params` on its gradient (the gradient is left as it
/// is; callers zero it before their next backward pass).
pub fn adam_step(params: &mut Tensor, adam: &mut super::Adam) {
    let grad = params.grad();
    adam.step(params, &grad);
}
