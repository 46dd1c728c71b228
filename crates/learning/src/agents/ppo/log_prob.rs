//! The policy's log-probabilities: under the current weights, under given
//! weights, and for held steps under the weights of the version that acted
//! each ([`Ppo::behaviour_logp`]).

use super::{Ppo, Rollout};
use tch::{Kind, Tensor};

const HALF_LOG_2PI: f64 = 0.918_938_533_204_672_7;

impl Ppo {
    /// Log probabilities of `actions` (`[n, act_dim]`) at `obs` under the
    /// current policy, and the policy's entropy there, each `[n]`.
    pub(super) fn log_prob_entropy(&self, obs: &Tensor, actions: &Tensor) -> (Tensor, Tensor) {
        self.log_prob_entropy_under(&self.nets.policy, obs, actions)
    }

    /// [`Ppo::log_prob_entropy`] under the policy weights `policy`.
    pub(super) fn log_prob_entropy_under(
        &self,
        policy: &Tensor,
        obs: &Tensor,
        actions: &Tensor,
    ) -> (Tensor, Tensor) {
        let n_mlp = self.nets.policy_net.numel();
        let out = self
            .nets
            .policy_net
            .forward(&policy.narrow(0, 0, n_mlp), obs);
        self.log_prob_entropy_of(policy, &out, actions)
    }

    /// [`Ppo::log_prob_entropy_under`] from the policy network's outputs
    /// `out` (`policy`: the weights, whose tail holds continuous log stds).
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

    /// log μ(a|x) of every held step (`[n]`, on the device), under the
    /// weights of the version that acted it.
    pub(super) fn behaviour_logp(
        &mut self,
        segments: &[Rollout],
        obs: &Tensor,
        actions: &Tensor,
    ) -> Tensor {
        let versions: Vec<u64> = segments
            .iter()
            .flat_map(|s| s.versions.iter().copied())
            .collect();
        if versions.iter().all(|&v| v == self.train_steps) {
            return tch::no_grad(|| self.log_prob_entropy(obs, actions).0);
        }
        let logp = |w: &Tensor, idx: &Tensor| {
            let (obs, actions) = (obs.index_select(0, idx), actions.index_select(0, idx));
            self.log_prob_entropy_under(w, &obs, &actions).0
        };
        let current = Some(&self.nets.policy);
        let (mu, fell_back) = self
            .kept
            .logp_by_version(&versions, self.device, current, logp);
        self.uncorrected += fell_back as u64;
        Tensor::from_slice(&mu).to_device(self.device)
    }

    /// Only the weights now loaded are kept (what acted before is another
    /// run's).
    pub(super) fn forget_versions(&mut self) {
        self.kept.reset(self.train_steps, &self.nets.policy);
        self.actor_fresh = false;
    }
}
