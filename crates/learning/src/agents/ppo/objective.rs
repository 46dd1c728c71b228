//! PPO's objective: GAE advantages over held segments, and one gradient
//! step of the clipped surrogate with the value loss and entropy bonus —
//! shared by the feed-forward and the recurrent update.

use super::{Ppo, Rollout};
use tch::{Kind, Tensor};

impl Ppo {
    /// GAE advantages of every step of `segments` (in order), from their
    /// values `[n]` and the values `boot` `[segments]` of the state after
    /// each one's last step; on the device.
    pub(super) fn gae(&self, segments: &[Rollout], values: &Tensor, boot: &Tensor) -> Tensor {
        let n = values.size()[0] as usize;
        let values: Vec<f32> = Vec::try_from(values).expect("f32 values");
        let boot: Vec<f32> = Vec::try_from(boot).expect("f32 values");
        let (gamma, lambda) = (self.cfg.gamma as f32, self.cfg.gae_lambda as f32);
        let mut adv = vec![0f32; n];
        let mut start = 0;
        for (s, &b) in segments.iter().zip(&boot) {
            let len = s.len();
            let mut gae = 0.0;
            for t in (0..len).rev() {
                let next_v = if t + 1 < len {
                    values[start + t + 1]
                } else if s.terminated {
                    0.0
                } else {
                    b
                };
                let delta = s.rewards[t] + gamma * next_v - values[start + t];
                gae = delta + gamma * lambda * gae;
                adv[start + t] = gae;
            }
            start += len;
        }
        Tensor::from_slice(&adv).to_device(self.device)
    }

    /// One gradient step of the clipped objective, from the current
    /// policy's log probabilities, entropies and values at a minibatch's
    /// steps, `[m]` each.
    pub(super) fn loss_step(
        &mut self,
        (logp, entropy, v): (Tensor, Tensor, Tensor),
        old_logp: &Tensor,
        old_values: &Tensor,
        adv: &Tensor,
        returns: &Tensor,
    ) {
        let mut adv = adv.shallow_clone();
        if self.cfg.normalize_advantage && adv.size()[0] > 1 {
            adv = (&adv - adv.mean(Kind::Float)) / (adv.std(true) + 1e-8);
        }
        let ratio = (logp - old_logp).exp();
        let c = self.cfg.clip_range;
        let surrogate = (&ratio * &adv).minimum(&(ratio.clamp(1.0 - c, 1.0 + c) * &adv));
        let policy_loss = -surrogate.mean(Kind::Float);
        let mut v = v;
        if self.cfg.clip_range_vf > 0.0 {
            let cv = self.cfg.clip_range_vf;
            v = old_values + (&v - old_values).clamp(-cv, cv);
        }
        let value_loss = (returns - v).square().mean(Kind::Float);
        let entropy = entropy.mean(Kind::Float);
        let loss = &policy_loss - &entropy * self.cfg.ent_coef + value_loss * self.cfg.vf_coef;
        self.nets.step(&loss, self.cfg.max_grad_norm);
        self.train_steps += 1;
        self.last_loss = Some(loss.detach());
        self.last_entropy = Some(entropy.detach());
    }
}
