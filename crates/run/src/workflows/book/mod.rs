//! [`RunBook`]: the bookkeeping every workflow shares — output files,
//! counters, the evaluator and its results, stop rules, checkpoints and the
//! final summary — so a workflow is only its acting/training loop.
//!
//! This file opens a book (resuming from a checkpoint) and records
//! episodes and evaluations; `target.rs` is the target rule,
//! `telemetry.rs` what is reported as env steps pass (evaluator weights,
//! TensorBoard scalars, the progress bar), `snapshot.rs` the checkpoint
//! and `finish.rs` the end.

mod finish;
mod snapshot;
mod target;
mod telemetry;

pub use target::{Scored, TargetRule, Verdict};

use super::progress::Progress;
use super::{EvalResult, Evaluator, RunOptions, StopReason, check_limits};
use crate::state::{Books, CheckpointWriter, RunRecord, truncate_to};
use crate::vocab::ResumedFrom;
use anyhow::Context;
use rlfleet_checkpoint::{BestEval, Checkpoint, RunCounters};
use rlfleet_learning::agents::{self, Agent};
use rlfleet_output::{EpisodeRecord, EvalRecord, RunOutput};
use rlfleet_shared::config::RunConfig;
use std::collections::VecDeque;
use std::time::Instant;

/// Finished episodes averaged for the "recent return".
const RECENT: usize = 20;

/// Everything about a run that is not acting or training.
#[derive(Debug)]
pub struct RunBook {
    pub cfg: RunConfig,
    out: RunOutput,
    pub counters: RunCounters,
    best: Option<BestEval>,
    recent: VecDeque<f64>,
    /// When evaluations stop the run, and what they said last.
    target: TargetRule,
    evaluator: Option<Evaluator>,
    progress: Progress,
    session_start: Instant,
    start_steps: u64,
    start_wall: f64,
    last_progress_steps: u64,
    /// Set by distributed workflows before [`RunBook::finish`].
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
    /// The run's record in the state directory (checkpoints go there).
    record: Option<RunRecord>,
    writer: CheckpointWriter,
    /// Distributed runs take checkpoints in their driver loop, with their
    /// own books: `after_steps` only marks one due.
    pub defer_checkpoints: bool,
    checkpoint_due: bool,
    /// The distributed run's part of the books the run resumed with.
    pub restored_run: Option<serde_json::Value>,
    pub resumed_from: Option<ResumedFrom>,
}

