//! The critics of the off-policy continuous agents (DDPG, TD3, SAC): Q(s, a)
//! networks over one flat tensor ([`Critics`]: one, or twin), the Polyak
//! update of target networks, and an Adam step on a tensor's gradient.

use crate::nets::FlatNet;
use tch::{Device, Tensor};

/// `count` Q-networks of the same shape whose parameters lie one after the
/// other in a single flat tensor (so one Adam and one Polyak update cover
/// them all).
#[derive(Debug, Clone)]
pub struct Critics {
    net: FlatNet,
    count: i64,
}

impl Critics {
    pub fn new(obs_dim: usize, act_dim: usize, hidden: &[u32], count: usize) -> Critics {
        Critics {
            net: FlatNet::new(obs_dim + act_dim, hidden, 1),
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

    /// The sum over critics of the mean squared error against `target`.
    pub fn mse(&self, params: &Tensor, obs: &Tensor, act: &Tensor, target: &Tensor) -> Tensor {
        self.each(params, obs, act)
            .into_iter()
            .map(|q| (q - target).square().mean(tch::Kind::Float))
            .reduce(|a, b| a + b)
            .expect("at least one critic")
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

/// `target ← (1 - tau)·target + tau·online`, in place.
pub fn polyak(target: &mut Tensor, online: &Tensor, tau: f64) {
    tch::no_grad(|| {
        let _ = target.lerp_(online, tau);
    });
}

/// One Adam step of `params` down the gradient of `loss` (other tensors
/// the loss reaches get no gradient from it).
pub fn descend(loss: &Tensor, params: &mut Tensor, adam: &mut super::Adam) {
    let [grad] = super::gradients(loss, [&*params]);
    adam.step(params, &grad);
}
