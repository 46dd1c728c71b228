//! [`Rollout`]: consecutive steps of one episode as an on-policy agent
//! (PPO, IMPALA) holds them until it trains on them, with each action's
//! log-probability under the weights that chose it. A uint8 env's
//! observations are kept as bytes and cross to the device as bytes.

use rlfleet_replay::{ObsStore, ObsValue, Transition};
use std::collections::HashMap;

#[derive(Debug)]
pub(super) struct Rollout {
    /// The episode the steps are of.
    pub episode: u64,
    pub obs: ObsStore,
    /// Each step's action (`act_dim` values; a discrete action's index).
    pub actions: Vec<f32>,
    pub rewards: Vec<f32>,
    /// The observation after the last step, and whether it is terminal.
    pub last_next: ObsStore,
    pub terminated: bool,
    /// Each step's action's log-probability under the weights that chose
    /// it, as the actor (or the `seed` front) said: the behaviour policy.
    /// NaN where it did not say.
    pub logp: Vec<f32>,
}

impl Rollout {
    /// Empty; observations as bytes when `bytes`.
    pub fn new(bytes: bool) -> Rollout {
        Rollout {
            episode: 0,
            obs: ObsStore::empty(bytes),
            actions: Vec::new(),
            rewards: Vec::new(),
            last_next: ObsStore::empty(bytes),
            terminated: false,
            logp: Vec::new(),
        }
    }

    /// Appends one step (observations as they came: values or bytes).
    pub fn push<T: ObsValue>(&mut self, t: &Transition<'_, T>) {
        self.logp.push(t.logp.unwrap_or(f32::NAN));
        self.obs.push_row(t.obs);
        self.actions.extend_from_slice(t.action);
        self.rewards.push(t.reward);
        self.last_next.set_row(t.next_obs);
        self.terminated = t.terminated;
    }

    /// Every step's behaviour log-probability is known.
    pub fn behaviour_known(&self) -> bool {
        self.logp.iter().all(|l| !l.is_nan())
    }

    /// Steps held.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Bytes its steps take.
    pub fn bytes(&self) -> usize {
        self.obs.bytes()
            + self.last_next.bytes()
            + 4 * (self.actions.len() + self.rewards.len() + self.logp.len())
    }
}

/// Episodes with an open rollout or a recurrent state carried to their
/// next one.
pub(super) fn open_count<R, V>(open: &HashMap<u64, R>, carry: &HashMap<u64, V>) -> usize {
    open.len() + carry.keys().filter(|e| !open.contains_key(e)).count()
}

/// Appends `t` to its episode's rollout in `open` (a new one, with
/// observations as bytes when `bytes`, for an episode not seen yet).
pub(super) fn keep<T: ObsValue>(
    open: &mut HashMap<u64, Rollout>,
    bytes: bool,
    t: &Transition<'_, T>,
) {
    open.entry(t.episode)
        .or_insert_with(|| Rollout {
            episode: t.episode,
            ..Rollout::new(bytes)
        })
        .push(t);
}

/// Every held step's behaviour log-probability, in the rollouts' order
/// (NaN where unknown).
pub(super) fn behaviour(rollouts: &[Rollout]) -> Vec<f32> {
    rollouts
        .iter()
        .flat_map(|r| r.logp.iter().copied())
        .collect()
}
