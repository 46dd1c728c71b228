//! The run config's `[stop]`, `[eval]`, `[checkpoint]` and `[fleet]` tables.

use serde::{Deserialize, Serialize};

/// When a run ends: the first condition met. At least one must be set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopConfig {
    /// Stop once the mean return of an evaluation reaches this.
    pub target_eval_return: Option<f64>,
    /// Stop after this many environment steps in total.
    #[schema(minimum = 1)]
    pub max_env_steps: Option<u64>,
    /// Stop after this many *finished* episodes.
    #[schema(minimum = 1)]
    pub max_episodes: Option<u64>,
    /// Stop after this much wall time.
    #[schema(exclusive_minimum = 0.0)]
    pub max_wall_secs: Option<f64>,
}

/// Greedy (or `epsilon`-greedy) evaluation of the latest weights, off the
/// training path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EvalConfig {
    /// Publish weights to the evaluator every this many env steps.
    #[schema(minimum = 1)]
    pub period_steps: u64,
    /// Episodes per evaluation (their mean is the evaluation return): a
    /// screening figure, cheap enough to take often.
    #[schema(minimum = 1, maximum = 10000)]
    pub episodes: u32,
    /// When a screening evaluation reaches `stop.target_eval_return`, the
    /// same weights are evaluated again over this many episodes (other
    /// starts), and the run stops on its target only if that mean reaches
    /// it too — Gymnasium calls an env solved over 100 consecutive
    /// episodes. 0: stop on the screening evaluation alone.
    #[schema(maximum = 10000)]
    pub confirm_episodes: u32,
    /// Discrete actions only: the chance of a uniformly random action at
    /// each evaluation step (DQN-Nature evaluated Atari at 0.05, so that a
    /// greedy policy cannot stall a game, as Breakout's does without FIRE).
    /// 0: greedy.
    #[schema(minimum = 0.0, exclusive_maximum = 1.0)]
    pub epsilon: f64,
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig {
            period_steps: 2_000,
            episodes: 10,
            confirm_episodes: 100,
            epsilon: 0.0,
        }
    }
}

/// Checkpointing: weights, optimizer state, counters and the run's books
/// (and, with `replay`, the replay's contents).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointConfig {
    /// Write a checkpoint every this many env steps (0: only at the end).
    pub period_steps: u64,
    /// Checkpoints kept in the run's state directory (the oldest beyond
    /// this are deleted).
    #[schema(minimum = 1, maximum = 1000)]
    pub keep: u32,
    /// Store the replay's contents too (uniform or prioritized, with its
    /// priorities), so a resumed run trains at once instead of refilling.
    pub replay: bool,
    /// Seconds checkpoints may keep failing to be written (a full disk,
    /// an I/O error, a permission) before the run stops with the error.
    /// Until then a failed write is retried with back-off while training
    /// goes on, and the last good checkpoint stays the resume point.
    #[schema(exclusive_minimum = 0.0)]
    pub max_failed_secs: f64,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            period_steps: 0,
            keep: 3,
            replay: false,
            max_failed_secs: 3600.0,
        }
    }
}

/// The run's claim on a daemon's shared actor fleet: while several runs
/// are active, each gets actors (counted in envs) in proportion to its
/// `weight`, never fewer than `min_envs` (while there are actors to give)
/// nor more than `max_envs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FleetConfig {
    /// Relative share of the fleet's envs.
    #[schema(exclusive_minimum = 0.0)]
    pub weight: f64,
    /// Envs the run is given first, before shares by weight.
    pub min_envs: u32,
    /// Most envs the run takes (unset: no limit).
    #[schema(minimum = 1)]
    pub max_envs: Option<u32>,
    /// Device memory the run needs, in MB, for a daemon's `[runs]
    /// device_memory_mb` (unset: the daemon estimates it from the
    /// networks and batch sizes).
    #[schema(minimum = 1)]
    pub device_memory_mb: Option<u64>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            weight: 1.0,
            min_envs: 0,
            max_envs: None,
            device_memory_mb: None,
        }
    }
}
