//! [`Rollout`]: consecutive steps of one episode as an on-policy agent
//! (PPO, IMPALA) holds them until it trains on them, with the policy
//! version that acted each. A uint8 env's observations are kept as bytes
//! and cross to the device as bytes.

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
    /// The version of the weights that acted each step.
    pub versions: Vec<u64>,
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
            versions: Vec::new(),
        }
    }

    /// Appends one step (observations as they came: values or bytes),
    /// acted by the weights of `version`.
    pub fn push<T: ObsValue>(&mut self, t: &Transition<'_, T>, version: u64) {
        self.versions.push(version);
        self.obs.push_row(t.obs);
        self.actions.extend_from_slice(t.action);
        self.rewards.push(t.reward);
        self.last_next.set_row(t.next_obs);
        self.terminated = t.terminated;
    }

    /// Steps held.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Bytes its steps take.
    pub fn bytes(&self) -> usize {
        self.obs.bytes()
            + self.last_next.bytes()
            + 4 * (self.actions.len() + self.rewards.len())
            + 8 * self.versions.len()
    }
}

/// Episodes with an open rollout or a recurrent state carried to their
/// next one.
pub(super) fn open_count<R, V>(open: &HashMap<u64, R>, carry: &HashMap<u64, V>) -> usize {
    open.len() + carry.keys().filter(|e| !open.contains_key(e)).count()
}

/// Appends `t`, acted by the weights of `version`, to its episode's
/// rollout in `open` (a new one, with observations as bytes when `bytes`,
/// for an episode not seen yet).
pub(super) fn keep<T: ObsValue>(
    open: &mut HashMap<u64, Rollout>,
    bytes: bool,
    t: &Transition<'_, T>,
    version: u64,
) {
    open.entry(t.episode)
        .or_insert_with(|| Rollout {
            episode: t.episode,
            ..Rollout::new(bytes)
        })
        .push(t, version);
}
