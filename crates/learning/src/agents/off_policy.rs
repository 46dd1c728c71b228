//! [`OffPolicy`]: what DDPG, TD3 and SAC share around their networks — a
//! replay of actions in [-1, 1] units ([`ActionScale`] maps the env's box),
//! uniformly random actions before `learning_starts`, acting through a
//! plain-Rust copy of the actor (refreshed after each actor update), and
//! sampled batches as tensors ([`Batch`]).

use super::to_vec;
use rand::SeedableRng;
use rand_pcg::Pcg64;
use rlfleet_replay::{ObsValue, SampledBatch, Transition, UniformReplay};
use rlfleet_shared::env::{EnvSpec, Space};
use rlfleet_shared::policy::{ContinuousHead, ContinuousPolicy};
use tch::{Device, Kind, Tensor};

/// The settings [`OffPolicy`] takes from an agent's table.
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    pub hidden: &'a [u32],
    pub head: ContinuousHead,
    /// Exploration noise of a tanh head.
    pub noise: f64,
    pub buffer_size: u32,
    pub batch_size: u32,
    pub learning_starts: u64,
    pub gamma: f64,
}

#[derive(Debug)]
pub struct OffPolicy {
    replay: UniformReplay,
    rng: Pcg64,
    sampled: SampledBatch,
    scale: ActionScale,
    policy: ContinuousPolicy,
    policy_fresh: bool,
    normalized: Vec<f32>,
    picked: Vec<f32>,
    learning_starts: u64,
    batch_size: u32,
    gamma: f32,
    act_dim: i64,
    device: Device,
}

/// A sampled batch on the device: `obs`, `next` `[b, obs_dim]`, `act` `[b,
/// act_dim]` (in [-1, 1]), `rewards` and `discounts` `[b]`.
#[derive(Debug)]
pub struct Batch {
    pub obs: Tensor,
    pub next: Tensor,
    pub act: Tensor,
    pub rewards: Tensor,
    pub discounts: Tensor,
}

impl OffPolicy {
    pub fn new(spec: &EnvSpec, s: Settings<'_>, seed: u64, device: Device) -> OffPolicy {
        let Space::Box { low, high } = &spec.action_space else {
            panic!("DDPG, TD3 and SAC need a continuous action space (validated)");
        };
        let (obs_dim, act_dim) = (spec.obs_dim(), low.len());
        let mut policy = ContinuousPolicy::new(obs_dim, s.hidden, s.head, low, high, seed ^ 0xac7);
        policy.noise = s.noise as f32;
        OffPolicy {
            replay: UniformReplay::with_obs(
                s.buffer_size as usize,
                obs_dim,
                act_dim,
                spec.obs_dtype.is_bytes(),
            ),
            rng: Pcg64::seed_from_u64(seed ^ 0x5eed_0ac7),
            sampled: SampledBatch::default(),
            scale: ActionScale::new(low, high),
            policy,
            policy_fresh: false,
            normalized: Vec::with_capacity(act_dim),
            picked: Vec::with_capacity(act_dim),
            learning_starts: s.learning_starts,
            batch_size: s.batch_size,
            gamma: s.gamma as f32,
            act_dim: act_dim as i64,
            device,
        }
    }

    pub fn act_dim(&self) -> usize {
        self.act_dim as usize
    }

    /// An exploring action: uniform in the box before `learning_starts`,
    /// else from `actor` (version `version`).
    pub fn act(
        &mut self,
        actor: &Tensor,
        version: u64,
        obs: &[f32],
        env_steps: u64,
        action: &mut [f32],
    ) {
        if env_steps < self.learning_starts {
            self.scale.random(&mut self.rng, action);
            return;
        }
        if !self.policy_fresh {
            self.policy
                .load(version, &to_vec(actor))
                .expect("the actor's own shape");
            self.policy_fresh = true;
        }
        self.policy.act(obs, 1, true, &mut self.picked);
        action.copy_from_slice(&self.picked);
    }

    /// The actor's weights changed.
    pub fn actor_changed(&mut self) {
        self.policy_fresh = false;
    }

    /// Stores a transition (its action in [-1, 1] units; a uint8 env's
    /// observations as the bytes they are).
    pub fn observe<T: ObsValue>(&mut self, t: &Transition<'_, T>) {
        self.scale.normalize(t.action, &mut self.normalized);
        let t = Transition {
            action: &self.normalized,
            ..*t
        };
        self.replay.push(&t, self.gamma);
    }

    /// Training is due after `env_steps` (the schedule: one gradient step
    /// per env step once `learning_starts` have been taken).
    pub fn due(&self, env_steps: u64) -> bool {
        env_steps >= self.learning_starts && self.can_sample()
    }

    pub fn can_sample(&self) -> bool {
        self.replay.len() >= self.batch_size as usize
    }

    pub fn batch_size(&self) -> u32 {
        self.batch_size
    }

    pub fn replay_bytes(&self) -> usize {
        self.replay.memory_bytes()
    }

