//! [`Ppo`]: proximal policy optimisation (Schulman et al. 2017) with the
//! clipped surrogate objective, GAE, optional value clipping, an entropy
//! bonus, minibatch epochs and per-minibatch advantage normalisation. The
//! policy MLP gives logits over discrete actions, or the mean of a Gaussian
//! whose state-independent log stds follow the MLP's parameters in the
//! same flat tensor (so they are published with it); the value MLP is
//! separate. Steps are kept per episode (episodes from many actors
//! interleave); every `n_steps` transitions the held segments are trained
//! on, an unfinished one bootstrapping from the value of its last state.
//! The old log probabilities are those of the policy at update time: the
//! data came from it in `single` and `sync`, and from at most one round
//! earlier over `seed-a2c`.
//!
//! With a recurrent core (`[model] core = "lstm"`, `recurrent.rs`) both
//! networks run over each held segment as a sequence from the state its
//! episode had reached, and minibatches are whole segments.

mod objective;
mod recurrent;

use super::policy_value::PolicyValue;
use super::rollout::{self, Rollout};
use super::{
    Agent, AgentError, AgentState, Weights, check_weights, copy_into, rows_on_device, to_vec,
};
use crate::nets::FlatNet;
use crate::replay::{ObsStore, Transition};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rlfleet_shared::config::PpoConfig;
use rlfleet_shared::env::{EnvSpec, Space};
use rlfleet_shared::nets::{ConvTorso, Core, NetShape};
use rlfleet_shared::policy::{ContinuousHead, ContinuousPolicy, QPolicy};
use std::collections::HashMap;
use tch::{Device, Kind, Tensor};

/// Acting in this process (`single`): a plain-Rust copy of the policy.
#[derive(Debug)]
enum Actor {
    Discrete(QPolicy),
    Continuous(ContinuousPolicy),
}

#[derive(Debug)]
pub struct Ppo {
    cfg: PpoConfig,
    nets: PolicyValue,
    obs_dim: usize,
    /// The env's observations are bytes (kept as bytes).
    bytes: bool,
    /// Scalars per action (1 for a discrete index).
    act_dim: usize,
    discrete: bool,
    device: Device,
    open: HashMap<u64, Rollout>,
    ready: Vec<Rollout>,
    /// Steps held in `open` and `ready`.
    held: usize,
    rng: Pcg64,
    actor: Actor,
    actor_fresh: bool,
    picked: Vec<f32>,
    train_steps: u64,
    last_loss: Option<Tensor>,
    /// The policy's mean entropy at the latest step.
    last_entropy: Option<Tensor>,
    /// With a recurrent core: each unfinished episode's states (policy's
    /// then value's, `[2 * state_len]`) where its trained steps ended.
    carry: HashMap<u64, Tensor>,
    /// With a recurrent core: steps backpropagated through at most
    /// (`model.max_seq_len`).
    max_seq_len: u32,
}

const HALF_LOG_2PI: f64 = 0.918_938_533_204_672_7;

impl Ppo {
    /// `torso`: convolutional layers in front of both networks' `hidden`
    /// layers (each network has its own).
    pub fn new(
        cfg: &PpoConfig,
        spec: &EnvSpec,
        torso: Option<ConvTorso>,
        seed: u64,
        device: Device,
    ) -> Self {
        Ppo::with_core(cfg, spec, torso, (None, 1), seed, device)
    }