impl RunBook {
    /// Opens the output directory and, when resuming, loads the checkpoint
    /// into `agent`. Starts the evaluator.
    pub fn open(cfg: &RunConfig, opts: &RunOptions, agent: &mut dyn Agent) -> anyhow::Result<Self> {
        let (mut counters, mut best) = (RunCounters::default(), None);
        let mut books = Books::default();
        let mut resumed_from = None;
        if let Some(path) = &opts.resume {
            let ck = Checkpoint::load(path)?;
            ck.check_matches(path, &cfg.env, &cfg.agent.to_string())?;
            agent.load_state(&ck.agent_state).with_context(|| {
                format!(
                    "checkpoint `{}` does not fit this run's agent",
                    path.display()
                )
            })?;
            if cfg.checkpoint.replay
                && let Some(img) = &ck.replay
            {
                agent
                    .restore_replay(img)
                    .with_context(|| format!("the replay in `{}` does not fit", path.display()))?;
                tracing::info!(
                    transitions = agent.replay_len(),
                    "replay restored from the checkpoint"
                );
            }
            if let Some(json) = &ck.books {
                books = serde_json::from_str(json).with_context(|| {
                    format!("the books in checkpoint `{}` are damaged", path.display())
                })?;
            }
            counters = ck.counters;
            best = ck.best;
            resumed_from = Some(ResumedFrom {
                checkpoint: path.display().to_string(),
                env_steps: counters.env_steps,
                wall_secs: counters.wall_secs,
                batches_lost: 0,
            });
            tracing::info!(
                env_steps = counters.env_steps,
                episodes = counters.episodes,
                train_steps = agent.train_steps(),
                "resumed from {}",
                path.display()
            );
        }
        // The files say what the checkpoint says: rows written after it
        // go (the episodes they record are played again).
        for (name, &len) in &books.book.files {
            truncate_to(&cfg.output_dir.join(name), len)
                .with_context(|| format!("cannot cut `{name}` back to the checkpoint"))?;
        }
        let out = RunOutput::create(cfg, opts.resume.is_some()).with_context(|| {
            format!(
                "cannot write the output directory `{}`",
                cfg.output_dir.display()
            )
        })?;
        let spec = cfg.env_source().spec()?;
        let evaluator = Evaluator::spawn(
            cfg.env_source().make()?,
            agents::build_policy(cfg, &spec),
            cfg.eval.episodes,
            cfg.seed,
        );
        let counters_steps = counters.env_steps;
        let b = books.book;
        let mut recent = VecDeque::with_capacity(RECENT);
        recent.extend(b.recent.iter().rev().take(RECENT).rev());
        Ok(RunBook {
            cfg: cfg.clone(),
            out,
            progress: Progress::new(opts.progress, cfg.stop.max_env_steps, counters.env_steps),
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
            counters,
            best,
            recent,
            evaluator: Some(evaluator),
            session_start: Instant::now(),
            last_scalars: (Instant::now(), counters_steps, agent.train_steps()),
            lag: (0, 0),
            session_lag: (0, 0),
            record: opts.record.clone(),
            writer: CheckpointWriter::spawn(),
            defer_checkpoints: false,
            checkpoint_due: false,
            restored_run: books.run,
            resumed_from,
        })
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

    /// Env steps per second in this session.
    pub fn rate(&self) -> f64 {
        let secs = self.session_start.elapsed().as_secs_f64().max(1e-9);
        (self.counters.env_steps - self.start_steps) as f64 / secs
    }

    fn record_eval(&mut self, r: &EvalResult) -> anyhow::Result<()> {
        self.out.eval(&EvalRecord {
            env_steps: r.env_steps,
            policy_version: r.weights.version,
            mean_return: r.mean(),
            min_return: r.min(),
            max_return: r.max(),
            wall_secs: self.counters.wall_secs,
            episodes: r.returns.len() as u32,
            confirming: r.confirming,
        })?;
        if self.best.as_ref().is_none_or(|b| r.mean() > b.mean_return) {
            self.best = Some(BestEval {
                mean_return: r.mean(),
                env_steps: r.env_steps,
                weights: r.weights.clone(),
            });
        }
        Ok(())
    }

    /// Updates the wall clock, records finished evaluations, and says
    /// whether a stop rule (limits or the evaluation target) has fired.
    pub fn poll(&mut self) -> anyhow::Result<Option<StopReason>> {
        self.counters.wall_secs = self.start_wall + self.session_start.elapsed().as_secs_f64();
        if let Some(r) = check_limits(&self.cfg.stop, &self.counters) {
            return Ok(Some(r));
        }
        let mut reached = None;
        while let Some(r) = self.evaluator.as_ref().and_then(Evaluator::try_result) {
            self.record_eval(&r)?;
            // Once the target is confirmed the run stops: a later result is
            // recorded, not judged (a screening pass would ask for another
            // confirmation, which `finish` would then wait for and record
            // after the one that stopped the run).
            if reached.is_some() {
                continue;
            }
            let scored = Scored {
                mean: r.mean(),
                episodes: r.returns.len() as u32,
                env_steps: r.env_steps,
                confirming: r.confirming,
            };
            match self.target.judge(scored) {
                Verdict::Continue => {}
                Verdict::Confirm(episodes) => {
                    if let Some(e) = &self.evaluator {
                        e.confirm(r.weights.clone(), r.env_steps, episodes);
                    }
                }
                Verdict::Stop(reason) => reached = Some(reason),
            }
        }
        Ok(reached)
    }

    /// Records a finished episode (counts it, writes the CSV row).
    pub fn episode(
        &mut self,
        episode: u64,
        actor: u32,
        ret: f64,
        length: u32,
        policy_version: u64,
    ) -> anyhow::Result<()> {
        self.out.episode(&EpisodeRecord {
            episode,
            actor,
            ret,
            length,
            wall_secs: self.counters.wall_secs,
            policy_version,
            env_steps: self.counters.env_steps,
        })?;
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(ret);
        self.counters.episodes += 1;
        Ok(())
    }

    pub fn record(&self) -> Option<&RunRecord> {
        self.record.as_ref()
    }

    /// Flushes the episode CSV (after a batch of episodes).
    pub fn flush(&mut self) -> anyhow::Result<()> {
        self.out.flush()?;
        Ok(())
    }
}