    pub fn replay(&self) -> &UniformReplay {
        &self.replay
    }

    pub fn replay_mut(&mut self) -> &mut UniformReplay {
        &mut self.replay
    }

    pub fn replay_len(&self) -> usize {
        self.replay.len()
    }

    /// A uniform sample of `batch_size` transitions, on the device.
    pub fn sample(&mut self) -> Batch {
        let b = self.batch_size as usize;
        self.replay.sample_into(b, &mut self.rng, &mut self.sampled);
        let (bi, ad) = (b as i64, self.act_dim);
        let (both, data) = crate::agents::batch_on_device(&self.sampled, self.device);
        // The critics read observations beside actions: values, converted
        // on the device.
        let both = both.to_kind(Kind::Float);
        let [_, _, o_act, o_rew, o_disc] = self.sampled.offsets().map(|o| o as i64);
        Batch {
            obs: both.narrow(0, 0, bi),
            next: both.narrow(0, bi, bi),
            act: data.narrow(0, o_act, bi * ad).view([bi, ad]),
            rewards: data.narrow(0, o_rew, bi),
            discounts: data.narrow(0, o_disc, bi),
        }
    }
}

/// Maps actions between an env's box and [-1, 1] (where tanh heads and
/// the replay work).
#[derive(Debug, Clone)]
pub struct ActionScale {
    center: Vec<f32>,
    half: Vec<f32>,
}

impl ActionScale {
    pub fn new(low: &[f32], high: &[f32]) -> ActionScale {
        ActionScale {
            center: low.iter().zip(high).map(|(l, h)| (l + h) / 2.0).collect(),
            half: low.iter().zip(high).map(|(l, h)| (h - l) / 2.0).collect(),
        }
    }

    /// An env action in [-1, 1] units, clipped there.
    pub fn normalize(&self, action: &[f32], out: &mut Vec<f32>) {
        out.clear();
        out.extend(
            action
                .iter()
                .zip(self.center.iter().zip(&self.half))
                .map(|(a, (c, h))| ((a - c) / h).clamp(-1.0, 1.0)),
        );
    }

    /// A uniformly random env action.
    pub fn random<R: rand::Rng>(&self, rng: &mut R, out: &mut [f32]) {
        for (o, (c, h)) in out.iter_mut().zip(self.center.iter().zip(&self.half)) {
            *o = c + h * (2.0 * rng.random::<f32>() - 1.0);
        }
    }
}

/// The agent methods DDPG, TD3 and SAC share, one arm per part
/// (`off_policy_agent!(act)` in `impl Act`, `learn`, `persist`), for a block
/// of a type with the fields `core` ([`OffPolicy`]), `actor` (the published
/// flat tensor), `actor_net`, `train_steps` and `last_loss`, and a
/// `gradient_step` method.
macro_rules! off_policy_agent {
    (act) => {
        fn act(&mut self, obs: &[f32], env_steps: u64, action: &mut [f32]) {
            self.core
                .act(&self.actor, self.train_steps, obs, env_steps, action);
        }
    };
    (learn) => {
        fn observe(&mut self, t: &rlfleet_replay::Transition<'_>) {
            self.core.observe(t);
        }

        fn observe_bytes(&mut self, t: &rlfleet_replay::Transition<'_, u8>) {
            self.core.observe(t);
        }

        fn train(&mut self, env_steps: u64) -> u32 {
            if !self.core.due(env_steps) {
                return 0;
            }
            self.gradient_step();
            1
        }

        fn sample_step(&mut self) -> u32 {
            if !self.core.can_sample() {
                return 0;
            }
            self.gradient_step();
            self.core.batch_size()
        }

        fn last_loss(&self) -> Option<f64> {
            self.last_loss.as_ref().map(|l| l.double_value(&[]))
        }

        fn train_steps(&self) -> u64 {
            self.train_steps
        }

        fn replay_len(&self) -> usize {
            self.core.replay_len()
        }

        fn replay_bytes(&self) -> usize {
            self.core.replay_bytes()
        }
    };
    (persist) => {
        fn replay_image(&self) -> Option<rlfleet_replay::ReplayImage> {
            let mut img = rlfleet_replay::ReplayImage::default();
            self.core.replay().image(&mut img);
            Some(img)
        }

        fn restore_replay(&mut self, img: &rlfleet_replay::ReplayImage) -> Result<(), AgentError> {
            Ok(self.core.replay_mut().restore(img)?)
        }

        fn weights(&self) -> super::Weights {
            super::Weights {
                version: self.train_steps,
                data: super::to_vec(&self.actor),
            }
        }

        fn load_weights(&mut self, w: &super::Weights) -> Result<(), AgentError> {
            super::check_weights(&w.data, self.actor_net.numel() as usize)?;
            super::copy_into(&mut self.actor, &w.data);
            self.core.actor_changed();
            Ok(())
        }
    };
}
pub(crate) use off_policy_agent;
