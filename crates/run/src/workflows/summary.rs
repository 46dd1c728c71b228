//! [`RunSummary`]: how a run ended, printed as its last line and written as
//! `summary.toml`.

use super::StopReason;
use rlfleet_checkpoint::RunCounters;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// What the learner of a distributed run did with its time and batches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LearnerFigures {
    /// Seconds the learner's thread was busy: ingesting experience, taking
    /// gradient steps, answering actors, taking checkpoints.
    pub train_secs: f64,
    /// Seconds the learner loop spent waiting with nothing to do.
    pub wait_secs: f64,
    pub batches_received: u64,
    pub batches_trained: u64,
    pub batches_dropped: BTreeMap<String, u64>,
    /// Env steps of episodes abandoned by actors that left.
    pub env_steps_abandoned: u64,
    /// Env steps of episodes still in play when the run ended (cut off by
    /// its stop): `env_steps` = finished lengths + abandoned + these.
    pub env_steps_cut_off: u64,
    /// Batches received after a checkpoint by a learner process that then
    /// died (over every restart of the run).
    pub batches_lost: u64,
    /// Mean policy versions between the weights that acted and the
    /// learner's when each batch was trained on (this session).
    pub policy_lag_mean: Option<f64>,
    /// What the `seed` inference front did (`seed` and `seed-a2c` only).
    pub front: Option<FrontFigures>,
}

/// What a `seed` run's inference front did with its time: the forward
/// passes it made, how long requests waited for their answers, and how
/// long it held a ready batch because training was behind.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FrontFigures {
    /// Forward passes (batches answered).
    pub batches: u64,
    /// Envs acted for, over every batch.
    pub rows: u64,
    /// Requests answered with actions, and their waits summed (arrival to
    /// answer).
    pub answered: u64,
    pub latency_secs: f64,
    /// Seconds a ready batch was held because the run had not yet trained
    /// on the batches before it (`[distributed] max_batches_ahead`).
    pub stall_secs: f64,
}

impl FrontFigures {
    /// Envs per forward pass (none: `None`).
    pub fn batch_mean(&self) -> Option<f64> {
        (self.batches > 0).then(|| self.rows as f64 / self.batches as f64)
    }

    /// Mean wait of an answered request, in milliseconds.
    pub fn latency_mean_ms(&self) -> Option<f64> {
        (self.answered > 0).then(|| 1e3 * self.latency_secs / self.answered as f64)
    }
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub reason: StopReason,
    pub counters: RunCounters,
    pub train_steps: u64,
    /// Best evaluation mean and the env steps it was published at.
    pub best_eval: Option<(f64, u64)>,
    /// Evaluation mean of the final weights.
    pub final_eval: Option<f64>,
    /// Env steps per second in this session.
    pub env_steps_per_sec: f64,
    /// Exceptions the environments raised (Python envs), each ending its
    /// episode, which was played again.
    pub env_errors: u64,
    /// The latest confirming evaluation: the screening mean that asked for
    /// it, and its own (`eval.confirm_episodes`).
    pub confirm: Option<(f64, f64)>,
    pub output_dir: PathBuf,
    /// Distributed runs only.
    pub learner: Option<LearnerFigures>,
}

impl RunSummary {
    pub fn target_reached(&self) -> bool {
        matches!(self.reason, StopReason::TargetReached { .. })
    }

    /// The summary as TOML (`summary.toml`): floats stay floats, a value
    /// a run does not have is `nan`.
    pub fn to_toml(&self) -> String {
        let nan = |v: Option<f64>| v.unwrap_or(f64::NAN);
        let file = SummaryFile {
            reason: self.reason.to_string(),
            target_reached: self.target_reached(),
            env_steps: self.counters.env_steps,
            episodes: self.counters.episodes,
            train_steps: self.train_steps,
            wall_secs: self.counters.wall_secs,
            env_steps_per_sec: self.env_steps_per_sec,
            best_eval_return: nan(self.best_eval.map(|b| b.0)),
            best_eval_env_steps: self.best_eval.map_or(0, |b| b.1),
            final_eval_return: nan(self.final_eval),
            screen_eval_return: nan(self.confirm.map(|c| c.0)),
            confirm_eval_return: nan(self.confirm.map(|c| c.1)),
            env_errors: self.env_errors,
            learner: self.learner.as_ref().map(|l| LearnerTable {
                train_secs: l.train_secs,
                wait_secs: l.wait_secs,
                batches_received: l.batches_received,
                batches_trained: l.batches_trained,
                batches_lost: l.batches_lost,
                env_steps_abandoned: l.env_steps_abandoned,
                env_steps_cut_off: l.env_steps_cut_off,
                policy_lag_mean: nan(l.policy_lag_mean),
                inference_batches: l.front.map_or(0, |f| f.batches),
                inference_batch_mean: nan(l.front.and_then(|f| f.batch_mean())),
                inference_rows: l.front.map_or(0, |f| f.rows),
                inference_latency_mean_ms: nan(l.front.and_then(|f| f.latency_mean_ms())),
                front_stall_secs: nan(l.front.map(|f| f.stall_secs)),
                batches_dropped: l.batches_dropped.clone(),
            }),
        };
        toml::to_string(&file).expect("the summary serialises")
    }
}

