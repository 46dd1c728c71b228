//! DQN's head and loss, and the loss's gradient by hand: the Huber loss's derivative is
//! the TD error clamped to ±`huber_delta`, scattered to the taken actions
//! and taken back through the dueling head (if any) and the network
//! (`FlatNet::backward_into`).

use super::Dqn;
use tch::{Kind, Reduction, Tensor};

impl Dqn {
    /// Q-values from the network's outputs `out`: the outputs, or for a
    /// dueling head `V + A - mean(A)`.
    pub(super) fn q_of(&self, out: Tensor) -> Tensor {
        if !self.cfg.dueling {
            return out;
        }
        let k = self.n_actions as i64;
        let value = out.narrow(1, 0, 1);
        let adv = out.narrow(1, 1, k);
        value + &adv - adv.mean_dim(1, true, Kind::Float)
    }

    /// The Huber loss of `q_sa` against `target`: the batch's mean, each
    /// row weighted by its importance weight under prioritized replay.
    pub(super) fn huber(
        &self,
        q_sa: &Tensor,
        target: &Tensor,
        is_weights: Option<Tensor>,
    ) -> Tensor {
        let delta = self.cfg.huber_delta;
        match is_weights {
            Some(w) => (q_sa.huber_loss(target, Reduction::None, delta) * w).mean(Kind::Float),
            None => q_sa.huber_loss(target, Reduction::Mean, delta),
        }
    }

    /// The loss's gradient by hand into `grad` (the module's comment says
    /// how). Returns the loss and `Q(s, a)`.
    pub(super) fn manual_gradient(
        &self,
        obs: &Tensor,
        actions: &Tensor,
        target: &Tensor,
        is_weights: Option<Tensor>,
        grad: &Tensor,
    ) -> (Tensor, Tensor) {
        tch::no_grad(|| {
            let traced = self.net.forward_traced(&self.params, obs);
            let q = self.q_of(traced.out.shallow_clone());
            let q_sa = q.gather(1, actions, false).squeeze_dim(1);
            let delta = self.cfg.huber_delta;
            let rows = 1.0 / q_sa.size()[0] as f64;
            let mut d_sa = (&q_sa - target).clamp(-delta, delta) * rows;
            if let Some(w) = &is_weights {
                d_sa *= w;
            }
            let d_q = q.zeros_like().scatter(1, actions, &d_sa.unsqueeze(1));
            let d_out = if self.cfg.dueling {
                // q = V + A - mean(A): V takes every action's share, each
                // advantage its own less the mean.
                let d_value = d_q.sum_dim_intlist(1, true, Kind::Float);
                let d_adv = &d_q - d_q.mean_dim(1, true, Kind::Float);
                Tensor::cat(&[d_value, d_adv], 1)
            } else {
                d_q
            };
            self.net.backward_into(&self.params, &traced, &d_out, grad);
            (self.huber(&q_sa, target, is_weights), q_sa)
        })
    }
}
