//! [`Dqn`]: deep Q-learning with a target network, double-DQN targets,
//! Huber loss, gradient-norm clipping, Adam and an epsilon-greedy schedule;
//! optionally a dueling head, n-step returns and prioritized replay
//! (`replay.rs`: [`DqnReplay`], the path from transitions to a sampled
//! batch; `loss.rs`: the loss, and its gradient by hand on the CPU).

use crate::agents::{Act, Learn, Parallel, Persist};

mod loss;
mod replay;
#[cfg(test)]
mod tests;

use super::q_state::{load_q_state, q_state};
use super::{AgentError, AgentState, Weights, check_weights, copy_into, to_vec};
use crate::nets::FlatNet;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use replay::DqnReplay;
use rlfleet_replay::Transition;
use rlfleet_shared::config::{DqnConfig, TargetUpdate};
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::nets::{ConvTorso, NetCopy, NetShape, argmax};
use tch::{Device, Kind, Tensor};

/// The DQN learner: online and target Q-networks over flat parameters.
#[derive(Debug)]
pub struct Dqn {
    cfg: DqnConfig,
    net: FlatNet,
    n_actions: usize,
    device: Device,
    /// Online parameters (leaf tensor with gradients).
    params: Tensor,
    target: Tensor,
    opt: crate::agents::Optimizer,
    replay: DqnReplay,
    /// Exploration and replay sampling.
    rng: Pcg64,
    train_steps: u64,
    last_loss: Option<Tensor>,
    /// The gradient's norm before clipping, at the latest step.
    last_grad_norm: Option<Tensor>,
    /// On CPU, actions come from a plain-Rust copy of the online network
    /// (a libtorch call costs more than the whole forward pass of a small
    /// MLP); `None` on an accelerator.
    cpu_copy: Option<NetCopy>,
    /// The copy holds the current online parameters.
    copy_fresh: bool,
    /// Data-parallel learners: averages each gradient over the group.
    reduce: Option<Box<dyn super::GradientReduce>>,
    /// On CPU, for networks `FlatNet::backward_into` covers: the gradient
    /// is computed by hand into this buffer (no autograd graph, no fresh
    /// flat gradient each step); `None`: autograd (on an accelerator
    /// cuDNN's kernels win).
    grad_buf: Option<Tensor>,
    /// The largest |reward| observed (bounds what a Q-value can be).
    max_abs_reward: f32,
}

impl Dqn {
    /// `torso`: the convolutional layers in front of `cfg.hidden` (image
    /// observations), if any.
    pub fn new(
        cfg: &DqnConfig,
        spec: &EnvSpec,
        torso: Option<ConvTorso>,
        seed: u64,
        device: Device,
    ) -> Self {
        let n_actions = spec
            .action_space
            .n()
            .expect("DQN needs a discrete action space (validated)");
        // A dueling head has one more output: the state value, first.
        let outputs = n_actions + usize::from(cfg.dueling);
        let shape = NetShape::with_torso(torso, spec.obs_dim(), &cfg.hidden, outputs);
        let net = FlatNet::from_shape(shape.clone());
        tch::manual_seed(seed as i64);
        let params = net.init(device).set_requires_grad(true);
        let target = params.detach().copy();
        let opt = crate::agents::Optimizer::for_dqn(cfg, &params);
        let grad_buf = (device == Device::Cpu && net.has_manual_backward())
            .then(|| Tensor::zeros([net.numel()], (Kind::Float, device)));
        Dqn {
            cfg: cfg.clone(),
            net,
            n_actions,
            device,
            target,
            opt,
            replay: DqnReplay::new(cfg, spec, &shape),
            rng: Pcg64::seed_from_u64(seed ^ 0x5eed_d0a1),
            params,
            train_steps: 0,
            last_loss: None,
            last_grad_norm: None,
            // A convolutional network acts through libtorch (its batched
            // convolutions beat the plain-Rust im2col at any size).
            cpu_copy: (device == Device::Cpu && shape.torso().is_none())
                .then(|| NetCopy::new(shape)),
            copy_fresh: false,
            reduce: None,
            grad_buf,
            max_abs_reward: 0.0,
        }
    }

    /// Exploration rate after `env_steps`: `eps_start` for the first
    /// `eps_decay_start` steps, then a linear decay over `eps_decay_steps`.
    pub fn epsilon(&self, env_steps: u64) -> f64 {
        let decayed = env_steps.saturating_sub(self.cfg.eps_decay_start);
        let frac = (decayed as f64 / self.cfg.eps_decay_steps as f64).min(1.0);
        self.cfg.eps_start + frac * (self.cfg.eps_end - self.cfg.eps_start)
    }

