//! [`DqnReplay`]: DQN's experience path — transitions into a ring (whole
//! rows through n-step windows, or, for a network that reads a stack of
//! byte frames, [`FrameChains`] that keep each frame once), prioritized
//! sampling over the ring's slots when configured, and the batch a
//! gradient step reads.

use crate::agents::{AgentError, stacked_frames};
use rand::Rng;
use rand_pcg::Pcg64;
use rlfleet_replay::{
    FrameChains, NStep, ObsValue, Prioritized, ReplayImage, SampledBatch, Transition, UniformReplay,
};
use rlfleet_shared::config::DqnConfig;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::nets::NetShape;

/// Where the transitions are kept.
#[derive(Debug)]
enum Store {
    /// Whole rows; n-step windows are assembled on the way in (a uint8
    /// env's steps through windows of bytes, kept as bytes).
    Rows {
        ring: UniformReplay,
        n_step: NStep,
        n_bytes: NStep<u8>,
    },
    /// Each frame once; windows are read at sample time.
    Chains(FrameChains),
}

/// The replay a [`super::Dqn`] trains from.
#[derive(Debug)]
pub(super) struct DqnReplay {
    store: Store,
    /// Prioritized sampling over the store's slots, when configured (a
    /// chain's slot has priority 0 until its window is complete).
    per: Option<Prioritized>,
    /// The last sample.
    pub batch: SampledBatch,
    /// Importance weights of the last prioritized sample.
    pub is_weights: Vec<f32>,
    n: u32,
    gamma: f64,
}

impl DqnReplay {
    /// Sized by `cfg.buffer_size`; a network that reads a channels-first
    /// stack of uint8 frames gets frame chains.
    pub fn new(cfg: &DqnConfig, spec: &EnvSpec, shape: &NetShape) -> DqnReplay {
        let capacity = cfg.buffer_size as usize;
        let store = match stacked_frames(shape) {
            Some((frame, k)) => Store::Chains(FrameChains::new(
                capacity, frame, k, 1, cfg.n_step, cfg.gamma,
            )),
            None => Store::Rows {
                ring: UniformReplay::with_obs(
                    capacity,
                    spec.obs_dim(),
                    1,
                    spec.obs_dtype.is_bytes(),
                ),
                n_step: NStep::new(cfg.n_step, cfg.gamma),
                n_bytes: NStep::new(cfg.n_step, cfg.gamma),
            },
        };
        DqnReplay {
            store,
            per: cfg
                .prioritized
                .then(|| Prioritized::new(capacity, cfg.per_alpha)),
            batch: SampledBatch::default(),
            is_weights: Vec::new(),
            n: cfg.n_step,
            gamma: cfg.gamma,
        }
    }

    /// Transitions that can be sampled.
    pub fn len(&self) -> usize {
        match &self.store {
            Store::Rows { ring, .. } => ring.len(),
            Store::Chains(c) => c.sampleable(),
        }
    }

    pub fn memory_bytes(&self) -> usize {
        match &self.store {
            Store::Rows { ring, .. } => ring.memory_bytes(),
            Store::Chains(c) => c.memory_bytes(),
        }
    }

    /// Sampled by priority (the last sample has importance weights).
    pub fn prioritized(&self) -> bool {
        self.per.is_some()
    }

    /// One step of an episode.
    pub fn observe(&mut self, t: &Transition<'_>) {
        match &mut self.store {
            Store::Rows { ring, n_step, .. } => n_step.push(t, store(ring, &mut self.per)),
            Store::Chains(c) => {
                let pushed = c.push(t);
                self.chained(pushed);
            }
        }
    }

    /// One step of a uint8 env's episode, its stacks as bytes: frame
    /// chains and rows take them as they are.
    pub fn observe_bytes(&mut self, t: &Transition<'_, u8>) {
        match &mut self.store {
            Store::Chains(c) => {
                let pushed = c.push_bytes(t);
                self.chained(pushed);
            }
            Store::Rows { ring, n_bytes, .. } => n_bytes.push(t, store(ring, &mut self.per)),
        }
    }

    /// A step went into a chain at `slot`, completing the windows of
    /// `done`: the slot waits (priority 0) until its own is complete.
    fn chained(&mut self, (slot, done): (usize, Vec<usize>)) {
        if let Some(per) = &mut self.per {
            per.withhold(slot);
            done.into_iter().for_each(|s| per.pushed(s));
        }
    }

