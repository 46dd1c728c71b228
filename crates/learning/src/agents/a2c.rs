//! [`A2c`]: advantage actor-critic. A policy MLP (logits over discrete
//! actions) and a separate value MLP, each over one flat parameter tensor
//! with its own Adam. It trains once per finished episode on that episode's
//! trajectory: discounted returns to the end (bootstrapped from the value of
//! the last state when the episode was truncated), advantages against the
//! value baseline (normalised per trajectory when configured), policy
//! gradient with an entropy bonus, and value regression. Only the policy
//! network is published: that is what actors and the inference front run.
//! With a recurrent core both networks run over the episode as one
//! sequence from zeros, cut into windows of `model.max_seq_len` steps
//! (truncated backpropagation through time, `agents::sequences`).

use super::policy_value::{PolicyValue, SoftmaxActor};
use super::rollout::{self, Kept, Rollout};
use super::sequences::{Padded, all_pieces, windowed_both};
use super::{AgentError, AgentState, Weights, check_weights, rows_on_device};
use crate::agents::{Act, Learn, Parallel, Persist};
use rlfleet_replay::Transition;
use rlfleet_shared::config::A2cConfig;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::nets::{ConvTorso, Core};
use std::collections::{HashMap, VecDeque};
use tch::{Device, Kind, Tensor};

#[derive(Debug)]
pub struct A2c {
    cfg: A2cConfig,
    nets: PolicyValue,
    obs_dim: usize,
    /// How its rollouts keep observations (bytes for a uint8 env, one
    /// frame per step of a stack).
    kept: Kept,
    device: Device,
    open: HashMap<u64, Rollout>,
    ready: VecDeque<Rollout>,
    train_steps: u64,
    last_loss: Option<Tensor>,
    /// The policy's mean entropy at the latest step.
    last_entropy: Option<Tensor>,
    /// Acting in this process (`single`): a plain-Rust copy of the policy,
    /// refreshed after each gradient step.
    actor: SoftmaxActor,
    /// With a recurrent core: steps backpropagated through at most.
    max_seq_len: u32,
}

impl A2c {
    /// `torso`: convolutional layers in front of both networks' `hidden`
    /// layers (each network has its own).
    pub fn new(
        cfg: &A2cConfig,
        spec: &EnvSpec,
        torso: Option<ConvTorso>,
        seed: u64,
        device: Device,
    ) -> Self {
        A2c::with_core(cfg, spec, torso, (None, 1), seed, device)
    }

    /// [`A2c::new`] with a recurrent `core` after both networks' hidden
    /// layers, trained through windows of at most `max_seq_len` steps.
    pub fn with_core(
        cfg: &A2cConfig,
        spec: &EnvSpec,
        torso: Option<ConvTorso>,
        (core, max_seq_len): (Option<Core>, u32),
        seed: u64,
        device: Device,
    ) -> Self {
        let (nets, actor) = PolicyValue::discrete(
            spec,
            (torso, core),
            &cfg.hidden,
            cfg.lr,
            (seed, seed ^ 0xa2c0),
            device,
        );
        let kept = Kept::of(
            spec.obs_dtype.is_bytes(),
            spec.obs_dim(),
            nets.policy_net.shape(),
        );
        A2c {
            nets,
            cfg: cfg.clone(),
            obs_dim: spec.obs_dim(),
            kept,
            device,
            open: HashMap::new(),
            ready: VecDeque::new(),
            train_steps: 0,
            last_loss: None,
            last_entropy: None,
            actor,
            max_seq_len: max_seq_len.max(1),
        }
    }