    /// [`Ppo::new`] with a recurrent `core` after both networks' hidden
    /// layers (discrete actions only: validated), trained through windows
    /// of at most `max_seq_len` steps.
    pub fn with_core(
        cfg: &PpoConfig,
        spec: &EnvSpec,
        torso: Option<ConvTorso>,
        (core, max_seq_len): (Option<Core>, u32),
        seed: u64,
        device: Device,
    ) -> Self {
        let obs_dim = spec.obs_dim();
        let shape = |outputs| {
            NetShape::with_torso(torso.clone(), obs_dim, &cfg.hidden, outputs).with_core(core)
        };
        let (outputs, act_dim, actor) = match &spec.action_space {
            Space::Discrete { n } => {
                let mut q = QPolicy::from_shape(shape(*n), seed ^ 0x990);
                q.sample = true;
                (*n, 1, Actor::Discrete(q))
            }
            Space::Box { low, high } => (
                low.len(),
                low.len(),
                Actor::Continuous(
                    ContinuousPolicy::new(
                        obs_dim,
                        &cfg.hidden,
                        ContinuousHead::Gaussian,
                        low,
                        high,
                        seed ^ 0x990,
                    )
                    .with_torso(torso.clone()),
                ),
            ),
        };
        let discrete = spec.action_space.is_discrete();
        let policy_net = FlatNet::from_shape(shape(outputs));
        let value_net = FlatNet::from_shape(shape(1));
        tch::manual_seed(seed as i64);
        let mut policy = policy_net.init(device);
        if !discrete {
            let log_std = Tensor::full([act_dim as i64], cfg.log_std_init, (Kind::Float, device));
            policy = Tensor::cat(&[policy, log_std], 0);
        }
        let value = value_net.init(device);
        Ppo {
            nets: PolicyValue::new(policy_net, value_net, policy, value, cfg.lr),
            cfg: cfg.clone(),
            obs_dim,
            bytes: spec.obs_dtype.is_bytes(),
            act_dim,
            discrete,
            device,
            open: HashMap::new(),
            ready: Vec::new(),
            held: 0,
            rng: Pcg64::seed_from_u64(seed ^ 0x5eed_0990),
            actor,
            actor_fresh: false,
            picked: Vec::with_capacity(act_dim),
            train_steps: 0,
            last_loss: None,
            last_entropy: None,
            carry: HashMap::new(),
            max_seq_len: max_seq_len.max(1),
        }
    }

    fn recurrent(&self) -> bool {
        self.nets.policy_net.shape().core().is_some()
    }

    /// Log probabilities of `actions` (`[n, act_dim]`) at `obs` under the
    /// current policy, and the policy's entropy there, each `[n]`.
    fn log_prob_entropy(&self, obs: &Tensor, actions: &Tensor) -> (Tensor, Tensor) {
        let n_mlp = self.nets.policy_net.numel();
        let out = self
            .nets
            .policy_net
            .forward(&self.nets.policy.narrow(0, 0, n_mlp), obs);
        self.log_prob_entropy_of(&out, actions)
    }

    /// [`Ppo::log_prob_entropy`] from the policy network's outputs `out`.
    fn log_prob_entropy_of(&self, out: &Tensor, actions: &Tensor) -> (Tensor, Tensor) {
        let n_mlp = self.nets.policy_net.numel();
        if self.discrete {
            let logp_all = out.log_softmax(1, Kind::Float);
            let idx = actions.to_kind(Kind::Int64);
            let logp = logp_all.gather(1, &idx, false).squeeze_dim(1);
            let entropy = -(logp_all.exp() * &logp_all).sum_dim_intlist(1, false, Kind::Float);
            return (logp, entropy);
        }
        let log_std = self.nets.policy.narrow(0, n_mlp, self.act_dim as i64);
        let z = (actions - out) / log_std.exp();
        let logp =
            (z.square() * -0.5 - &log_std - HALF_LOG_2PI).sum_dim_intlist(1, false, Kind::Float);
        let entropy = (&log_std + 0.5 + HALF_LOG_2PI)
            .sum(Kind::Float)
            .expand([out.size()[0]], false);
        (logp, entropy)
    }

    /// Trains on every held segment; returns the gradient steps taken.
    fn update(&mut self) -> u32 {
        let mut segments = std::mem::take(&mut self.ready);
        let finished = segments.len();
        segments.extend(self.open.drain().map(|(_, s)| s));
        self.held = 0;
        let n: usize = segments.iter().map(|s| s.len()).sum();
        if n == 0 {
            return 0;
        }
        if self.recurrent() {
            return self.update_recurrent(&segments, finished);
        }
        let (od, ad) = (self.obs_dim, self.act_dim as i64);
        let rows = |f: &dyn Fn(&Rollout) -> &ObsStore| {
            let parts: Vec<&ObsStore> = segments.iter().map(f).collect();
            rows_on_device(&parts, od, self.device)
        };
        let (obs, lasts) = (rows(&|s| &s.obs), rows(&|s| &s.last_next));
        let actions: Vec<f32> = segments
            .iter()
            .flat_map(|s| s.actions.iter().copied())
            .collect();
        let actions = Tensor::from_slice(&actions)
            .view([n as i64, ad])
            .to_device(self.device);
        let (old_values, boot, old_logp) = tch::no_grad(|| {
            let v = self.nets.values(&obs);
            let b = self.nets.values(&lasts);
            (v, b, self.log_prob_entropy(&obs, &actions).0)
        });
        let adv = self.gae(&segments, &old_values, &boot);
        let returns = &adv + &old_values;

        let mut order: Vec<i64> = (0..n as i64).collect();
        let mb = self.cfg.batch_size as usize;
        let mut steps = 0;
        for _ in 0..self.cfg.n_epochs {
            for i in (1..n).rev() {
                order.swap(i, self.rng.random_range(0..=i));
            }
            for chunk in order.chunks(mb) {
                let idx = Tensor::from_slice(chunk).to_device(self.device);
                let (obs, actions) = (obs.index_select(0, &idx), actions.index_select(0, &idx));
                let (logp, entropy) = self.log_prob_entropy(&obs, &actions);
                let v = self.nets.values(&obs);
                self.loss_step(
                    (logp, entropy, v),
                    &old_logp.index_select(0, &idx),
                    &old_values.index_select(0, &idx),
                    &adv.index_select(0, &idx),
                    &returns.index_select(0, &idx),
                );
                steps += 1;
            }
        }
        self.actor_fresh = false;
        steps
    }
}