    /// The episode ended: its window's tail goes in.
    pub fn end_episode(&mut self, episode: u64) {
        match &mut self.store {
            Store::Rows {
                ring,
                n_step,
                n_bytes,
            } => {
                n_step.end_episode(episode, store(ring, &mut self.per));
                n_bytes.end_episode(episode, store(ring, &mut self.per));
            }
            Store::Chains(c) => {
                let done = c.end_episode(episode);
                if let Some(per) = &mut self.per {
                    done.into_iter().for_each(|s| per.pushed(s));
                }
            }
        }
    }

    /// Episodes with an open window or chain.
    pub fn open_episodes(&self) -> usize {
        match &self.store {
            Store::Rows {
                n_step, n_bytes, ..
            } => n_step.open_episodes() + n_bytes.open_episodes(),
            Store::Chains(c) => c.open_episodes(),
        }
    }

    /// The episode is played again elsewhere: its window goes.
    pub fn abandon(&mut self, episode: u64) {
        match &mut self.store {
            Store::Rows {
                n_step, n_bytes, ..
            } => {
                n_step.abandon(episode);
                n_bytes.abandon(episode);
            }
            Store::Chains(c) => c.abandon(episode),
        }
    }

    /// Samples `b` transitions into [`DqnReplay::batch`] (by priority,
    /// with importance weights at exponent `beta`, when prioritized).
    pub fn sample(&mut self, b: usize, beta: f64, rng: &mut Pcg64) {
        let (indices, weights) = (&mut self.batch.indices, &mut self.is_weights);
        match (&self.store, &self.per) {
            (Store::Rows { ring, .. }, Some(per)) => {
                per.sample(b, ring.len(), beta, rng, indices, weights);
                ring.gather_into(&mut self.batch);
            }
            (Store::Rows { ring, .. }, None) => ring.sample_into(b, rng, &mut self.batch),
            (Store::Chains(c), Some(per)) => {
                per.sample(b, c.len(), beta, rng, indices, weights);
                // A slot the tree's rounding lands on that is not complete
                // (priority 0) gives way to a uniform complete one.
                for i in indices.iter_mut() {
                    while !c.is_complete(*i) {
                        *i = rng.random_range(0..c.len());
                    }
                }
                c.gather_into(&mut self.batch);
            }
            (Store::Chains(c), None) => c.sample_into(b, rng, &mut self.batch),
        }
    }

    /// The last sample's |TD errors| become its slots' priorities.
    pub fn update_priorities(&mut self, td_abs: &[f32], eps: f64) {
        if let Some(per) = &mut self.per {
            per.update(&self.batch.indices, td_abs, eps);
        }
    }

    /// The store (and priorities) for a checkpoint.
    pub fn image(&self) -> ReplayImage {
        let mut img = ReplayImage::default();
        let len = match &self.store {
            Store::Rows { ring, .. } => {
                ring.image(&mut img);
                ring.len()
            }
            Store::Chains(c) => {
                c.image(&mut img);
                c.len()
            }
        };
        if let Some(per) = &self.per {
            per.image(len, &mut img);
        }
        img
    }

    /// Takes a checkpoint's store (and priorities); episodes open then are
    /// played again from their start, so no window survives.
    pub fn restore(&mut self, img: &ReplayImage) -> Result<(), AgentError> {
        match &mut self.store {
            Store::Rows {
                ring,
                n_step,
                n_bytes,
            } => {
                ring.restore(img)?;
                *n_step = NStep::new(self.n, self.gamma);
                *n_bytes = NStep::new(self.n, self.gamma);
            }
            Store::Chains(c) => {
                c.restore(img)?;
                c.abandon_all();
            }
        }
        if let Some(per) = &mut self.per {
            per.restore(img, img.counter("len")? as usize)?;
        }
        Ok(())
    }
}

/// Puts a transition into the ring (and its slot into the priorities).
fn store<'a, T: ObsValue>(
    ring: &'a mut UniformReplay,
    per: &'a mut Option<Prioritized>,
) -> impl FnMut(&Transition<'_, T>, f32) + 'a {
    move |t, discount| {
        let slot = ring.push(t, discount);
        if let Some(per) = per {
            per.pushed(slot);
        }
    }
}
