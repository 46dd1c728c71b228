//! The run config's `[distributed]` table: parameters of the workflows in
//! which actors feed the learner over a transport (`async`, `sync`, `seed`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DistributedConfig {
    /// `async`: an actor sends a batch every this many steps of its
    /// environments, or as soon as one of its episodes ends.
    pub batch_step_frequency: u32,
    /// `sync`: steps every actor runs (on each of its envs) per round.
    pub steps_per_round: u32,
    /// `seed`: run inference once this many environments are waiting...
    pub inference_max_batch: u32,
    /// ...or once the oldest request has waited this long (µs; the front's
    /// timer has millisecond resolution), whichever comes first; and at once
    /// when every connected actor is waiting, so a lone actor is never kept
    /// waiting for a full batch.
    pub inference_max_wait_us: u64,
    /// Drop (and count) experience produced by weights more than this many
    /// versions old. Unset: no bound.
    pub max_policy_lag: Option<u64>,
    /// Most environments one actor may run (it asks for its capacity).
    pub max_envs_per_actor: u32,
}

impl Default for DistributedConfig {
    fn default() -> Self {
        DistributedConfig {
            batch_step_frequency: 16,
            steps_per_round: 16,
            inference_max_batch: 64,
            inference_max_wait_us: 500,
            max_policy_lag: None,
            max_envs_per_actor: 64,
        }
    }
}
