//! [`RunBook`]: the bookkeeping every workflow shares — counters, recent
//! returns, evaluations and the target rule, stop rules, checkpoints and
//! the final summary — so a workflow is only its acting/training loop.
//!
//! Sans-IO: the book reads no clock (`now` is passed in) and touches no
//! file; what it wants done it queues as [`Effect`]s (`effect.rs`), which
//! the driver's `Desk` (`workflows/desk`) performs in order.
//! This file holds the state, episodes and evaluation results;
//! `target.rs` is the target rule, `telemetry.rs` what is reported as env
//! steps pass, `snapshot.rs` the checkpoint and `finish.rs` the end.

mod effect;
mod finish;
mod snapshot;
mod target;
mod telemetry;
mod values;

pub use effect::{CheckpointJob, Effect, RunBooks};
pub use target::{Scored, TargetRule, Verdict};
pub use values::ValueWatch;

use super::{EvalResult, StopReason, check_limits};
use crate::state::BookState;
use crate::vocab::ResumedFrom;
use rlfleet_checkpoint::{BestEval, RunCounters};
use rlfleet_output::{EpisodeRecord, EvalRecord};
use rlfleet_shared::config::RunConfig;
use std::collections::VecDeque;
use std::time::Instant;

/// Finished episodes averaged for the "recent return".
const RECENT: usize = 20;

/// What a book starts from: nothing, or a checkpoint's counters, best
/// evaluation and books (read by the desk).
#[derive(Debug, Default)]
pub struct Opening {
    pub counters: RunCounters,
    pub best: Option<BestEval>,
    pub book: BookState,
    /// The distributed run's part of the books.
    pub run: Option<serde_json::Value>,
    pub resumed_from: Option<ResumedFrom>,
    /// The agent's gradient steps at the start.
    pub train_steps: u64,
}

/// Everything about a run that is not acting or training.
#[derive(Debug)]
pub struct RunBook {
    pub cfg: RunConfig,
    pub counters: RunCounters,
    best: Option<BestEval>,
    recent: VecDeque<f64>,
    /// When evaluations stop the run, and what they said last.
    target: TargetRule,
    /// A confirmed target, waiting for the next [`RunBook::poll`].
    reached: Option<StopReason>,
    session_start: Instant,
    start_steps: u64,
    start_wall: f64,
    last_progress_steps: u64,
    /// Set by distributed workflows before the run finishes.
    pub learner: Option<super::LearnerFigures>,
    /// Exceptions the environments raised in this session.
    pub env_errors: u64,
    /// When training scalars were last written: time, env steps, gradient
    /// steps.
    last_scalars: (Instant, u64, u64),
    /// Policy lag of the batches trained on since then: sum and count.
    lag: (u64, u64),
    /// The same over the whole session (the summary's mean policy lag).
    pub(crate) session_lag: (u64, u64),
    /// Distributed runs take checkpoints in their driver loop, with their
    /// own books: `after_steps` only marks one due.
    pub defer_checkpoints: bool,
    checkpoint_due: bool,
    /// The distributed run's part of the books the run resumed with.
    pub restored_run: Option<serde_json::Value>,
    pub resumed_from: Option<ResumedFrom>,
    /// What the desk is to do, oldest first.
    effects: VecDeque<Effect>,
    /// The values' watch: [`ValueWatch`].
    pub values: ValueWatch,
}

impl RunBook {
    /// A book for `cfg`, from `opening`, its session starting at `now`.
    pub fn new(cfg: &RunConfig, opening: Opening, now: Instant) -> RunBook {
        let Opening {
            counters,
            best,
            book: b,
            run,
            resumed_from,
            train_steps,
        } = opening;
        let mut recent = VecDeque::with_capacity(RECENT);
        recent.extend(b.recent.iter().rev().take(RECENT).rev());
        RunBook {
            cfg: cfg.clone(),
            start_steps: counters.env_steps,
            start_wall: counters.wall_secs,
            last_progress_steps: counters.env_steps,
            learner: None,
            env_errors: b.env_errors,
            target: TargetRule::new(cfg.stop.target_eval_return, cfg.eval.confirm_episodes)
                .resumed(
                    b.last_eval.or(best.as_ref().map(|b| b.mean_return)),
                    b.last_confirm,
                ),
            reached: None,
            counters,
            best,
            recent,
            session_start: now,
            last_scalars: (now, counters.env_steps, train_steps),
            lag: (0, 0),
            session_lag: (0, 0),
            defer_checkpoints: false,
            checkpoint_due: false,
            restored_run: run,
            resumed_from,
            effects: VecDeque::new(),
            values: ValueWatch::default(),
        }
    }

