//! [`Rollout`]: consecutive steps of one episode as an on-policy agent
//! (PPO, IMPALA) holds them until it trains on them, with each action's
//! log-probability under the weights that chose it. A uint8 env's
//! observations are kept as bytes and cross to the device as bytes; a
//! stack of frames is kept one frame per step ([`StackedRows`]) and
//! rebuilt on the device ([`Rollout::obs_on_device`]).

use super::{kept_on_device, stacked_frames};
use rlfleet_replay::{ObsStore, ObsValue, StackedRows, Transition};
use rlfleet_shared::nets::NetShape;
use std::collections::HashMap;
use tch::{Device, Kind, Tensor};

/// How a rollout keeps its observations: as bytes or values, and as
/// stacks of `k` frames of `frame` values (`k` = 1: whole rows).
#[derive(Debug, Clone, Copy)]
pub(super) struct Kept {
    pub bytes: bool,
    pub frame: usize,
    pub k: usize,
}

impl Kept {
    /// For observations of `obs_dim` values (bytes when `bytes`) read by
    /// the network `shape`: one frame per step when it reads a stack of
    /// uint8 frames.
    pub fn of(bytes: bool, obs_dim: usize, shape: &NetShape) -> Kept {
        let (frame, k) = stacked_frames(shape).unwrap_or((obs_dim, 1));
        Kept { bytes, frame, k }
    }
}

#[derive(Debug)]
pub(super) struct Rollout {
    /// The episode the steps are of.
    pub episode: u64,
    /// Each step's observation.
    pub obs: StackedRows,
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
    /// The policy core's state the actor acted its first step from, when
    /// it said ([`super::Learn::acted_from`]).
    pub start: Option<Vec<f32>>,
}

impl Rollout {
    /// Empty; observations kept as `kept` says.
    pub fn new(kept: Kept) -> Rollout {
        let Kept { bytes, frame, k } = kept;
        Rollout {
            episode: 0,
            obs: StackedRows::new(bytes, frame, k),
            actions: Vec::new(),
            rewards: Vec::new(),
            last_next: ObsStore::empty(bytes),
            terminated: false,
            logp: Vec::new(),
            start: None,
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

    /// Every step's observation of `parts`, in order, as one float
    /// `[n, obs_dim]` tensor on `device`: the frames cross as they are
    /// kept, and one gather makes the stacks there.
    pub fn obs_on_device(parts: &[&Rollout], device: Device) -> Tensor {
        let Some(first) = parts.first() else {
            return Tensor::zeros([0, 0], (Kind::Float, device));
        };
        let (k, width) = (first.obs.k(), first.obs.row_len());
        let frame = width / k;
        let stores: Vec<&ObsStore> = parts.iter().map(|p| p.obs.frames()).collect();
        let frames = kept_on_device(&stores, frame, device);
        let mut index = Vec::with_capacity(parts.iter().map(|p| p.len() * k).sum());
        let mut offset = 0;
        for p in parts {
            for &s in p.obs.starts() {
                index.extend((0..k as i64).map(|j| offset + i64::from(s) + j));
            }
            offset += (p.obs.frames().len() / frame) as i64;
        }
        let index = Tensor::from_slice(&index).to_device(device);
        frames
            .index_select(0, &index)
            .view([-1, width as i64])
            .to_kind(Kind::Float)
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

/// Appends `t` to its episode's rollout in `open` (a new one, keeping
/// observations as `kept` says, for an episode not seen yet, starting from
/// the state in `acted_from` when it is this episode's).
pub(super) fn keep<T: ObsValue>(
    open: &mut HashMap<u64, Rollout>,
    kept: Kept,
    acted_from: &mut Option<(u64, Vec<f32>)>,
    t: &Transition<'_, T>,
) {
    let from = acted_from.take().filter(|(e, _)| *e == t.episode);
    open.entry(t.episode)
        .or_insert_with(|| Rollout {
            episode: t.episode,
            start: from.map(|(_, s)| s),
            ..Rollout::new(kept)
        })
        .push(t);
}

/// Every step's observation of `rollouts` (`[n, obs_dim]`) and each one's
/// observation after its last step (`[rollouts, obs_dim]`), as floats on
/// `device`.
pub(super) fn on_device(rollouts: &[Rollout], obs_dim: usize, device: Device) -> (Tensor, Tensor) {
    let parts: Vec<&Rollout> = rollouts.iter().collect();
    (
        Rollout::obs_on_device(&parts, device),
        lasts_on_device(&parts, obs_dim, device),
    )
}

/// Each of `parts`' observation after its last step, `[parts, obs_dim]`.
pub(super) fn lasts_on_device(parts: &[&Rollout], obs_dim: usize, device: Device) -> Tensor {
    let lasts: Vec<&ObsStore> = parts.iter().map(|p| &p.last_next).collect();
    super::rows_on_device(&lasts, obs_dim, device)
}

/// Every held step's behaviour log-probability, in the rollouts' order
/// (NaN where unknown).
pub(super) fn behaviour(rollouts: &[Rollout]) -> Vec<f32> {
    rollouts
        .iter()
        .flat_map(|r| r.logp.iter().copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps of a stack of 3 frames keep one frame each, and reach the
    /// device as the stacks they came as, in order, across rollouts.
    #[test]
    fn stacked_steps_keep_a_frame_each_and_reach_the_device_whole() {
        let kept = Kept {
            bytes: true,
            frame: 4,
            k: 3,
        };
        // Frame t of episode e: 4 bytes from its number.
        let frame = |e: u8, t: u8| [e * 50 + t; 4];
        let stack = |e: u8, t: u8| -> Vec<u8> {
            (0..3u8)
                .flat_map(|j| frame(e, (t + j).saturating_sub(2)))
                .collect()
        };
        let mut open = HashMap::new();
        let mut want = Vec::new();
        for (e, steps) in [(1u8, 5u8), (2, 3)] {
            for t in 0..steps {
                let (obs, next) = (stack(e, t), stack(e, t + 1));
                keep(
                    &mut open,
                    kept,
                    &mut None,
                    &Transition {
                        obs: &obs,
                        action: &[0.0],
                        reward: 0.0,
                        next_obs: &next,
                        terminated: false,
                        episode: u64::from(e),
                        step: u32::from(t),
                        logp: None,
                    },
                );
                want.extend(obs.iter().map(|&x| f32::from(x)));
            }
        }
        let (a, b) = (&open[&1], &open[&2]);
        // The first stack whole, then a frame per step.
        assert_eq!(a.obs.frames().len(), (3 + 4) * 4);
        assert_eq!(b.obs.frames().len(), (3 + 2) * 4);
        let on = Rollout::obs_on_device(&[a, b], Device::Cpu);
        assert_eq!(on.size(), [8, 12]);
        assert_eq!(Vec::<f32>::try_from(on.view([-1])).unwrap(), want);
    }
}
