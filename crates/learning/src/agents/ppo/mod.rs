//! [`Ppo`]: proximal policy optimisation (Schulman et al. 2017) with the
//! clipped surrogate objective, GAE, optional value clipping, an entropy
//! bonus, minibatch epochs and per-minibatch advantage normalisation. The
//! policy MLP gives logits over discrete actions, or the mean of a Gaussian
//! whose state-independent log stds follow the MLP's parameters in the
//! same flat tensor (so they are published with it); the value MLP is
//! separate. Steps are kept per episode (episodes from many actors
//! interleave); every `n_steps` transitions the held segments are trained
//! on, an unfinished one bootstrapping from the value of its last state.
//! The old log probabilities are the ones each step carries: its action's
//! log-probability under the weights that chose it, as the actor (or the
//! `seed` front, or under `single` the agent's own acting) computed it, so
//! a step acted while the previous update was running (`seed-a2c` with
//! `[distributed] max_batches_ahead` above 2), or by a recurrent core from
//! the state the actor held, is weighed by the ratio to the policy that
//! chose it. A step that carries none falls back to the policy at update
//! time (counted: `train/uncorrected_steps`).
//!
//! With a recurrent core (`[model] core = "lstm"`, `recurrent.rs`) both
//! networks run over each held segment as a sequence (the policy from the
//! state its actor acted from, where it said), and minibatches are whole
//! segments.

mod log_prob;
mod objective;
mod recurrent;