impl Agent for Ppo {
    fn act(&mut self, obs: &[f32], _env_steps: u64, action: &mut [f32]) {
        if !self.actor_fresh {
            let w = to_vec(&self.nets.policy);
            match &mut self.actor {
                Actor::Discrete(q) => q.load(self.train_steps, &w),
                Actor::Continuous(c) => c.load(self.train_steps, &w),
            }
            .expect("the policy's own shape");
            self.actor_fresh = true;
        }
        match &mut self.actor {
            Actor::Discrete(q) => q.act(obs, 1, &mut self.picked),
            Actor::Continuous(c) => c.act(obs, 1, true, &mut self.picked),
        }
        action.copy_from_slice(&self.picked);
    }

    fn observe(&mut self, t: &Transition<'_>) {
        rollout::keep(&mut self.open, self.bytes, t);
        self.held += 1;
    }

    fn observe_bytes(&mut self, t: &Transition<'_, u8>) {
        rollout::keep(&mut self.open, self.bytes, t);
        self.held += 1;
    }

    fn end_episode(&mut self, episode: u64) {
        if let Some(s) = self.open.remove(&episode) {
            self.ready.push(s);
        }
        self.reset_actor_state();
    }

    fn abandon_episode(&mut self, episode: u64) {
        if let Some(s) = self.open.remove(&episode) {
            self.held -= s.len();
        }
        self.carry.remove(&episode);
        self.reset_actor_state();
    }

