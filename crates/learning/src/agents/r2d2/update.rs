//! [`R2d2`]'s gradient step: a prioritized batch of sequences burned in
//! through the online and target networks, n-step double-Q targets under
//! h, the importance-weighted squared loss, and the priorities it gives
//! back.

use super::R2d2;
use super::batch::{Layout, rescale, unrescale};
use crate::agents::{Adam, rows_on_device, to_vec};
use rlfleet_replay::ObsStore;
use tch::{Kind, Tensor};

impl R2d2 {
    /// Each sequence's state after its burn-in (`burns[j]` steps, the
    /// last of the burn block `x_burn`) through the online and the target
    /// network, from the stored `states`: the sequences of each burn-in
    /// length run together through the fused LSTM; one without burn-in
    /// keeps its stored state.
    pub(super) fn burn_in(
        &self,
        burns: &[u32],
        x_burn: &ObsStore,
        states: &Tensor,
    ) -> (Tensor, Tensor) {
        let (burn, b, od) = (
            i64::from(self.cfg.burn_in),
            burns.len() as i64,
            self.obs_dim as i64,
        );
        let (mut online, mut target) = (states.copy(), states.copy());
        if burn == 0 {
            return (online, target);
        }
        let x = rows_on_device(&[x_burn], self.obs_dim, self.device).view([burn, b, od]);
        let mut lengths: Vec<u32> = burns.iter().copied().filter(|&n| n > 0).collect();
        lengths.sort_unstable();
        lengths.dedup();
        for n in lengths {
            let rows: Vec<i64> = (0..b).filter(|&j| burns[j as usize] == n).collect();
            let rows = Tensor::from_slice(&rows).to_device(self.device);
            let n = i64::from(n);
            let xs = x
                .narrow(0, burn - n, n)
                .index_select(1, &rows)
                .reshape([-1, od]);
            let s0 = states.index_select(0, &rows);
            for (params, out) in [(&self.params, &mut online), (&self.target, &mut target)] {
                let end = self.net.forward_seq_all(params, &xs, &s0, n).1;
                *out = out.index_copy(0, &rows, &end);
            }
        }
        (online, target)
    }

    /// One gradient step on a prioritized batch of sequences.
    pub(super) fn gradient_step(&mut self) {
        let c = &self.cfg;
        let b = c.batch_size as usize;
        self.per.sample(
            b,
            self.replay.len(),
            c.importance_sampling_exponent,
            &mut self.rng,
            &mut self.sampled,
            &mut self.is_weights,
        );
        let seqs: Vec<_> = self.sampled.iter().map(|&i| self.replay.get(i)).collect();
        let (burn, unroll) = (c.burn_in as usize, c.unroll_length as usize);
        let l = Layout::new(
            &seqs,
            self.obs_dim,
            (burn, unroll),
            c.n_step as usize,
            c.gamma,
        );
        let dev = self.device;
        let bi = b as i64;
        let on = |v: &[f32], shape: &[i64]| crate::device::upload(v, shape, dev);
        let states = on(&l.states, &[bi, l.states.len() as i64 / bi]);
        let burns: Vec<u32> = seqs.iter().map(|s| s.burn).collect();
        let (s_online, s_target) = tch::no_grad(|| self.burn_in(&burns, &l.x_burn, &states));
        let x = rows_on_device(&[&l.x_main], self.obs_dim, dev);
        // Every main-block step advances the state (a short sequence's
        // padding is masked out of the loss), so the fused LSTM runs it.
        let steps = unroll as i64 + 1;
        let q = self
            .net
            .forward_seq_all(&self.params, &x, &s_online, steps)
            .0;
        let rows = unroll as i64 * bi;
        let actions = Tensor::from_slice(&l.actions).to_device(dev).unsqueeze(1);
        let q_sa = q
            .narrow(0, 0, rows)
            .gather(1, &actions, false)
            .squeeze_dim(1);
        let target = tch::no_grad(|| {
            let q_t = self
                .net
                .forward_seq_all(&self.target, &x, &s_target, steps)
                .0;
            let boot = Tensor::from_slice(&l.boot_rows).to_device(dev);
            let best = q.detach().argmax(1, true).index_select(0, &boot);
            let q_boot = q_t
                .index_select(0, &boot)
                .gather(1, &best, false)
                .squeeze_dim(1);
            let (ret, disc) = (on(&l.returns, &[rows]), on(&l.boot_disc, &[rows]));
            if c.value_rescale {
                let eps = c.value_rescale_eps;
                rescale(&(ret + disc * unrescale(&q_boot, eps)), eps)
            } else {
                ret + disc * q_boot
            }
        });
        let mask = on(&l.mask, &[unroll as i64, bi]);
        let delta = (q_sa - target).view([unroll as i64, bi]) * &mask;
        let counts = mask.sum_dim_intlist(0, false, Kind::Float);
        // Each sequence's mean squared error, weighted for its sampling.
        let per_seq = (delta.square() * 0.5).sum_dim_intlist(0, false, Kind::Float) / &counts;
        let w = on(&self.is_weights, &[bi]);
        let loss = (per_seq * w).mean(Kind::Float);
        let priorities = tch::no_grad(|| {
            let abs = delta.detach().abs();
            let max = abs.amax(0, false);
            let mean = abs.sum_dim_intlist(0, false, Kind::Float) / &counts;
            max * c.priority_eta + mean * (1.0 - c.priority_eta)
        });
        let priorities = to_vec(&priorities);
        self.per.update(&self.sampled, &priorities, 1e-6);
        self.last_priority = Some(priorities.iter().map(|&p| f64::from(p)).sum::<f64>() / b as f64);
        self.params.zero_grad();
        loss.backward();
        let mut grad = self.params.grad();
        self.last_grad_norm = Some(Adam::clip_grad_norm(&mut grad, c.max_grad_norm));
        self.opt.step(&mut self.params, &grad);
        self.params_changed();
        self.train_steps += 1;
        if self
            .train_steps
            .is_multiple_of(u64::from(self.cfg.target_update_interval))
        {
            tch::no_grad(|| self.target.copy_(&self.params));
        }
        self.last_loss = Some(loss.detach());
    }
}