use super::policy_value::PolicyValue;
use super::rollout::{self, Kept, Rollout};
use super::{AgentError, AgentState, Weights, check_weights};
use crate::agents::{Act, Learn, Parallel, Persist};
use crate::nets::FlatNet;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rlfleet_replay::{ObsValue, Transition};
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
    /// How its rollouts keep observations (bytes for a uint8 env, one
    /// frame per step of a stack).
    kept: Kept,
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
    /// The state the next step observed was acted from, when the actor
    /// said and the step starts its episode's trajectory.
    acted_from: Option<(u64, Vec<f32>)>,
    /// With a recurrent core: each unfinished episode's states (policy's
    /// then value's, `[2 * state_len]`) where its trained steps ended.
    carry: HashMap<u64, Tensor>,
    /// With a recurrent core: steps backpropagated through at most
    /// (`model.max_seq_len`).
    max_seq_len: u32,
    /// Steps that carried no behaviour log-probability, weighed against
    /// the policy at update time instead.
    uncorrected: u64,
}

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
        let kept = Kept::of(spec.obs_dtype.is_bytes(), obs_dim, policy_net.shape());
        Ppo {
            nets: PolicyValue::new(policy_net, value_net, policy, value, cfg.lr),
            cfg: cfg.clone(),
            obs_dim,
            kept,
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
            acted_from: None,
            carry: HashMap::new(),
            max_seq_len: max_seq_len.max(1),
            uncorrected: 0,
        }
    }

    fn recurrent(&self) -> bool {
        self.nets.policy_net.shape().core().is_some()
    }

    /// Holds `t` in its episode's segment.
    fn observe_step<T: ObsValue>(&mut self, t: &Transition<'_, T>) {
        rollout::keep(&mut self.open, self.kept, &mut self.acted_from, t);
        self.held += 1;
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
        let (obs, lasts) = rollout::on_device(&segments, od, self.device);
        let actions: Vec<f32> = segments
            .iter()
            .flat_map(|s| s.actions.iter().copied())
            .collect();
        let actions = Tensor::from_slice(&actions)
            .view([n as i64, ad])
            .to_device(self.device);
        let (old_values, boot) =
            tch::no_grad(|| (self.nets.values(&obs), self.nets.values(&lasts)));
        let old_logp = self.behaviour_logp(&segments, &obs, &actions);
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

impl Act for Ppo {
    fn act(&mut self, obs: &[f32], _env_steps: u64, action: &mut [f32]) {
        if !self.actor_fresh {
            let w = self.nets.policy_values();
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

    fn last_logp(&self) -> Option<f32> {
        match &self.actor {
            Actor::Discrete(q) => q.logps(),
            Actor::Continuous(c) => c.logps(),
        }
        .first()
        .copied()
    }
}

impl Learn for Ppo {
    fn acted_from(&mut self, episode: u64, state: &[f32]) {
        // Only a trajectory's first step starts from it.
        if !self.open.contains_key(&episode) {
            self.acted_from = Some((episode, state.to_vec()));
        }
    }

    fn observe(&mut self, t: &Transition<'_>) {
        self.observe_step(t);
    }

    fn observe_bytes(&mut self, t: &Transition<'_, u8>) {
        self.observe_step(t);
    }

    fn end_episode(&mut self, episode: u64) {
        match self.open.remove(&episode) {
            // Its state is taken when the segment is trained on.
            Some(s) => self.ready.push(s),
            None => drop(self.carry.remove(&episode)),
        }
        self.reset_actor_state();
    }

    fn open_episodes(&self) -> usize {
        rollout::open_count(&self.open, &self.carry)
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
        let mut s = self
            .nets
            .scalars(self.last_loss.as_ref(), self.last_entropy.as_ref());
        s.push(("train/uncorrected_steps", self.uncorrected as f64));
        s
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
}

impl Persist for Ppo {
    fn weights(&self) -> Weights {
        Weights {
            version: self.train_steps,
            data: self.nets.policy_values(),
        }
    }

    fn load_weights(&mut self, w: &Weights) -> Result<(), AgentError> {
        check_weights(&w.data, self.nets.policy.numel())?;
        self.nets.load_policy(&w.data);
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

impl Parallel for Ppo {}

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
                step: 0,
                logp: None,
            });
        }
    }

    /// log π(a|x) of every held step under `weights`, by a network of
    /// the same shape loaded with them apart from the agent.
    fn logp_under(ppo: &Ppo, weights: &[f32]) -> Vec<f32> {
        let params = Tensor::from_slice(weights);
        let mut out = Vec::new();
        for s in ppo.ready.iter() {
            let obs = Rollout::obs_on_device(&[s], Device::Cpu);
            let logp = ppo
                .nets
                .policy_net
                .forward(&params, &obs)
                .log_softmax(1, Kind::Float);
            for (i, &a) in s.actions.iter().enumerate() {
                out.push(logp.double_value(&[i as i64, a as i64]) as f32);
            }
        }
        out
    }

    /// Steps acted while an update ran (by the weights before it) carry
    /// their actor's log-probabilities under those weights, and are
    /// weighed against them, not the ones trained since; steps that carry
    /// none fall back to the current weights and are counted.
    #[test]
    fn old_log_probs_are_those_each_step_carries() {
        use rlfleet_shared::nets::Rows;
        let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
        let cfg = PpoConfig {
            n_steps: 8,
            batch_size: 8,
            n_epochs: 2,
            hidden: vec![8],
            ..PpoConfig::default()
        };
        let mut ppo = Ppo::new(&cfg, &spec, None, 3, Device::Cpu);
        let v0 = ppo.weights();
        feed(&mut ppo, 1, 8, 4, 1.0);
        ppo.end_episode(1);
        assert_eq!(ppo.train(8), 2);
        let v2 = ppo.weights();
        assert_eq!((v0.version, v2.version), (0, 2));
        // `feed` says no log-probability: those 8 fell back.
        assert_eq!(ppo.uncorrected, 8);
        // Episode 2 acted by version 0 (the front ran on during the
        // update), episode 3 by version 2, episode 4 by nobody who said.
        let actor = |w: &Weights| {
            let mut q = QPolicy::from_shape(ppo.nets.policy_net.shape().clone(), 5);
            q.sample = true;
            q.load(w.version, &w.data).unwrap();
            Some(q)
        };
        let mut said = Vec::new();
        for (episode, mut by) in [(2, actor(&v0)), (3, actor(&v2)), (4, None)] {
            for t in 0..3 {
                let o = vec![0.1 * t as f32 - 0.05 * episode as f32; 4];
                let (mut action, mut logp) = (vec![1.0], None);
                if let Some(q) = &mut by {
                    q.act_rows(Rows::Values(&o), 1, &mut action);
                    logp = q.logps().first().copied();
                    said.push(logp.unwrap());
                }
                ppo.observe(&Transition {
                    obs: &o,
                    action: &action,
                    reward: 1.0,
                    next_obs: &o,
                    terminated: t == 2,
                    episode,
                    step: t,
                    logp,
                });
            }
            ppo.end_episode(episode);
        }
        let parts: Vec<&Rollout> = ppo.ready.iter().collect();
        let obs = Rollout::obs_on_device(&parts, Device::Cpu);
        let actions: Vec<f32> = ppo.ready.iter().flat_map(|s| s.actions.clone()).collect();
        let actions = Tensor::from_slice(&actions).view([-1, 1]);
        let segments = std::mem::take(&mut ppo.ready);
        let mu = Vec::<f32>::try_from(&ppo.behaviour_logp(&segments, &obs, &actions)).unwrap();
        ppo.ready = segments;
        let (under_v0, under_v2) = (logp_under(&ppo, &v0.data), logp_under(&ppo, &v2.data));
        for i in 0..9 {
            let want = if i < 3 { under_v0[i] } else { under_v2[i] };
            assert!((mu[i] - want).abs() < 1e-5, "step {i}: {} vs {want}", mu[i]);
            if i < 6 {
                assert_eq!(mu[i], said[i], "step {i} weighs by what it carried");
            }
        }
        assert!((0..3).any(|i| (under_v0[i] - under_v2[i]).abs() > 1e-4));
        assert_eq!(ppo.uncorrected, 11);
        let scalars = ppo.scalars(0);
        assert!(
            scalars.contains(&("train/uncorrected_steps", 11.0)),
            "{scalars:?}"
        );
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
                step: 0,
                logp: None,
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

    /// A checkpoint written before the learner kept the core's weights
    /// first (`fixtures/README.md`) loads: the policy's sequence pass
    /// computes what the plain-Rust copy computes from the saved weights,
    /// and the state goes back out in the shared layout bit for bit.
    #[test]
    fn a_recurrent_checkpoint_of_the_earlier_layout_loads() {
        use rlfleet_shared::nets::{Forward, NetCopy, Rows};
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/ppo-lstm-8.safetensors");
        let ck = rlfleet_checkpoint::Checkpoint::load(&path).unwrap();
        let spec = rlfleet_shared::env::spec("MemoryCorridor-v0").unwrap();
        let cfg = PpoConfig {
            hidden: vec![8],
            ..PpoConfig::default()
        };
        let core = Core { size: 8, layers: 1 };
        let mut ppo = Ppo::with_core(&cfg, &spec, None, (Some(core), 16), 9, Device::Cpu);
        assert!(!ppo.nets.policy_net.in_shared_order());
        ppo.load_state(&ck.agent_state).unwrap();
        assert_eq!(ppo.state().first_difference(&ck.agent_state), None);
        let online = &ck.agent_state.tensor("online").unwrap().data;
        assert_eq!(ppo.weights().data, *online);
        let (obs_dim, steps) = (spec.obs_dim(), 5);
        let x: Vec<f32> = (0..steps * obs_dim)
            .map(|i| ((i * 3) % 4) as f32 / 3.0)
            .collect();
        let zeros = Tensor::zeros([1, core.state_len() as i64], (Kind::Float, Device::Cpu));
        let (out, _) = ppo.nets.policy_net.forward_seq_all(
            &ppo.nets.policy,
            &Tensor::from_slice(&x).view([steps as i64, obs_dim as i64]),
            &zeros,
            steps as i64,
        );
        let out: Vec<f32> = Vec::try_from(out.view([-1])).unwrap();
        let mut copy = NetCopy::new(ppo.nets.policy_net.shape().clone());
        copy.load(online).unwrap();
        let mut state = vec![0.0; core.state_len()];
        let n_out = out.len() / steps;
        for t in 0..steps {
            let row = Rows::Values(&x[t * obs_dim..(t + 1) * obs_dim]);
            let y = copy.forward_state(row, 1, &mut state);
            for (a, b) in y.iter().zip(&out[t * n_out..(t + 1) * n_out]) {
                assert!((a - b).abs() < 1e-5, "step {t}: copy {a}, learner {b}");
            }
        }
    }
}
