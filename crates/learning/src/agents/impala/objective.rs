//! IMPALA's gradient step: V-trace targets and policy-gradient advantages
//! per unroll (on the host, `agents::vtrace`) from the current networks'
//! outputs and the behaviour log-probs, then the policy-gradient, baseline
//! and entropy losses — shared by the feed-forward and the recurrent
//! update.

use super::{Impala, RhoStats, Unroll};
use crate::agents::vtrace::{Clipping, vtrace};
use tch::{Kind, Tensor};

impl Impala {
    /// One gradient step from the current networks' log-probs, entropies
    /// and values at every held step (`[n]` each, in the unrolls' order)
    /// and the values `boot` after each unroll's last step: V-trace
    /// targets and advantages against the behaviour log-probs `mu`.
    pub(super) fn vtrace_step(
        &mut self,
        unrolls: &[Unroll],
        (logp, entropy, values): (Tensor, Tensor, Tensor),
        boot: &Tensor,
        mu: &[f32],
    ) {
        #[cfg(test)]
        {
            self.last_mu = mu.to_vec();
        }
        let host = |t: &Tensor| -> Vec<f32> { Vec::try_from(&t.detach()).expect("f32 values") };
        let log_rhos: Vec<f32> = host(&logp).iter().zip(mu).map(|(p, m)| p - m).collect();
        let (v, boot) = (host(&values), host(boot));
        let clip = Clipping {
            rho_bar: self.cfg.rho_bar as f32,
            c_bar: self.cfg.c_bar as f32,
            lambda: self.cfg.lambda as f32,
        };
        let gamma = self.cfg.gamma as f32;
        let (mut vs, mut adv, mut rhos) = (Vec::new(), Vec::new(), Vec::new());
        let mut at = 0;
        for (u, &b) in unrolls.iter().zip(&boot) {
            let len = u.len();
            let mut discounts = vec![gamma; len];
            let bootstrap = if u.terminated {
                discounts[len - 1] = 0.0;
                0.0
            } else {
                b
            };
            let r = at..at + len;
            let out = vtrace(
                &log_rhos[r.clone()],
                &discounts,
                &u.rewards,
                &v[r],
                bootstrap,
                clip,
            );
            vs.extend(out.vs);
            adv.extend(out.pg_advantages);
            rhos.extend(out.rhos);
            at += len;
        }
        let n = rhos.len() as f64;
        self.last_rho = Some(RhoStats {
            mean: rhos.iter().map(|&r| f64::from(r)).sum::<f64>() / n,
            // Clipped by more than rounding: an on-policy step's ρ is 1 up
            // to the rounding between the actor's log-probability and the
            // learner's.
            clipped: rhos
                .iter()
                .filter(|&&r| r > clip.rho_bar * (1.0 + 1e-5))
                .count() as f64
                / n,
        });
        let vs = Tensor::from_slice(&vs).to_device(self.device);
        let adv = Tensor::from_slice(&adv).to_device(self.device);
        let pg_loss = -(adv * &logp).mean(Kind::Float);
        let baseline_loss = (vs - &values).square().mean(Kind::Float) * 0.5;
        let entropy = entropy.mean(Kind::Float);
        let loss =
            pg_loss + baseline_loss * self.cfg.baseline_cost - &entropy * self.cfg.entropy_cost;
        self.nets.step(&loss, self.cfg.max_grad_norm);
        self.train_steps += 1;
        self.last_loss = Some(loss.detach());
        self.last_entropy = Some(entropy.detach());
    }
}
