//! [`R2d2`]: recurrent DQN on replayed sequences (Kapturowski et al.
//! 2019, as seed_rl builds it). Episodes are cut into overlapping
//! sequences as their steps arrive ([`cutter`]), each stored with the
//! recurrent state it starts from in a prioritized [`SequenceReplay`]; a
//! gradient step burns each sampled sequence's first steps in through the
//! online and target networks (no gradient), then trains on the rest with
//! n-step double-Q targets under the value rescaling h ([`batch`]), and
//! gives each sequence the priority η max|δ| + (1 − η) mean|δ|.
//! Exploration follows Ape-X's ladder of ε across the fleet's actors.

use crate::agents::{Act, Learn, Parallel, Persist};

mod batch;
mod cutter;
#[cfg(test)]
mod tests;
mod update;

use super::q_state::{load_q_state, q_state};
use super::{AgentError, AgentState, Optimizer, Weights, check_weights};
use crate::nets::{DeviceForward, FlatNet};
use rlfleet_replay::{Prioritized, ReplayImage, SequenceReplay, Transition};

use cutter::{Cutter, Step};
use rand::SeedableRng;
use rand_pcg::Pcg64;
use rlfleet_shared::config::R2d2Config;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::nets::{ConvTorso, Core, Forward, NetCopy, NetShape, Rows};
use rlfleet_shared::policy::QPolicy;
use tch::{Device, Tensor};

/// The R2D2 learner.
#[derive(Debug)]
pub struct R2d2 {
    cfg: R2d2Config,
    net: FlatNet,
    device: Device,
    obs_dim: usize,
    params: Tensor,
    target: Tensor,
    opt: Optimizer,
    replay: SequenceReplay,
    per: Prioritized,
    cutter: Cutter,
    /// Advances each open episode's state as its steps arrive: a
    /// plain-Rust copy of an MLP, a convolutional network in libtorch on
    /// the learner's device.
    tracker: Box<dyn Forward>,
    /// Acts under `single` (env slot 0).
    actor: QPolicy,
    /// The online parameters on the host, copied out once per change for
    /// whichever of the tracker and the actor needs them (`None`: not
    /// since the last change).
    host: Option<Vec<f32>>,
    /// The tracker and the actor hold the current online parameters.
    tracker_fresh: bool,
    actor_fresh: bool,
    /// The action picked (reused).
    picked: Vec<f32>,
    /// Episodes `single` has finished (its ladder rung).
    episodes: u64,
    rng: Pcg64,
    train_steps: u64,
    sampled: Vec<usize>,
    is_weights: Vec<f32>,
    last_loss: Option<Tensor>,
    last_grad_norm: Option<Tensor>,
    /// Mean priority given to the latest batch.
    last_priority: Option<f64>,
}

