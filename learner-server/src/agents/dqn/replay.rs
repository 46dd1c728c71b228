//! [`DqnReplay`]: DQN's experience path — transitions through n-step
//! windows into a uniform ring, prioritized sampling over the ring's slots
//! when configured, and the batch a gradient step reads.

use crate::agents::AgentError;
use crate::replay::{NStep, Prioritized, ReplayImage, SampledBatch, Transition, UniformReplay};
use rand_pcg::Pcg64;
use rlfleet_shared::config::DqnConfig;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::nets::NetShape;

/// The replay a [`super::Dqn`] trains from.
#[derive(Debug)]
pub(super) struct DqnReplay {
    ring: UniformReplay,
    /// Assembles n-step transitions on their way into `ring`.
    n_step: NStep,
    /// Prioritized sampling over `ring`'s slots, when configured.
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
    /// stack of uint8 frames keeps one frame per next observation.
    pub fn new(cfg: &DqnConfig, spec: &EnvSpec, shape: &NetShape) -> DqnReplay {
        let ring = UniformReplay::with_obs(
            cfg.buffer_size as usize,
            spec.obs_dim(),
            1,
            spec.obs_dtype.is_bytes(),
        )
        .stacked(stacked_frame(shape, cfg.n_step));
        DqnReplay {
            ring,
            n_step: NStep::new(cfg.n_step, cfg.gamma),
            per: cfg
                .prioritized
                .then(|| Prioritized::new(cfg.buffer_size as usize, cfg.per_alpha)),
            batch: SampledBatch::default(),
            is_weights: Vec::new(),
            n: cfg.n_step,
            gamma: cfg.gamma,
        }
    }

    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn memory_bytes(&self) -> usize {
        self.ring.memory_bytes()
    }

    /// Sampled by priority (the last sample has importance weights).
    pub fn prioritized(&self) -> bool {
        self.per.is_some()
    }

    /// One step of an episode.
    pub fn observe(&mut self, t: &Transition<'_>) {
        self.n_step.push(t, store(&mut self.ring, &mut self.per));
    }

    /// The episode ended: its window's tail goes in.
    pub fn end_episode(&mut self, episode: u64) {
        self.n_step
            .end_episode(episode, store(&mut self.ring, &mut self.per));
    }

    /// The episode is played again elsewhere: its window goes.
    pub fn abandon(&mut self, episode: u64) {
        self.n_step.abandon(episode);
    }

    /// Samples `b` transitions into [`DqnReplay::batch`] (by priority,
    /// with importance weights at exponent `beta`, when prioritized).
    pub fn sample(&mut self, b: usize, beta: f64, rng: &mut Pcg64) {
        if let Some(per) = &self.per {
            per.sample(
                b,
                self.ring.len(),
                beta,
                rng,
                &mut self.batch.indices,
                &mut self.is_weights,
            );
            self.ring.gather_into(&mut self.batch);
        } else {
            self.ring.sample_into(b, rng, &mut self.batch);
        }
    }

    /// The last sample's |TD errors| become its slots' priorities.
    pub fn update_priorities(&mut self, td_abs: &[f32], eps: f64) {
        if let Some(per) = &mut self.per {
            per.update(&self.batch.indices, td_abs, eps);
        }
    }

    /// The ring (and priorities) for a checkpoint.
    pub fn image(&self) -> ReplayImage {
        let mut img = ReplayImage::default();
        self.ring.image(&mut img);
        if let Some(per) = &self.per {
            per.image(self.ring.len(), &mut img);
        }
        img
    }

    /// Takes a checkpoint's ring (and priorities); episodes open then are
    /// played again from their start, so no window survives.
    pub fn restore(&mut self, img: &ReplayImage) -> Result<(), AgentError> {
        if let Some(per) = &mut self.per {
            per.restore(img, img.counter("len")? as usize)?;
        }
        self.ring.restore(img)?;
        self.n_step = NStep::new(self.n, self.gamma);
        Ok(())
    }
}

/// Puts a transition into the ring (and its slot into the priorities).
fn store<'a>(
    ring: &'a mut UniformReplay,
    per: &'a mut Option<Prioritized>,
) -> impl FnMut(&Transition<'_>, f32) + 'a {
    move |t, discount| {
        let slot = ring.push(t, discount);
        if let Some(per) = per {
            per.pushed(slot);
        }
    }
}

/// The bytes of one frame when the network reads a channels-first stack of
/// uint8 frames and transitions are one-step (so a next observation is the
/// observation moved on by one frame): the replay then keeps only each next
/// observation's newest frame.
fn stacked_frame(shape: &NetShape, n_step: u32) -> Option<usize> {
    let t = shape.torso()?;
    let [c, h, w] = t.input;
    (t.bytes && !t.channels_last && c > 1 && n_step == 1).then_some(h * w)
}
