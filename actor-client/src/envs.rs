//! [`EnvSlots`]: the environments one actor process runs (the WorkerProxy
//! idea: several envs share one connection and one copy of the weights),
//! each playing the episode the learner assigned it.

use rlfleet_shared::env::{self, Action, Env, Step};
use rlfleet_shared::wire::{EpisodeStart, Welcome};

/// One environment and its episode.
pub struct Slot {
    pub env: Box<dyn Env>,
    /// The assigned episode; `None` while idle.
    pub episode: Option<u64>,
    pub obs: Vec<f32>,
    pub ret: f64,
    pub len: u32,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("env", &self.env.spec().id)
            .field("episode", &self.episode)
            .field("len", &self.len)
            .finish()
    }
}

/// The actor's environments.
#[derive(Debug)]
pub struct EnvSlots {
    pub slots: Vec<Slot>,
    pub obs_dim: usize,
    pub act_dim: usize,
    pub n_actions: Option<usize>,
}

impl EnvSlots {
    /// Builds the envs a welcome asks for, after checking they match.
    pub fn new(w: &Welcome) -> anyhow::Result<EnvSlots> {
        let spec = env::spec(&w.env_id)?;
        anyhow::ensure!(
            spec.obs_dim() == w.obs_dim as usize
                && spec.action_space.flat_dim() == w.action_dim as usize,
            "the learner's `{}` has obs_dim {} and action_dim {}; this actor's has {} and {}",
            w.env_id,
            w.obs_dim,
            w.action_dim,
            spec.obs_dim(),
            spec.action_space.flat_dim()
        );
        let slots = (0..w.n_envs)
            .map(|_| {
                Ok(Slot {
                    env: env::make(&w.env_id)?,
                    episode: None,
                    obs: vec![0.0; spec.obs_dim()],
                    ret: 0.0,
                    len: 0,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(EnvSlots {
            slots,
            obs_dim: spec.obs_dim(),
            act_dim: spec.action_space.flat_dim(),
            n_actions: spec.action_space.n(),
        })
    }

    /// Starts the assigned episodes (reset with their seeds).
    pub fn start(&mut self, starts: &[EpisodeStart]) -> anyhow::Result<()> {
        let n = self.slots.len();
        for s in starts {
            let slot = self.slots.get_mut(s.env as usize).ok_or_else(|| {
                anyhow::anyhow!(
                    "the learner started episode {} on env {}, this actor runs {}",
                    s.episode,
                    s.env,
                    n
                )
            })?;
            slot.env.reset(Some(s.seed), &mut slot.obs);
            slot.episode = Some(s.episode);
            slot.ret = 0.0;
            slot.len = 0;
        }
        Ok(())
    }

    pub fn idle(&self) -> Vec<u32> {
        (0..self.slots.len() as u32)
            .filter(|&i| self.slots[i as usize].episode.is_none())
            .collect()
    }

    /// Steps env `i` with `action`; the observation lands in its `obs`.
    pub fn step(&mut self, i: usize, action: &[f32]) -> Step {
        let slot = &mut self.slots[i];
        let a = if self.n_actions.is_some() {
            Action::Discrete(action[0] as usize)
        } else {
            Action::Continuous(action)
        };
        let step = slot.env.step(a, &mut slot.obs);
        slot.ret += step.reward;
        slot.len += 1;
        step
    }
}