    /// Learning rate after `env_steps`: `lr`, or annealed linearly to
    /// `lr_end` over `lr_anneal_steps`.
    pub fn learning_rate(&self, env_steps: u64) -> f64 {
        if self.cfg.lr_anneal_steps == 0 {
            return self.cfg.lr;
        }
        let frac = (env_steps as f64 / self.cfg.lr_anneal_steps as f64).min(1.0);
        self.cfg.lr + frac * (self.cfg.lr_end - self.cfg.lr)
    }

    /// Q-values of a batch of observations under the online network.
    pub fn q_values(&self, obs: &[f32], batch: usize) -> Tensor {
        let shape = [batch as i64, (obs.len() / batch.max(1)) as i64];
        let x = crate::device::upload(obs, &shape, self.device);
        tch::no_grad(|| self.q(&self.params, &x))
    }

    /// Q-values `[batch, n_actions]` of `x` under `params`: the network's
    /// outputs, or for a dueling head `V + A - mean(A)`.
    fn q(&self, params: &Tensor, x: &Tensor) -> Tensor {
        match self.grad_buf {
            // Without a gradient: the hand-written path's forward, whose
            // first convolution may run in plain Rust.
            Some(_) => tch::no_grad(|| self.q_of(self.net.forward_traced(params, x).out)),
            None => self.q_of(self.net.forward(params, x)),
        }
    }

    /// Greedy actions for `n` observations under the online network.
    fn greedy(&mut self, obs: &[f32], n: usize) -> Vec<usize> {
        let Some(copy) = &mut self.cpu_copy else {
            let best = self.q_values(obs, n).argmax(1, false);
            let best: Vec<i64> = Vec::try_from(best).expect("argmax gives int64");
            return best.into_iter().map(|a| a as usize).collect();
        };
        if !self.copy_fresh {
            copy.load(&to_vec(&self.params))
                .expect("sized from the same network");
            self.copy_fresh = true;
        }
        // Under a dueling head the best action is the best advantage.
        let skip = usize::from(self.cfg.dueling);
        let width = self.n_actions + skip;
        copy.forward(obs, n)
            .chunks_exact(width)
            .map(|row| argmax(&row[skip..]))
            .collect()
    }

    /// The online parameters (for tests and benchmarks).
    pub fn params(&self) -> &Tensor {
        &self.params
    }

    /// Whether gradients are taken by hand (`FlatNet::backward_into`)
    /// rather than by autograd.
    pub fn manual_backward(&self) -> bool {
        self.grad_buf.is_some()
    }

    /// Takes gradients through autograd even where the hand-written
    /// backward applies (for tests and benchmarks that compare the two).
    pub fn use_autograd(&mut self) {
        self.grad_buf = None;
    }

    /// One gradient step on a sampled batch.
    fn gradient_step(&mut self) {
        let b = self.cfg.batch_size as usize;
        self.replay.sample(b, self.cfg.per_beta, &mut self.rng);
        let (both, data) = crate::agents::batch_on_device(&self.replay.batch, self.device);
        let bi = b as i64;
        let (obs, next) = (both.narrow(0, 0, bi), both.narrow(0, bi, bi));
        let (loss, td_abs, mut grad) = match &self.grad_buf {
            Some(buf) => {
                let (loss, td_abs) = self.manual_gradient(&obs, &next, buf);
                (Tensor::from(loss), td_abs, buf.shallow_clone())
            }
            None => self.autograd_gradient(&obs, &next, &data),
        };
        if self.replay.prioritized() {
            self.replay.update_priorities(&td_abs, self.cfg.per_eps);
        }
        if let Some(reduce) = &mut self.reduce {
            let mut flat = to_vec(&grad);
            reduce.mean(&mut flat);
            grad = Tensor::from_slice(&flat).to_device(self.device);
        }
        self.last_grad_norm = Some(crate::agents::Adam::clip_grad_norm(
            &mut grad,
            self.cfg.max_grad_norm,
        ));
        self.opt.step(&mut self.params, &grad);
        self.copy_fresh = false;
        self.train_steps += 1;
        if self
            .train_steps
            .is_multiple_of(u64::from(self.cfg.target_update_interval))
        {
            tch::no_grad(|| match self.cfg.target_update {
                TargetUpdate::Hard => {
                    self.target.copy_(&self.params);
                }
                TargetUpdate::Soft => {
                    let _ = self.target.lerp_(&self.params, self.cfg.tau);
                }
            });
        }
        self.last_loss = Some(loss.detach());
    }
}

impl Act for Dqn {
    fn act(&mut self, obs: &[f32], env_steps: u64, action: &mut [f32]) {
        let a = if self.rng.random::<f64>() < self.epsilon(env_steps) {
            self.rng.random_range(0..self.n_actions)
        } else {
            self.greedy(obs, 1)[0]
        };
        action[0] = a as f32;
    }