    /// The policy's logits `[n, actions]` and the values `[n]` at each
    /// step of `t` (with gradients), and the value after its last step.
    fn outputs(&self, t: &Rollout) -> (Tensor, Tensor, f64) {
        let Some(core) = self.nets.policy_net.shape().core() else {
            let obs = Rollout::obs_on_device(&[t], self.device);
            let logits = self.nets.policy_net.forward(&self.nets.policy, &obs);
            let bootstrap = tch::no_grad(|| {
                let last = rows_on_device(&[&t.last_next], self.obs_dim, self.device);
                self.nets.values(&last).double_value(&[0])
            });
            return (logits, self.nets.values(&obs), bootstrap);
        };
        let window = i64::from(self.max_seq_len);
        let seq = Padded::new(&[t], self.obs_dim, window, self.device);
        let len = core.state_len() as i64;
        let zeros = Tensor::zeros([1, 2 * len], (Kind::Float, self.device));
        let piece_starts = tch::no_grad(|| windowed_both(&self.nets, &seq, &zeros).2);
        let (p_starts, v_starts) = (
            piece_starts.narrow(1, 0, len),
            piece_starts.narrow(1, len, len),
        );
        let logits = all_pieces(&self.nets.policy_net, &self.nets.policy, &seq, &p_starts);
        let values =
            all_pieces(&self.nets.value_net, &self.nets.value, &seq, &v_starts).squeeze_dim(1);
        let bootstrap = values
            .detach()
            .index_select(0, &seq.boot_rows)
            .double_value(&[0]);
        (
            logits.index_select(0, &seq.rows),
            values.index_select(0, &seq.rows),
            bootstrap,
        )
    }

    /// One gradient step of both networks on one finished trajectory.
    fn gradient_step(&mut self, t: &Rollout) {
        let n = t.rewards.len() as i64;
        let (logits, values, bootstrap) = self.outputs(t);
        let bootstrap = if t.terminated { 0.0 } else { bootstrap };
        let mut returns = vec![0f32; t.rewards.len()];
        let mut g = bootstrap;
        for i in (0..t.rewards.len()).rev() {
            g = f64::from(t.rewards[i]) + self.cfg.gamma * g;
            returns[i] = g as f32;
        }
        let returns = Tensor::from_slice(&returns).to_device(self.device);
        let mut adv = (&returns - values.detach()).detach();
        if self.cfg.normalize_advantage && n > 1 {
            adv = (&adv - adv.mean(Kind::Float)) / (adv.std(true) + 1e-8);
        }
        let actions: Vec<i64> = t.actions.iter().map(|&a| a as i64).collect();
        let actions = Tensor::from_slice(&actions)
            .to_device(self.device)
            .unsqueeze(1);
        let logp_all = logits.log_softmax(1, Kind::Float);
        let logp = logp_all.gather(1, &actions, false).squeeze_dim(1);
        let entropy = -(logp_all.exp() * &logp_all)
            .sum_dim_intlist(1, false, Kind::Float)
            .mean(Kind::Float);
        let policy_loss = -(logp * adv).mean(Kind::Float) - &entropy * self.cfg.ent_coef;
        let value_loss = (returns - &values).square().mean(Kind::Float) * self.cfg.vf_coef;
        let loss = &policy_loss + &value_loss;
        self.nets.step(&loss, self.cfg.max_grad_norm);
        self.train_steps += 1;
        self.actor.stale();
        self.last_loss = Some(loss.detach());
        self.last_entropy = Some(entropy.detach());
    }
}

impl Act for A2c {
    fn act(&mut self, obs: &[f32], _env_steps: u64, action: &mut [f32]) {
        self.actor.act(&self.nets, self.train_steps, obs, action);
    }
}

impl Learn for A2c {
    fn observe(&mut self, t: &Transition<'_>) {
        rollout::keep(&mut self.open, self.kept, &mut None, t);
    }

    fn observe_bytes(&mut self, t: &Transition<'_, u8>) {
        rollout::keep(&mut self.open, self.kept, &mut None, t);
    }

    fn abandon_episode(&mut self, episode: u64) {
        self.open.remove(&episode);
        self.actor.reset_state();
    }

    fn open_episodes(&self) -> usize {
        self.open.len()
    }

    fn end_episode(&mut self, episode: u64) {
        if let Some(t) = self.open.remove(&episode)
            && !t.rewards.is_empty()
        {
            self.ready.push_back(t);
        }
        self.actor.reset_state();
    }

    fn train(&mut self, _env_steps: u64) -> u32 {
        let mut steps = 0;
        while let Some(t) = self.ready.pop_front() {
            self.gradient_step(&t);
            steps += 1;
        }
        steps
    }

    fn last_loss(&self) -> Option<f64> {
        self.last_loss.as_ref().map(|l| l.double_value(&[]))
    }

    fn scalars(&self, _env_steps: u64) -> Vec<(&'static str, f64)> {
        self.nets
            .scalars(self.last_loss.as_ref(), self.last_entropy.as_ref())
    }

