//! [`RunSummary`]: how a run ended, printed as its last line and written as
//! `summary.toml`.

use super::StopReason;
use crate::checkpoint::RunCounters;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// What the learner of a distributed run did with its time and batches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LearnerFigures {
    /// Seconds spent ingesting experience and taking gradient steps.
    pub train_secs: f64,
    /// Seconds the learner loop spent waiting with nothing to do.
    pub wait_secs: f64,
    pub batches_received: u64,
    pub batches_trained: u64,
    pub batches_dropped: BTreeMap<String, u64>,
    /// Env steps of episodes abandoned by actors that left.
    pub env_steps_abandoned: u64,
    /// Batches received after a checkpoint by a learner process that then
    /// died (over every restart of the run).
    pub batches_lost: u64,
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

    /// The summary as TOML.
    pub fn to_toml(&self) -> String {
        // TOML floats, always with a point (500.0, not the integer 500).
        let opt = |v: Option<f64>| match v {
            Some(v) if !v.is_nan() => format!("{v:?}"),
            _ => "nan".to_string(),
        };
        let mut out = format!(
            "reason = {:?}\ntarget_reached = {}\nenv_steps = {}\nepisodes = {}\ntrain_steps = {}\n\
             wall_secs = {}\nenv_steps_per_sec = {}\nbest_eval_return = {}\nbest_eval_env_steps = {}\n\
             final_eval_return = {}\nscreen_eval_return = {}\nconfirm_eval_return = {}\nenv_errors = {}\n",
            self.reason.to_string(),
            self.target_reached(),
            self.counters.env_steps,
            self.counters.episodes,
            self.train_steps,
            self.counters.wall_secs,
            self.env_steps_per_sec,
            opt(self.best_eval.map(|b| b.0)),
            self.best_eval.map_or(0, |b| b.1),
            opt(self.final_eval),
            opt(self.confirm.map(|c| c.0)),
            opt(self.confirm.map(|c| c.1)),
            self.env_errors,
        );
        if let Some(l) = &self.learner {
            out.push_str(&format!(
                "\n[learner]\ntrain_secs = {}\nwait_secs = {}\nbatches_received = {}\n\
                 batches_trained = {}\nbatches_lost = {}\nenv_steps_abandoned = {}\n\n[learner.batches_dropped]\n",
                l.train_secs,
                l.wait_secs,
                l.batches_received,
                l.batches_trained,
                l.batches_lost,
                l.env_steps_abandoned
            ));
            for (reason, n) in &l.batches_dropped {
                out.push_str(&format!("{reason} = {n}\n"));
            }
        }
        out
    }
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
