//! The policy's log-probabilities: under the current weights, and the
//! behaviour policy's of held steps ([`Ppo::behaviour_logp`]).

use super::{Ppo, Rollout};
use crate::agents::rollout;
use tch::{Kind, Tensor};

const HALF_LOG_2PI: f64 = 0.918_938_533_204_672_7;

impl Ppo {
    /// Log probabilities of `actions` (`[n, act_dim]`) at `obs` under the
    /// current policy, and the policy's entropy there, each `[n]`.
    pub(super) fn log_prob_entropy(&self, obs: &Tensor, actions: &Tensor) -> (Tensor, Tensor) {
        let n_mlp = self.nets.policy_net.numel();
        let policy = &self.nets.policy;
        let out = self
            .nets
            .policy_net
            .forward(&policy.narrow(0, 0, n_mlp), obs);
        self.log_prob_entropy_of(policy, &out, actions)
    }

    /// [`Ppo::log_prob_entropy`] from the policy network's outputs `out`
    /// (`policy`: the weights, whose tail holds continuous log stds).
    pub(super) fn log_prob_entropy_of(
        &self,
        policy: &Tensor,
        out: &Tensor,
        actions: &Tensor,
    ) -> (Tensor, Tensor) {
        let n_mlp = self.nets.policy_net.numel();
        if self.discrete {
            let logp_all = out.log_softmax(1, Kind::Float);
            let idx = actions.to_kind(Kind::Int64);
            let logp = logp_all.gather(1, &idx, false).squeeze_dim(1);
            let entropy = -(logp_all.exp() * &logp_all).sum_dim_intlist(1, false, Kind::Float);
            return (logp, entropy);
        }
        let log_std = policy.narrow(0, n_mlp, self.act_dim as i64);
        let z = (actions - out) / log_std.exp();
        let logp =
            (z.square() * -0.5 - &log_std - HALF_LOG_2PI).sum_dim_intlist(1, false, Kind::Float);
        let entropy = (&log_std + 0.5 + HALF_LOG_2PI)
            .sum(Kind::Float)
            .expand([out.size()[0]], false);
        (logp, entropy)
    }

    /// log μ(a|x) of every held step (`[n]`, on the device): the one it
    /// carries, or where it carries none the current policy's (counted).
    pub(super) fn behaviour_logp(
        &mut self,
        segments: &[Rollout],
        obs: &Tensor,
        actions: &Tensor,
    ) -> Tensor {
        match self.carried_logp(segments) {
            (carried, false) => carried,
            (carried, true) => {
                let current = tch::no_grad(|| self.log_prob_entropy(obs, actions).0);
                or_current(&carried, &current)
            }
        }
    }

    /// Every held step's carried behaviour log-probability (`[n]`, on the
    /// device, in the segments' order; NaN where it carries none, each
    /// counted in `uncorrected`), and whether any carries none.
    pub(super) fn carried_logp(&mut self, segments: &[Rollout]) -> (Tensor, bool) {
        let mu = rollout::behaviour(segments);
        let missing = mu.iter().filter(|l| l.is_nan()).count();
        self.uncorrected += missing as u64;
        (Tensor::from_slice(&mu).to_device(self.device), missing > 0)
    }
}

/// `carried` where it is known, `current` where it is NaN.
pub(super) fn or_current(carried: &Tensor, current: &Tensor) -> Tensor {
    current.where_self(&carried.isnan(), carried)
}
