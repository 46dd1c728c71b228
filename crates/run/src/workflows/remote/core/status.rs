//! What a run shows while it runs and when it ends: the status snapshot
//! the API reads, the learner-loop metrics, and the final summary.

use super::{Core, LearnerTime};
use crate::vocab::RunState;
use crate::workflows::book::RunBooks;
use crate::workflows::{LearnerFigures, RunSummary};

impl Core {
    /// Refreshes the status snapshot and the metrics that are not counted
    /// as they happen (`published`: what of the loop's time the metrics
    /// already have).
    pub fn publish_status(
        &mut self,
        state: RunState,
        reason: Option<String>,
        published: &mut LearnerTime,
    ) {
        let (t, p) = (self.time, *published);
        for (activity, now, before) in [
            ("train", t.train, p.train),
            ("wait", t.wait, p.wait),
            ("device", t.device, p.device),
            ("device_wait", t.device_wait, p.device_wait),
        ] {
            self.metrics
                .loop_seconds
                .with_label_values(&[activity])
                .inc_by((now - before).as_secs_f64());
        }
        *published = t;
        self.metrics.replay_size.set(self.agent.replay_len() as i64);
        self.metrics
            .replay_bytes
            .set(self.agent.replay_bytes() as i64);
        self.metrics
            .open_episodes
            .set(self.agent.open_episodes() as i64);
        if let Some(l) = self.agent.last_loss() {
            self.metrics.loss.set(l);
        }
        let values = &self.book.values;
        if let Some(q) = values.q_max {
            self.metrics.q_value_max.set(q);
        }
        let new = values
            .divergences
            .saturating_sub(self.metrics.value_divergences.get());
        self.metrics.value_divergences.inc_by(new);
        if let Some(e) = self.book.last_eval() {
            self.metrics.last_eval_return.set(e);
        }
        if let Some(e) = self.book.best_eval() {
            self.metrics.best_eval_return.set(e);
        }
        let (issued, reissued) = {
            let l = self.ledger();
            (l.issued, l.reissued)
        };
        let mut s = self.shared.status.lock().expect("status lock");
        s.state = state;
        if reason.is_some() {
            s.reason = reason;
        }
        let c = &self.book.counters;
        s.env_steps = c.env_steps;
        s.episodes_finished = c.episodes;
        s.wall_secs = c.wall_secs;
        s.device_secs = t.device.as_secs_f64();
        s.device_wait_secs = t.device_wait.as_secs_f64();
        s.episodes_issued = issued;
        s.episodes_reissued = reissued;
        s.env_steps_abandoned = self.abandoned;
        s.env_steps_in_play = self.steps_in_play();
        self.metrics
            .env_steps_in_play
            .set(s.env_steps_in_play as i64);
        s.batches_lost = self.batches_lost;
        s.env_errors = self.book.env_errors;
        s.recent_return = self.book.recent_mean();
        s.last_eval_return = self.book.last_eval();
        s.best_eval_return = self.book.best_eval();
        s.policy_version = self.agent.train_steps();
        s.train_steps = self.agent.train_steps();
        s.replay_size = self.agent.replay_len() as u64;
        s.replay_bytes = self.agent.replay_bytes() as u64;
        let t = self.accounts.tally.lock().expect("tally lock");
        s.batches.received = t.received;
        s.batches.trained = t.trained;
        s.batches.dropped = t.dropped_by_label();
        s.transitions_ingested = t.transitions;
        s.inference_requests = t.inference_requests;
        drop(t);
        s.actors = self.actors.values().map(|a| a.actor_id.clone()).collect();
        let envs: u32 = self.actors.values().map(|a| a.n_envs).sum();
        self.metrics.actor_envs.set(i64::from(envs));
    }

    /// Shows how checkpoint writes go (`health`, from the desk): in the
    /// status, and the failures since the last call in the metric.
    pub fn show_checkpoints(&mut self, health: &crate::state::writer::WriteHealth) {
        let mut s = self.shared.status.lock().expect("status lock");
        let new = health.failures.saturating_sub(s.checkpoint_failures);
        self.metrics.checkpoint_failures.inc_by(new);
        s.checkpoint_failures = health.failures;
        s.checkpoint_error.clone_from(&health.error);
        s.checkpoint_env_steps = health.last_good;
    }

    /// Closes the run's part of the books: the batch log, the learner's
    /// figures, the agent's end-of-run work; returns the books for the
    /// last checkpoint (the desk then finishes the run).
    pub fn close(&mut self) -> anyhow::Result<RunBooks> {
        self.accounts.flush();
        let t = self.accounts.tally.lock().expect("tally lock");
        self.book.learner = Some(LearnerFigures {
            train_secs: self.time.train.as_secs_f64(),
            wait_secs: self.time.wait.as_secs_f64(),
            batches_received: t.received,
            batches_trained: t.trained,
            batches_dropped: t.dropped_by_label(),
            env_steps_abandoned: self.abandoned,
            env_steps_cut_off: self.steps_in_play(),
            batches_lost: self.batches_lost,
            policy_lag_mean: match self.book.session_lag {
                (_, 0) => None,
                (sum, n) => Some(sum as f64 / n as f64),
            },
            front: self.front,
        });
        drop(t);
        self.agent.finish_run(&self.cfg().output_dir.clone())?;
        self.books()
    }

    /// Env steps ingested for episodes not finished nor abandoned yet.
    fn steps_in_play(&self) -> u64 {
        self.episode_steps
            .values()
            .filter(|&&n| n > 0)
            .map(|&n| n as u64)
            .sum()
    }

    /// The status fields the summary settles.
    pub fn settle(&self, summary: &RunSummary) {
        let mut s = self.shared.status.lock().expect("status lock");
        s.target_reached = summary.target_reached();
        s.best_eval_return = summary.best_eval.map(|b| b.0);
        s.wall_secs = summary.counters.wall_secs;
    }
}
