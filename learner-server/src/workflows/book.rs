//! [`RunBook`]: the bookkeeping every workflow shares — output files,
//! counters, the evaluator and its results, stop rules, checkpoints and the
//! final summary — so a workflow is only its acting/training loop.

use super::progress::{Confirm, Progress};
use super::{EvalResult, Evaluator, RunOptions, RunSummary, StopReason, check_limits};
use crate::agents::{self, Agent};
use crate::checkpoint::{BestEval, Checkpoint, RunCounters};
use crate::output::{self, EpisodeRecord, EvalRecord, RunOutput};
use crate::state::{CheckpointWriter, Destination, RunRecord};
use anyhow::Context;
use rlfleet_shared::config::RunConfig;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::time::{Duration, Instant};

/// Finished episodes averaged for the "recent return".
const RECENT: usize = 20;
/// Training scalars go to TensorBoard each time the run's env steps cross
/// a multiple of this.
const SCALARS_EVERY_STEPS: u64 = 1000;

/// What a checkpoint keeps beside the agent (its `books`, as JSON): the
/// book's own state and the distributed run's (`remote::CoreBooks`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Books {
    pub book: BookState,
    #[serde(default)]
    pub run: Option<serde_json::Value>,
}

/// The [`RunBook`]'s part of a checkpoint's books.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BookState {
    /// Bytes of each output file at the checkpoint: a resumed run cuts
    /// them back to these, so its files hold what its state holds.
    pub files: BTreeMap<String, u64>,
    pub recent: Vec<f64>,
    pub last_eval: Option<f64>,
    pub last_confirm: Option<(f64, f64)>,
    pub env_errors: u64,
}

/// Where a resumed run came from (`resumed_from` in the API's status).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ResumedFrom {
    pub checkpoint: String,
    pub env_steps: u64,
    /// The run's wall seconds at the checkpoint.
    pub wall_secs: f64,
    /// Batches received after that checkpoint and lost with the process
    /// that died (0 after a clean stop).
    pub batches_lost: u64,
}