/// `summary.toml`'s keys, in the file's order (an interface).
#[derive(Debug, Serialize)]
struct SummaryFile {
    reason: String,
    target_reached: bool,
    env_steps: u64,
    episodes: u64,
    train_steps: u64,
    wall_secs: f64,
    env_steps_per_sec: f64,
    best_eval_return: f64,
    best_eval_env_steps: u64,
    final_eval_return: f64,
    screen_eval_return: f64,
    confirm_eval_return: f64,
    env_errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    learner: Option<LearnerTable>,
}

/// `[learner]`: distributed runs only.
#[derive(Debug, Serialize)]
struct LearnerTable {
    train_secs: f64,
    wait_secs: f64,
    batches_received: u64,
    batches_trained: u64,
    batches_lost: u64,
    env_steps_abandoned: u64,
    env_steps_cut_off: u64,
    policy_lag_mean: f64,
    /// The `seed` front's forward passes, envs per pass, envs acted for,
    /// mean request wait and seconds held behind training (0 or `nan`
    /// outside `seed` runs).
    inference_batches: u64,
    inference_batch_mean: f64,
    inference_rows: u64,
    inference_latency_mean_ms: f64,
    front_stall_secs: f64,
    batches_dropped: BTreeMap<String, u64>,
}

impl fmt::Display for RunSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} env steps, {} episodes, {} train steps in {:.1} s ({:.0} env steps/s)",
            self.reason,
            self.counters.env_steps,
            self.counters.episodes,
            self.train_steps,
            self.counters.wall_secs,
            self.env_steps_per_sec
        )?;
        if let Some((best, at)) = self.best_eval {
            write!(f, "; best eval {best:.1} at {at} steps")?;
        }
        if let Some(last) = self.final_eval {
            write!(f, "; final eval {last:.1}")?;
        }
        write!(f, "; output in {}", self.output_dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Floats stay floats (a whole number of seconds is `12.0`, not the
    /// integer `12`), absent values are `nan`, and the learner's table
    /// comes last with its drops.
    #[test]
    fn the_summary_keeps_its_keys_and_types() {
        let s = RunSummary {
            reason: StopReason::Cancelled,
            counters: RunCounters {
                env_steps: 1 << 60,
                episodes: 3,
                wall_secs: 12.0,
            },
            train_steps: 5,
            best_eval: None,
            final_eval: Some(500.0),
            env_steps_per_sec: 100.0,
            env_errors: 0,
            confirm: None,
            output_dir: PathBuf::from("runs/x"),
            learner: Some(LearnerFigures {
                batches_dropped: [("stale".to_string(), 2)].into(),
                policy_lag_mean: Some(1.5),
                front: Some(FrontFigures {
                    batches: 4,
                    rows: 10,
                    answered: 5,
                    latency_secs: 0.01,
                    stall_secs: 0.5,
                }),
                ..LearnerFigures::default()
            }),
        };
        let text = s.to_toml();
        let v: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(v["wall_secs"].as_float(), Some(12.0), "{text}");
        assert_eq!(v["final_eval_return"].as_float(), Some(500.0));
        assert!(v["best_eval_return"].as_float().unwrap().is_nan());
        assert_eq!(v["env_steps"].as_integer(), Some(1 << 60));
        assert_eq!(
            v["learner"]["batches_dropped"]["stale"].as_integer(),
            Some(2)
        );
        assert_eq!(v["learner"]["train_secs"].as_float(), Some(0.0));
        assert_eq!(v["learner"]["policy_lag_mean"].as_float(), Some(1.5));
        let l = &v["learner"];
        assert_eq!(l["inference_batches"].as_integer(), Some(4));
        assert_eq!(l["inference_rows"].as_integer(), Some(10));
        assert_eq!(l["inference_batch_mean"].as_float(), Some(2.5));
        assert_eq!(l["inference_latency_mean_ms"].as_float(), Some(2.0));
        assert_eq!(l["front_stall_secs"].as_float(), Some(0.5));
        let keys: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once(" = ").map(|(k, _)| k))
            .take(3)
            .collect();
        assert_eq!(keys, ["reason", "target_reached", "env_steps"]);
    }
}