    fn act_batch(&mut self, obs: &[f32], n: usize, env_steps: u64, actions: &mut [f32]) {
        if n == 0 {
            return;
        }
        let eps = self.epsilon(env_steps);
        let greedy = self.greedy(obs, n);
        for (a, g) in actions.iter_mut().zip(greedy) {
            *a = if self.rng.random::<f64>() < eps {
                self.rng.random_range(0..self.n_actions) as f32
            } else {
                g as f32
            };
        }
    }

    fn epsilon(&self, env_steps: u64) -> f64 {
        Dqn::epsilon(self, env_steps)
    }
}

impl Learn for Dqn {
    fn observe(&mut self, t: &Transition<'_>) {
        self.max_abs_reward = self.max_abs_reward.max(t.reward.abs());
        self.replay.observe(t);
    }

    fn observe_bytes(&mut self, t: &Transition<'_, u8>) {
        self.max_abs_reward = self.max_abs_reward.max(t.reward.abs());
        self.replay.observe_bytes(t);
    }

    fn end_episode(&mut self, episode: u64) {
        self.replay.end_episode(episode);
    }

    fn abandon_episode(&mut self, episode: u64) {
        self.replay.abandon(episode);
    }

    fn open_episodes(&self) -> usize {
        self.replay.open_episodes()
    }

    fn train(&mut self, env_steps: u64) -> u32 {
        let ready = env_steps >= self.cfg.learning_starts
            && self.replay.len() >= self.cfg.batch_size as usize
            && env_steps.is_multiple_of(u64::from(self.cfg.train_freq));
        if !ready {
            return 0;
        }
        self.opt.set_lr(self.learning_rate(env_steps));
        for _ in 0..self.cfg.gradient_steps {
            self.gradient_step();
        }
        self.cfg.gradient_steps
    }

    fn scheduled_steps(&self, env_steps: u64) -> u32 {
        if env_steps >= self.cfg.learning_starts
            && env_steps.is_multiple_of(u64::from(self.cfg.train_freq))
        {
            self.cfg.gradient_steps
        } else {
            0
        }
    }

    fn sample_step(&mut self) -> u32 {
        if self.replay.len() < self.cfg.batch_size as usize {
            return 0;
        }
        self.gradient_step();
        self.cfg.batch_size
    }

    fn last_loss(&self) -> Option<f64> {
        self.last_loss.as_ref().map(|l| l.double_value(&[]))
    }

    fn scalars(&self, env_steps: u64) -> Vec<(&'static str, f64)> {
        let mut s = vec![
            ("train/epsilon", Dqn::epsilon(self, env_steps)),
            ("train/learning_rate", self.opt.lr()),
        ];
        s.extend(self.last_loss().map(|l| ("train/loss", l)));
        s.extend(
            self.last_grad_norm
                .as_ref()
                .map(|g| ("train/grad_norm", g.double_value(&[]))),
        );
        if let Some((q_max, bound)) = self.q_watch() {
            s.extend([("train/q_max", q_max), ("train/q_bound", bound)]);
        }
        s
    }

    fn train_steps(&self) -> u64 {
        self.train_steps
    }

    fn replay_len(&self) -> usize {
        self.replay.len()
    }

    fn replay_bytes(&self) -> usize {
        self.replay.memory_bytes()
    }
}

impl Persist for Dqn {
    fn weights(&self) -> Weights {
        Weights {
            version: self.train_steps,
            data: to_vec(&self.params),
        }
    }

    fn load_weights(&mut self, w: &Weights) -> Result<(), AgentError> {
        check_weights(&w.data, self.net.numel() as usize)?;
        copy_into(&mut self.params, &w.data);
        self.copy_fresh = false;
        Ok(())
    }

    fn state(&self) -> AgentState {
        let mut s = q_state(&self.params, &self.target, &self.opt, self.train_steps);
        s.tensors.push(self.reward_bound_state());
        s
    }

    fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError> {
        self.train_steps = load_q_state(s, &mut self.params, &mut self.target, &mut self.opt)?;
        self.copy_fresh = false;
        self.load_reward_bound(s);
        Ok(())
    }

    fn replay_image(&self) -> Option<rlfleet_replay::ReplayImage> {
        Some(self.replay.image())
    }

    fn restore_replay(&mut self, img: &rlfleet_replay::ReplayImage) -> Result<(), AgentError> {
        self.replay.restore(img)
    }
}

impl Parallel for Dqn {
    fn set_gradient_reduce(&mut self, reduce: Box<dyn super::GradientReduce>) -> bool {
        self.reduce = Some(reduce);
        true
    }
}