impl R2d2 {
    pub fn new(
        cfg: &R2d2Config,
        spec: &EnvSpec,
        torso: Option<ConvTorso>,
        core: Core,
        seed: u64,
        device: Device,
    ) -> R2d2 {
        let n_actions = spec
            .action_space
            .n()
            .expect("R2D2 needs a discrete action space (validated)");
        let shape = NetShape::with_torso(torso, spec.obs_dim(), &cfg.hidden, n_actions)
            .with_core(Some(core));
        let net = FlatNet::from_shape(shape.clone());
        tch::manual_seed(seed as i64);
        let params = net.init(device).set_requires_grad(true);
        let target = params.detach().copy();
        let mut adam = super::Adam::new(&params, cfg.lr);
        adam.eps = cfg.adam_eps;
        let (unroll, burn) = (cfg.unroll_length as usize, cfg.burn_in as usize);
        let cutter = Cutter::new(unroll, burn, spec.obs_dim(), core.state_len());
        let mut actor = QPolicy::from_shape(shape.clone(), seed ^ 0xd2d2);
        // A convolutional network acts through libtorch, as it tracks.
        let conv = shape.torso().is_some();
        let on_device =
            |s: &NetShape| -> Box<dyn Forward> { Box::new(DeviceForward::new(s.clone(), device)) };
        if conv {
            actor = actor
                .with_forward(on_device(&shape))
                .expect("built for the same network");
        }
        actor.epsilon = cfg.ladder_epsilon(0) as f32;
        let capacity = cfg.buffer_size as usize;
        let mut replay = SequenceReplay::new(
            capacity,
            spec.obs_dim(),
            core.state_len(),
            cutter.max_steps(),
            spec.obs_dtype.is_bytes(),
        );
        if let Some((frame, k)) = super::stacked_frames(&shape) {
            // Each slot adds about an unroll of new frames (the burn-in's
            // are the sequence before's); a quarter more for episodes'
            // first stacks and last observations, and for episodes whose
            // sequences come far apart.
            let frames = (capacity * unroll * 5 / 4).max((cutter.max_steps() + 1) * k);
            replay = replay.with_frames((frame, k), frames);
        }
        R2d2 {
            replay,
            per: Prioritized::new(cfg.buffer_size as usize, cfg.priority_exponent),
            cutter,
            tracker: if conv {
                on_device(&shape)
            } else {
                Box::new(NetCopy::new(shape))
            },
            actor,
            host: None,
            tracker_fresh: false,
            actor_fresh: false,
            picked: Vec::with_capacity(1),
            episodes: 0,
            cfg: cfg.clone(),
            net,
            device,
            obs_dim: spec.obs_dim(),
            params,
            target,
            opt: Optimizer::Adam(adam),
            rng: Pcg64::seed_from_u64(seed ^ 0x5eed_d2d2),
            train_steps: 0,
            sampled: Vec::new(),
            is_weights: Vec::new(),
            last_loss: None,
            last_grad_norm: None,
            last_priority: None,
        }
    }

    /// The online parameters changed: the copies load them when next used.
    fn params_changed(&mut self) {
        self.host = None;
        self.tracker_fresh = false;
        self.actor_fresh = false;
    }

    /// Loads the current online parameters into the tracker.
    fn refresh_tracker(&mut self) {
        if !self.tracker_fresh {
            let (p, net) = (&self.params, &self.net);
            let host = self.host.get_or_insert_with(|| net.shared_values(p));
            self.tracker.load(host).expect("the network's own size");
            self.tracker_fresh = true;
        }
    }

    /// Loads the current online parameters into `single`'s actor.
    fn refresh_actor(&mut self) {
        if !self.actor_fresh {
            let (p, net) = (&self.params, &self.net);
            let host = self.host.get_or_insert_with(|| net.shared_values(p));
            self.actor
                .load(self.train_steps, host)
                .expect("the network's own size");
            self.actor_fresh = true;
        }
    }

    /// One step of an episode into the cutter; the episode's state
    /// advanced through the tracker.
    fn push_step<T>(&mut self, t: &Transition<'_, T>, obs: Rows<'_>, next_obs: Rows<'_>) {
        self.refresh_tracker();
        let step = Step {
            episode: t.episode,
            obs,
            action: t.action[0],
            reward: t.reward,
            next_obs,
            terminated: t.terminated,
        };
        let tracker = &mut self.tracker;
        self.cutter.push(
            &step,
            |obs, state| {
                tracker.forward_state(obs, 1, state);
            },
            Self::store(&mut self.replay, &mut self.per),
        );
    }

    /// Stores the sequences the cutter sends out, at the top priority.
    fn store(
        replay: &mut SequenceReplay,
        per: &mut Prioritized,
    ) -> impl FnOnce(&rlfleet_replay::Sequence<'_>) {
        move |s| {
            let (slot, dead) = replay.push(s);
            per.pushed(slot);
            // Slots whose frames the replay's ring came round to.
            for d in dead {
                per.withhold(d);
            }
        }
    }
}

impl Act for R2d2 {
    fn act(&mut self, obs: &[f32], _env_steps: u64, action: &mut [f32]) {
        self.refresh_actor();
        self.actor
            .act_slots(Rows::Values(obs), &[0], &mut self.picked);
        action[0] = self.picked[0];
    }