    fn train_steps(&self) -> u64 {
        self.train_steps
    }

    /// Steps of unfinished episodes held.
    fn replay_len(&self) -> usize {
        self.open.values().map(|t| t.len()).sum()
    }

    /// The open trajectories' observations (bytes for a uint8 env),
    /// actions and rewards.
    fn replay_bytes(&self) -> usize {
        self.open
            .values()
            .chain(&self.ready)
            .map(Rollout::bytes)
            .sum()
    }
}

impl Persist for A2c {
    fn weights(&self) -> Weights {
        Weights {
            version: self.train_steps,
            data: self.nets.policy_values(),
        }
    }

    fn load_weights(&mut self, w: &Weights) -> Result<(), AgentError> {
        check_weights(&w.data, self.nets.policy_net.numel() as usize)?;
        self.nets.load_policy(&w.data);
        self.actor.stale();
        Ok(())
    }

    fn state(&self) -> AgentState {
        self.nets.state(self.train_steps)
    }

    fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError> {
        self.nets.load_state(s)?;
        self.train_steps = s.train_steps;
        self.actor.stale();
        Ok(())
    }
}

impl Parallel for A2c {}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(a2c: &mut A2c, episode: u64, t: usize, terminated: bool) {
        let obs = [0.01 * t as f32, 0.0, 0.02, -0.01];
        a2c.observe(&Transition {
            obs: &obs,
            action: &[(t % 2) as f32],
            reward: 1.0,
            next_obs: &obs,
            terminated,
            episode,
            step: 0,
            logp: None,
        });
    }

    /// Trajectories of interleaved episodes are kept apart; one gradient
    /// step per finished episode, none before it ends; a state round trip
    /// restores the networks exactly.
    #[test]
    fn trains_once_per_finished_episode() {
        let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
        let mut a2c = A2c::new(&A2cConfig::default(), &spec, None, 3, Device::Cpu);
        let before = a2c.weights();
        for t in 0..10 {
            step(&mut a2c, 7, t, false);
            step(&mut a2c, 8, t, t == 9);
        }
        assert_eq!(a2c.train(20), 0);
        assert_eq!(a2c.replay_len(), 20);
        a2c.end_episode(8);
        assert_eq!(a2c.train(20), 1);
        assert_eq!(a2c.replay_len(), 10);
        a2c.end_episode(7);
        a2c.end_episode(99);
        assert_eq!(a2c.train(20), 1);
        assert_eq!(a2c.train_steps(), 2);
        let after = a2c.weights();
        assert_eq!(after.version, 2);
        assert_ne!(before.data, after.data);
        assert!(a2c.last_loss().unwrap().is_finite());

        let saved = a2c.state();
        let mut other = A2c::new(&A2cConfig::default(), &spec, None, 4, Device::Cpu);
        other.load_state(&saved).unwrap();
        assert_eq!(other.state(), saved);
        let mut action = [0.0];
        other.act(&[0.0; 4], 0, &mut action);
        assert!(action[0] == 0.0 || action[0] == 1.0);
    }

    /// With a recurrent core the episode's loss is the same whether it is
    /// cut into windows of 4 steps or run whole (each piece starts from
    /// the state the whole pass reached there; only the gradient is
    /// truncated), and the single-process actor starts each episode from
    /// zeros.
    #[test]
    fn a_recurrent_episode_gives_the_same_loss_in_windows() {
        let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
        let core = Some(Core { size: 5, layers: 2 });
        let cfg = A2cConfig {
            hidden: vec![8],
            ..A2cConfig::default()
        };
        let mut losses = Vec::new();
        // The same weights for both (libtorch's generator is shared with
        // tests running alongside).
        let first = A2c::with_core(&cfg, &spec, None, (core, 4), 3, Device::Cpu).state();
        for window in [4, 64] {
            let mut a2c = A2c::with_core(&cfg, &spec, None, (core, window), 3, Device::Cpu);
            a2c.load_state(&first).unwrap();
            for t in 0..10 {
                step(&mut a2c, 1, t, t == 9);
            }
            a2c.end_episode(1);
            assert_eq!(a2c.train(10), 1);
            losses.push(a2c.last_loss().unwrap());
        }
        assert!((losses[0] - losses[1]).abs() < 1e-5, "{losses:?}");
    }
}