    fn train(&mut self, env_steps: u64) -> u32 {
        if self.held < self.cfg.n_steps as usize {
            return 0;
        }
        if self.cfg.lr_anneal_steps > 0 {
            let left = 1.0 - env_steps as f64 / self.cfg.lr_anneal_steps as f64;
            let lr = self.cfg.lr * left.clamp(0.0, 1.0);
            self.nets.policy_adam.lr = lr;
            self.nets.value_adam.lr = lr;
        }
        self.update()
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

    /// Steps held for the next update.
    fn replay_len(&self) -> usize {
        self.held
    }

    /// The rollout's observations (bytes for a uint8 env), actions and
    /// rewards.
    fn replay_bytes(&self) -> usize {
        self.open
            .values()
            .chain(&self.ready)
            .map(Rollout::bytes)
            .sum()
    }

    fn weights(&self) -> Weights {
        Weights {
            version: self.train_steps,
            data: to_vec(&self.nets.policy),
        }
    }

    fn load_weights(&mut self, w: &Weights) -> Result<(), AgentError> {
        check_weights(&w.data, self.nets.policy.numel())?;
        copy_into(&mut self.nets.policy, &w.data);
        self.actor_fresh = false;
        Ok(())
    }

    fn state(&self) -> AgentState {
        self.nets.state(self.train_steps)
    }

    fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError> {
        self.nets.load_state(s)?;
        self.train_steps = s.train_steps;
        self.actor_fresh = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(ppo: &mut Ppo, episode: u64, steps: usize, obs_dim: usize, action: f32) {
        for t in 0..steps {
            let o = vec![0.01 * t as f32; obs_dim];
            ppo.observe(&Transition {
                obs: &o,
                action: &[action],
                reward: 1.0,
                next_obs: &o,
                terminated: t + 1 == steps,
                episode,
            });
        }
    }

    /// With a recurrent core an episode cut by an update goes on from the
    /// states its trained steps reached: the policy's is what the
    /// plain-Rust copy reaches over those steps from zeros with the
    /// pre-update weights; it is used up by the next update, which also
    /// trains the rest (whole segments per minibatch: one step per epoch
    /// here).
    #[test]
    fn a_recurrent_episode_cut_by_an_update_carries_its_state() {
        use rlfleet_shared::nets::{Forward, NetCopy, Rows};
        let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
        let cfg = PpoConfig {
            n_steps: 10,
            batch_size: 10,
            n_epochs: 3,
            hidden: vec![8],
            ..PpoConfig::default()
        };
        let core = Core { size: 4, layers: 1 };
        let mut ppo = Ppo::with_core(&cfg, &spec, None, (Some(core), 4), 1, Device::Cpu);
        let before = ppo.weights().data;
        feed(&mut ppo, 7, 10, 4, 1.0);
        // Not terminated: the feed's last step says so; make it go on.
        ppo.open.get_mut(&7).unwrap().terminated = false;
        assert_eq!(ppo.train(10), 3);
        let carried: Vec<f32> = Vec::try_from(&ppo.carry[&7]).unwrap();
        assert_eq!(carried.len(), 2 * core.state_len());
        let mut copy = NetCopy::new(ppo.nets.policy_net.shape().clone());
        copy.load(&before).unwrap();
        let mut state = vec![0.0; core.state_len()];
        for t in 0..10 {
            let o = vec![0.01 * t as f32; 4];
            copy.forward_state(Rows::Values(&o), 1, &mut state);
        }
        for (a, b) in carried[..core.state_len()].iter().zip(&state) {
            assert!((a - b).abs() < 1e-5, "{carried:?} vs {state:?}");
        }
        feed(&mut ppo, 7, 10, 4, 0.0);
        ppo.end_episode(7);
        assert_eq!(ppo.train(20), 3);
        assert!(ppo.carry.is_empty());
        assert!(ppo.last_loss().unwrap().is_finite());
        assert_ne!(ppo.weights().data, before);
    }

    /// An update happens once `n_steps` are held (finished and unfinished
    /// episodes alike), with `n_epochs * ceil(n_steps / batch_size)`
    /// gradient steps; continuous log stds are part of the published
    /// weights; a state round trip restores everything.
    #[test]
    fn updates_every_n_steps_with_epochs_of_minibatches() {
        for env in ["CartPole-v1", "Pendulum-v1"] {
            let spec = rlfleet_shared::env::spec(env).unwrap();
            let cfg = PpoConfig {
                n_steps: 20,
                batch_size: 8,
                n_epochs: 2,
                ..PpoConfig::default()
            };
            let mut ppo = Ppo::new(&cfg, &spec, None, 1, Device::Cpu);
            let n_mlp = ppo.nets.policy_net.numel() as usize;
            let extra = if spec.action_space.is_discrete() {
                0
            } else {
                1
            };
            assert_eq!(ppo.weights().data.len(), n_mlp + extra);
            let before = ppo.weights().data;
            feed(&mut ppo, 4, 12, spec.obs_dim(), 1.0);
            ppo.end_episode(4);
            feed(&mut ppo, 5, 7, spec.obs_dim(), 0.0);
            assert_eq!(ppo.train(19), 0);
            assert_eq!(ppo.replay_len(), 19);
            // The 20th step of an episode still open.
            let o = vec![0.5; spec.obs_dim()];
            ppo.observe(&Transition {
                obs: &o,
                action: &[0.0],
                reward: 0.0,
                next_obs: &o,
                terminated: false,
                episode: 6,
            });
            assert_eq!(ppo.train(20), 2 * 3, "{env}");
            assert_eq!((ppo.replay_len(), ppo.train_steps()), (0, 6));
            assert_ne!(ppo.weights().data, before);
            assert!(ppo.last_loss().unwrap().is_finite());
            let saved = ppo.state();
            let mut other = Ppo::new(&cfg, &spec, None, 2, Device::Cpu);
            other.load_state(&saved).unwrap();
            assert_eq!(other.state(), saved);
            let mut a = vec![0.0; ppo.act_dim];
            other.act(&o, 0, &mut a);
            assert!(a[0].is_finite());
        }
    }
}