    /// When the session began.
    pub fn started(&self) -> Instant {
        self.session_start
    }

    /// The next thing to do outside the book, oldest first.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    fn push(&mut self, effect: Effect) {
        self.effects.push_back(effect);
    }

    /// Mean return of the last finished episodes.
    pub fn recent_mean(&self) -> Option<f64> {
        (!self.recent.is_empty())
            .then(|| self.recent.iter().sum::<f64>() / self.recent.len() as f64)
    }

    /// The latest screening evaluation's mean (or, resumed before any,
    /// the best one's).
    pub fn last_eval(&self) -> Option<f64> {
        self.target.last_eval
    }

    pub fn best_eval(&self) -> Option<f64> {
        self.best.as_ref().map(|b| b.mean_return)
    }

    /// Env steps per second in this session, at `now`.
    pub fn rate(&self, now: Instant) -> f64 {
        let secs = now
            .saturating_duration_since(self.session_start)
            .as_secs_f64()
            .max(1e-9);
        (self.counters.env_steps - self.start_steps) as f64 / secs
    }

    /// Moves the run's wall clock to `now`.
    fn tick(&mut self, now: Instant) {
        self.counters.wall_secs = self.start_wall
            + now
                .saturating_duration_since(self.session_start)
                .as_secs_f64();
    }

    /// Queues the row of an evaluation and keeps the best one.
    fn record_eval(&mut self, r: &EvalResult) {
        self.push(Effect::Eval(EvalRecord {
            env_steps: r.env_steps,
            policy_version: r.weights.version,
            mean_return: r.mean(),
            min_return: r.min(),
            max_return: r.max(),
            wall_secs: self.counters.wall_secs,
            episodes: r.returns.len() as u32,
            confirming: r.confirming,
        }));
        if self.best.as_ref().is_none_or(|b| r.mean() > b.mean_return) {
            self.best = Some(BestEval {
                mean_return: r.mean(),
                env_steps: r.env_steps,
                weights: r.weights.clone(),
            });
        }
    }

    /// An evaluation's result: recorded, and judged by the target rule
    /// (which may ask for a confirmation, or stop the run at the next
    /// [`RunBook::poll`]).
    pub fn evaluated(&mut self, r: &EvalResult) {
        self.record_eval(r);
        // Once the target is confirmed the run stops: a later result is
        // recorded, not judged (a screening pass would ask for another
        // confirmation, which the end would then wait for and record
        // after the one that stopped the run).
        if self.reached.is_some() {
            return;
        }
        let scored = Scored {
            mean: r.mean(),
            episodes: r.returns.len() as u32,
            env_steps: r.env_steps,
            confirming: r.confirming,
        };
        match self.target.judge(scored) {
            Verdict::Continue => {}
            Verdict::Confirm(episodes) => self.push(Effect::Confirm {
                weights: r.weights.clone(),
                env_steps: r.env_steps,
                episodes,
            }),
            Verdict::Stop(reason) => self.reached = Some(reason),
        }
    }

    /// Moves the wall clock to `now` and says whether a stop rule (limits
    /// or the evaluation target) has fired.
    pub fn poll(&mut self, now: Instant) -> Option<StopReason> {
        self.tick(now);
        check_limits(&self.cfg.stop, &self.counters).or(self.reached)
    }

    /// Records a finished episode (counts it, queues the CSV row).
    pub fn episode(
        &mut self,
        episode: u64,
        actor: u32,
        ret: f64,
        length: u32,
        policy_version: u64,
    ) {
        self.push(Effect::Episode(EpisodeRecord {
            episode,
            actor,
            ret,
            length,
            wall_secs: self.counters.wall_secs,
            policy_version,
            env_steps: self.counters.env_steps,
        }));
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(ret);
        self.counters.episodes += 1;
    }

    /// The episode rows so far to disk (after a batch of episodes).
    pub fn flush(&mut self) {
        self.push(Effect::Flush);
    }
}

#[cfg(test)]
mod tests;
