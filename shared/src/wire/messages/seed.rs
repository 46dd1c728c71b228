//! SEED's conversation: an actor's [`Observations`], the learner's
//! [`Actions`].

use super::experience::EnvFaultReport;
use super::handshake::EpisodeStart;
use rkyv::{Archive, Deserialize, Serialize};

/// SEED request: one observation per environment, with the outcome of the
/// previous action.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Observations {
    pub seq: u64,
    /// `n_envs * obs_dim` values; for a finished env, its final observation.
    pub obs: Vec<f32>,
    /// The same as bytes instead, in a run whose observations are uint8
    /// (`Welcome.obs_u8`; `obs` is empty then).
    pub obs_u8: Vec<u8>,
    /// Reward of the previous action, per env.
    pub rewards: Vec<f32>,
    /// [`super::flags`] per env.
    pub flags: Vec<u8>,
    /// Episodes abandoned because their env raised (the env is idle now).
    pub faults: Vec<EnvFaultReport>,
}

/// SEED reply: one action per environment, and new episodes for the envs
/// whose episode ended.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Actions {
    pub seq: u64,
    pub policy_version: u64,
    /// `n_envs * action_dim` values (ignored for finished or idle envs).
    pub actions: Vec<f32>,
    pub starts: Vec<EpisodeStart>,
}