    /// Rung 0 of the ladder (actors get theirs from
    /// [`Act::actor_epsilon`]).
    fn epsilon(&self, _env_steps: u64) -> f64 {
        self.cfg.ladder_epsilon(0)
    }

    fn actor_epsilon(&self, _env_steps: u64, actor: u64) -> f64 {
        self.cfg.ladder_epsilon(actor)
    }
}

impl Learn for R2d2 {
    fn observe(&mut self, t: &Transition<'_>) {
        self.push_step(t, Rows::Values(t.obs), Rows::Values(t.next_obs));
    }

    /// A uint8 env's steps stay bytes, in the sequences and to the device.
    fn observe_bytes(&mut self, t: &Transition<'_, u8>) {
        self.push_step(t, Rows::Bytes(t.obs), Rows::Bytes(t.next_obs));
    }

    fn end_episode(&mut self, episode: u64) {
        self.cutter
            .end(episode, Self::store(&mut self.replay, &mut self.per));
        self.replay.forget(episode);
        // `single`'s next episode: a fresh state, the next rung.
        self.episodes += 1;
        self.actor.reset_slot(0);
        self.actor.epsilon = self.cfg.ladder_epsilon(self.episodes) as f32;
    }

    fn abandon_episode(&mut self, episode: u64) {
        self.cutter.abandon(episode);
        self.replay.forget(episode);
    }

    fn open_episodes(&self) -> usize {
        self.cutter.open()
    }

    fn train(&mut self, env_steps: u64) -> u32 {
        let ready = env_steps >= self.cfg.learning_starts
            && self.replay.len() >= self.cfg.batch_size as usize
            && env_steps.is_multiple_of(u64::from(self.cfg.train_freq));
        if !ready {
            return 0;
        }
        self.gradient_step();
        1
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

    fn scalars(&self, _env_steps: u64) -> Vec<(&'static str, f64)> {
        let mut s = vec![("train/learning_rate", self.opt.lr())];
        s.extend(self.last_loss().map(|l| ("train/loss", l)));
        s.extend(
            self.last_grad_norm
                .as_ref()
                .map(|g| ("train/grad_norm", g.double_value(&[]))),
        );
        s.extend(self.last_priority.map(|p| ("r2d2/priority_mean", p)));
        s.push(("r2d2/sequences", self.replay.len() as f64));
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

/// The tensors of R2D2's state over its network's parameters: the
/// networks and either optimizer's moments.
const Q_TENSORS: [&str; 6] = [
    "online",
    "target",
    "adam.m",
    "adam.v",
    "rmsprop.square_avg",
    "rmsprop.grad_avg",
];

impl Persist for R2d2 {
    fn weights(&self) -> Weights {
        Weights {
            version: self.train_steps,
            data: self.net.shared_values(&self.params),
        }
    }

    fn load_weights(&mut self, w: &Weights) -> Result<(), AgentError> {
        check_weights(&w.data, self.net.numel() as usize)?;
        self.net.load_shared(&mut self.params, &w.data);
        self.params_changed();
        Ok(())
    }

    fn state(&self) -> AgentState {
        let mut s = q_state(&self.params, &self.target, &self.opt, self.train_steps);
        self.net.state_to_shared(&mut s, &Q_TENSORS);
        s
    }

    fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError> {
        let s = self.net.state_to_own(s, &Q_TENSORS);
        self.train_steps = load_q_state(&s, &mut self.params, &mut self.target, &mut self.opt)?;
        self.params_changed();
        Ok(())
    }

    fn replay_image(&self) -> Option<ReplayImage> {
        let mut img = ReplayImage::default();
        self.replay.image(&mut img);
        self.per.image(self.replay.len(), &mut img);
        Some(img)
    }

    fn restore_replay(&mut self, img: &ReplayImage) -> Result<(), AgentError> {
        self.replay.restore(img)?;
        self.per.restore(img, self.replay.len())?;
        // Slots whose frames did not fit the ring again are never drawn.
        for slot in (0..self.replay.len()).filter(|&s| !self.replay.alive(s)) {
            self.per.withhold(slot);
        }
        self.cutter.abandon_all();
        Ok(())
    }
}

impl Parallel for R2d2 {}
