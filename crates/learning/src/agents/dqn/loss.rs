//! DQN's head and loss, and the loss's gradient by hand: the Huber loss's derivative is
//! the TD error clamped to ±`huber_delta`, scattered to the taken actions
//! and taken back through the dueling head (if any) and the network
//! (`FlatNet::backward_into`).

use super::Dqn;
use crate::agents::{AgentState, NamedTensor, to_vec};
use crate::device::host_values;
use rlfleet_shared::nets::argmax;
use tch::{Kind, Reduction, Tensor};

/// The state's tensor that keeps the largest |reward| observed.
const MAX_ABS_REWARD: &str = "reward.max_abs";

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

    /// The largest |Q(s, a)| the online network gives the last sampled
    /// batch's observations (NaN if one is), and the largest discounted
    /// return the rewards observed allow (max |reward| / (1 − γ)); `None`
    /// before the first gradient step or reward. Far above the bound, the
    /// values have diverged (the run's `ValueWatch` says so).
    pub(super) fn q_watch(&self) -> Option<(f64, f64)> {
        if self.train_steps == 0 || self.max_abs_reward == 0.0 {
            return None;
        }
        let b = self.replay.batch.batch as i64;
        let (both, _) = crate::agents::batch_on_device(&self.replay.batch, self.device);
        let q = tch::no_grad(|| self.q(&self.params, &both.narrow(0, 0, b)));
        let q_max = q.abs().max().double_value(&[]);
        Some((q_max, self.return_bound()))
    }

    /// The largest |reward| observed, as a tensor of the agent's state:
    /// it goes with a checkpoint, so that a resumed run bounds its first
    /// targets as the run it resumes would have.
    pub(super) fn reward_bound_state(&self) -> NamedTensor {
        NamedTensor {
            name: MAX_ABS_REWARD.into(),
            shape: vec![1],
            data: vec![self.max_abs_reward],
        }
    }

    /// Takes the largest |reward| back from a state. One from before it
    /// was kept has none: the next transition observed sets it.
    pub(super) fn load_reward_bound(&mut self, s: &AgentState) {
        self.max_abs_reward = s
            .tensor(MAX_ABS_REWARD)
            .ok()
            .and_then(|t| t.data.first().copied())
            .unwrap_or(0.0);
    }

    /// The bound of bootstrapped values under `dqn.bound_targets`: the
    /// largest discounted return the rewards seen so far allow.
    fn target_bound(&self) -> Option<f32> {
        (self.cfg.bound_targets && self.max_abs_reward > 0.0).then(|| self.return_bound() as f32)
    }

    /// max |reward| / (1 − γ): the largest discounted return the rewards
    /// observed allow.
    fn return_bound(&self) -> f64 {
        f64::from(self.max_abs_reward) / (1.0 - self.cfg.gamma)
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

    /// The loss and its gradient through autograd (on an accelerator, or
    /// for networks `FlatNet::backward_into` does not cover), with each
    /// row's |TD error| under prioritized replay (a host sync per step).
    pub(super) fn autograd_gradient(
        &self,
        obs: &Tensor,
        next: &Tensor,
        data: &Tensor,
    ) -> (Tensor, Vec<f32>, Tensor) {
        let batch = &self.replay.batch;
        let bi = batch.batch as i64;
        let [_, _, o_act, o_rew, o_disc] = batch.offsets().map(|o| o as i64);
        let actions = data.narrow(0, o_act, bi).to_kind(Kind::Int64).unsqueeze(1);
        let rewards = data.narrow(0, o_rew, bi);
        let discounts = data.narrow(0, o_disc, bi);
        // The online network sees the next observations only to pick
        // double Q's action, without a gradient: a pass over both halves
        // would take its backward over twice the rows, half of them zeros.
        let target = tch::no_grad(|| {
            let q_next_target = self.q(&self.target, next);
            let next_q = if self.cfg.double {
                let best = self.q(&self.params, next).argmax(1, true);
                q_next_target.gather(1, &best, false).squeeze_dim(1)
            } else {
                q_next_target.amax(1, false)
            };
            let next_q = match self.target_bound() {
                Some(b) => next_q.clamp(-f64::from(b), f64::from(b)),
                None => next_q,
            };
            rewards + discounts * next_q
        });
        let is_weights = self
            .replay
            .prioritized()
            .then(|| Tensor::from_slice(&self.replay.is_weights).to_device(self.device));
        let q_sa = self
            .q(&self.params, obs)
            .gather(1, &actions, false)
            .squeeze_dim(1);
        let loss = self.huber(&q_sa, &target, is_weights);
        let [grad] = crate::agents::gradients(&loss, [&self.params]);
        let td_abs = match self.replay.prioritized() {
            true => to_vec(&(q_sa.detach() - &target).abs()),
            false => Vec::new(),
        };
        (loss, td_abs, grad)
    }

    /// The loss's gradient by hand into `grad` (the module's comment says
    /// how), for the sampled batch's observations `obs` and next
    /// observations `next`: the networks' passes through `FlatNet`, the
    /// targets, the loss and its derivative on the host (a few hundred
    /// values, where each libtorch operation would cost more than its
    /// work). Returns the loss and, under prioritized replay, each row's
    /// |TD error|.
    pub(super) fn manual_gradient(
        &self,
        obs: &Tensor,
        next: &Tensor,
        grad: &Tensor,
    ) -> (f64, Vec<f32>) {
        fn host(t: &Tensor) -> &[f32] {
            host_values(t).expect("a CPU network's fresh f32 outputs")
        }
        tch::no_grad(|| {
            let outputs = |params: &Tensor, x: &Tensor| self.net.forward_traced(params, x).out;
            let next_target = outputs(&self.target, next);
            let next_online = self.cfg.double.then(|| outputs(&self.params, next));
            let traced = self.net.forward_traced(&self.params, obs);
            let out = host(&traced.out);
            let mut d_out = vec![0f32; out.len()];
            let next_online = next_online.as_ref().map(host);
            let (loss, td_abs) = self.host_loss(out, host(&next_target), next_online, &mut d_out);
            let d_out = Tensor::from_slice(&d_out).view(traced.out.size().as_slice());
            self.net.backward_into(&self.params, &traced, &d_out, grad);
            (loss, td_abs)
        })
    }

    /// Q-values of one row of network outputs: the outputs, or for a
    /// dueling head `V + A - mean(A)`.
    fn q_row(&self, out: &[f32], q: &mut [f32]) {
        if !self.cfg.dueling {
            q.copy_from_slice(out);
            return;
        }
        let adv = &out[1..];
        let mean = adv.iter().sum::<f32>() / adv.len() as f32;
        for (q, a) in q.iter_mut().zip(adv) {
            *q = out[0] + a - mean;
        }
    }

    /// The Huber loss over the sampled batch and its derivative with
    /// respect to the online network's outputs `out` (into `d_out`), from
    /// the next observations' outputs under the target network (and, for
    /// double Q, the online one). Returns the loss (the batch's mean,
    /// weighted under prioritized replay) and, under prioritized replay,
    /// each row's |TD error|.
    fn host_loss(
        &self,
        out: &[f32],
        next_target: &[f32],
        next_online: Option<&[f32]>,
        d_out: &mut [f32],
    ) -> (f64, Vec<f32>) {
        let batch = &self.replay.batch;
        let b = batch.batch;
        let [_, _, o_act, o_rew, o_disc] = batch.offsets();
        let width = out.len() / b;
        let k = self.n_actions;
        let delta = self.cfg.huber_delta as f32;
        let weights = self.replay.prioritized().then_some(&self.replay.is_weights);
        let (mut q, mut q_next, mut q_pick) = (vec![0f32; k], vec![0f32; k], vec![0f32; k]);
        let mut td_abs = Vec::with_capacity(if weights.is_some() { b } else { 0 });
        let mut loss = 0f64;
        let bound = self.target_bound().unwrap_or(f32::INFINITY);
        for i in 0..b {
            let r = i * width..(i + 1) * width;
            self.q_row(&next_target[r.clone()], &mut q_next);
            let next_value = match next_online {
                Some(online) => {
                    self.q_row(&online[r.clone()], &mut q_pick);
                    q_next[argmax(&q_pick)]
                }
                None => q_next.iter().copied().fold(f32::NEG_INFINITY, f32::max),
            }
            .clamp(-bound, bound);
            let target = batch.data[o_rew + i] + batch.data[o_disc + i] * next_value;
            self.q_row(&out[r.clone()], &mut q);
            let a = batch.data[o_act + i] as usize;
            let td = q[a] - target;
            let w = weights.map_or(1.0, |w| w[i]);
            let huber = if td.abs() <= delta {
                0.5 * td * td
            } else {
                delta * (td.abs() - 0.5 * delta)
            };
            loss += f64::from(w * huber);
            if weights.is_some() {
                td_abs.push(td.abs());
            }
            let d = td.clamp(-delta, delta) / b as f32 * w;
            let d_row = &mut d_out[r];
            if self.cfg.dueling {
                // q = V + A - mean(A): V takes every action's share, each
                // advantage its own less the mean.
                d_row[0] = d;
                for (j, da) in d_row[1..].iter_mut().enumerate() {
                    *da = if j == a { d } else { 0.0 } - d / k as f32;
                }
            } else {
                d_row[a] = d;
            }
        }
        (loss / b as f64, td_abs)
    }
}