/// Cuts `path` back to `len` bytes if it is longer (a missing file is
/// left alone).
pub(crate) fn truncate_to(path: &Path, len: u64) -> std::io::Result<()> {
    match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(f) if f.metadata()?.len() > len => {
            f.set_len(len)?;
            f.sync_all()
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Everything about a run that is not acting or training.
#[derive(Debug)]
pub struct RunBook {
    pub cfg: RunConfig,
    out: RunOutput,
    pub counters: RunCounters,
    best: Option<BestEval>,
    recent: VecDeque<f64>,
    pub last_eval: Option<f64>,
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
    /// A confirming evaluation is under way, for a screening one that
    /// scored this.
    confirming: Option<f64>,
    /// The latest confirming evaluation: the screening mean that asked for
    /// it, and its own.
    pub last_confirm: Option<(f64, f64)>,
    /// When training scalars were last written: time, env steps, gradient
    /// steps.
    last_scalars: (Instant, u64, u64),
    /// Policy lag of the batches trained on since then: sum and count.
    lag: (u64, u64),
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
            confirming: None,
            last_confirm: b.last_confirm,
            counters,
            last_eval: b.last_eval.or(best.as_ref().map(|b| b.mean_return)),
            best,
            recent,
            evaluator: Some(evaluator),
            session_start: Instant::now(),
            last_scalars: (Instant::now(), counters_steps, agent.train_steps()),
            lag: (0, 0),
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
            if reached.is_none() {
                reached = self.judge(&r);
            }
        }
        Ok(reached)
    }

    /// The stop rule on one evaluation: a screening evaluation that reaches
    /// the target asks for a confirming one on the same weights (unless
    /// `eval.confirm_episodes` is 0, when it stops the run itself); the
    /// run stops when a confirming evaluation reaches it too.
    fn judge(&mut self, r: &EvalResult) -> Option<StopReason> {
        let target = self.cfg.stop.target_eval_return;
        let passed = target.is_some_and(|t| r.mean() >= t);
        let confirm_episodes = self.cfg.eval.confirm_episodes;
        if r.confirming {
            let screen = self.confirming.take().unwrap_or(f64::NAN);
            self.last_confirm = Some((screen, r.mean()));
            if !passed {
                tracing::info!(
                    env_steps = r.env_steps,
                    "not confirmed: {} episodes averaged {:.1}, below the target",
                    r.returns.len(),
                    r.mean()
                );
                return None;
            }
        } else {
            self.last_eval = Some(r.mean());
            if !passed {
                return None;
            }
            if confirm_episodes > 0 {
                if self.confirming.is_none() {
                    tracing::info!(
                        env_steps = r.env_steps,
                        "screening evaluation {:.1} reached the target: confirming over {confirm_episodes} episodes",
                        r.mean()
                    );
                    self.confirming = Some(r.mean());
                    if let Some(e) = &self.evaluator {
                        e.confirm(r.weights.clone(), r.env_steps, confirm_episodes);
                    }
                }
                return None;
            }
        }
        Some(StopReason::TargetReached {
            mean_return: r.mean(),
            env_steps: r.env_steps,
            confirmed_over: if r.confirming {
                r.returns.len() as u32
            } else {
                0
            },
        })
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

    /// After the env step count went from `before` to the current count:
    /// publishes weights to the evaluator and checkpoints when a period
    /// boundary was crossed, and refreshes the progress bar.
    pub fn after_steps(&mut self, before: u64, agent: &dyn Agent) -> anyhow::Result<()> {
        let now = self.counters.env_steps;
        let crossed = |period: u64| period > 0 && now / period > before / period;
        if crossed(self.cfg.eval.period_steps)
            && let Some(e) = &self.evaluator
        {
            e.publish(agent.weights(), now);
        }
        if crossed(self.cfg.checkpoint.period_steps) {
            if self.defer_checkpoints {
                self.checkpoint_due = true;
            } else {
                self.checkpoint(agent, None, false)?;
            }
        }
        if crossed(SCALARS_EVERY_STEPS) {
            self.write_scalars(agent)?;
        }
        if now - self.last_progress_steps >= 500 {
            self.last_progress_steps = now;
            let confirm = match (self.confirming, self.last_confirm) {
                (Some(_), _) => Confirm::UnderWay,
                (None, Some((_, mean))) => Confirm::Latest(mean),
                (None, None) => Confirm::None,
            };
            self.progress.update(
                now,
                self.counters.episodes,
                self.rate(),
                self.recent_mean(),
                self.last_eval,
                confirm,
            );
        }
        Ok(())
    }

    /// A batch `lag` policy versions behind the learner was trained on.
    pub fn policy_lag(&mut self, lag: u64) {
        self.lag.0 += lag;
        self.lag.1 += 1;
    }

    /// The agent's training scalars, the rates since the last write, the
    /// replay size and the mean policy lag, to TensorBoard.
    fn write_scalars(&mut self, agent: &dyn Agent) -> anyhow::Result<()> {
        let now = self.counters.env_steps;
        let (then, steps, grads) = self.last_scalars;
        let secs = then.elapsed().as_secs_f64().max(1e-9);
        let train_steps = agent.train_steps();
        let mut s = agent.scalars(now);
        s.push(("perf/env_steps_per_sec", (now - steps) as f64 / secs));
        s.push((
            "perf/gradient_steps_per_sec",
            train_steps.saturating_sub(grads) as f64 / secs,
        ));
        s.push(("train/gradient_steps", train_steps as f64));
        s.push(("replay/size", agent.replay_len() as f64));
        if self.lag.1 > 0 {
            s.push(("train/policy_lag", self.lag.0 as f64 / self.lag.1 as f64));
        }
        self.out.scalars(now, &s)?;
        self.last_scalars = (Instant::now(), now, train_steps);
        self.lag = (0, 0);
        Ok(())
    }

    /// A checkpoint is due (a period boundary was crossed) and not yet
    /// taken.
    pub fn checkpoint_due(&self) -> bool {
        self.checkpoint_due
    }

    /// [`RunBook::checkpoint_due`]; taking the answer clears it.
    pub fn take_checkpoint_due(&mut self) -> bool {
        std::mem::take(&mut self.checkpoint_due)
    }

    /// Takes a checkpoint: flushes the files, copies the agent's state
    /// (and replay, with `checkpoint.replay`) and the books out — the
    /// snapshot, whose duration it returns — and has the writer thread
    /// write it (`wait`: writes it before returning, after any queued one).
    /// With a record, checkpoints go to the record's `checkpoints/`
    /// (rotated, `checkpoint.keep`) and the output directory's
    /// `checkpoint.safetensors` names the latest; without one, there.
    pub fn checkpoint(
        &mut self,
        agent: &dyn Agent,
        run_books: Option<(serde_json::Value, BTreeMap<String, u64>)>,
        wait: bool,
    ) -> anyhow::Result<Duration> {
        self.out.flush()?;
        let started = Instant::now();
        let mut files = BTreeMap::new();
        for name in ["episodes.csv", "evals.csv"] {
            files.insert(name.to_string(), file_len(&self.out.dir().join(name))?);
        }
        let run = run_books.map(|(run, extra_files)| {
            files.extend(extra_files);
            run
        });
        let books = Books {
            book: BookState {
                files,
                recent: self.recent.iter().copied().collect(),
                last_eval: self.last_eval,
                last_confirm: self.last_confirm,
                env_errors: self.env_errors,
            },
            run,
        };
        let ck = Checkpoint {
            env: self.cfg.env.clone(),
            agent: self.cfg.agent.to_string(),
            counters: self.counters,
            agent_state: agent.state(),
            best: self.best.clone(),
            books: Some(serde_json::to_string(&books).expect("plain data serialises")),
            replay: if self.cfg.checkpoint.replay {
                agent.replay_image()
            } else {
                None
            },
        };
        let snapshot = started.elapsed();
        let to = match &self.record {
            Some(r) => Destination {
                path: r.checkpoint_path(self.counters.env_steps),
                latest: Some(self.out.checkpoint_path()),
                keep: self.cfg.checkpoint.keep as usize,
            },
            None => Destination {
                path: self.out.checkpoint_path(),
                latest: None,
                keep: 0,
            },
        };
        if wait {
            self.writer.finish();
            crate::state::writer::write(&ck, &to)?;
            self.writer = CheckpointWriter::spawn();
        } else if !self.writer.submit(ck, to) {
            tracing::warn!(
                env_steps = self.counters.env_steps,
                "checkpoint skipped: the previous one is still being written"
            );
        }
        tracing::debug!(
            env_steps = self.counters.env_steps,
            snapshot_ms = snapshot.as_secs_f64() * 1e3,
            "checkpoint taken"
        );
        Ok(snapshot)
    }

    /// Scores the final weights (unless the target was just reached),
    /// checkpoints (with `run_books`, a distributed run's), writes
    /// `summary.toml` and the learning curve.
    pub fn finish(
        mut self,
        reason: StopReason,
        agent: &dyn Agent,
        run_books: Option<(serde_json::Value, BTreeMap<String, u64>)>,
    ) -> anyhow::Result<RunSummary> {
        self.progress.finish();
        let last = (!matches!(reason, StopReason::TargetReached { .. }))
            .then(|| (agent.weights(), self.counters.env_steps));
        let final_version = last.as_ref().map(|(w, _)| w.version);
        let mut final_eval = None;
        let evaluator = self.evaluator.take().expect("finish is called once");
        for r in evaluator.finish(last) {
            self.record_eval(&r)?;
            if Some(r.weights.version) == final_version {
                final_eval = Some(r.mean());
            }
        }
        if let StopReason::TargetReached { mean_return, .. } = reason {
            final_eval = Some(mean_return);
        }
        self.counters.wall_secs = self.start_wall + self.session_start.elapsed().as_secs_f64();
        self.checkpoint(agent, run_books, true)?;
        let summary = RunSummary {
            reason,
            counters: self.counters,
            train_steps: agent.train_steps(),
            best_eval: self.best.as_ref().map(|b| (b.mean_return, b.env_steps)),
            final_eval,
            env_steps_per_sec: self.rate(),
            env_errors: self.env_errors,
            confirm: self.last_confirm,
            output_dir: self.out.dir().to_path_buf(),
            learner: self.learner.take(),
        };
        let dir = self.out.dir().to_path_buf();
        std::fs::write(dir.join("summary.toml"), summary.to_toml())?;
        let episodes = output::read_episodes(&dir.join("episodes.csv"))?;
        let evals = output::read_evals(&dir.join("evals.csv"))?;
        let title = format!(
            "{} — {} {} on {}",
            self.cfg.name, self.cfg.workflow, self.cfg.agent, self.cfg.env
        );
        if let Err(e) = output::plot_learning_curve(
            &dir.join("learning_curve.png"),
            &title,
            &episodes,
            &evals,
            self.cfg.stop.target_eval_return,
        ) {
            tracing::warn!("cannot draw the learning curve: {e}");
        }
        Ok(summary)
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

/// The length of a file (0 when there is none).
pub(crate) fn file_len(path: &Path) -> std::io::Result<u64> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}
