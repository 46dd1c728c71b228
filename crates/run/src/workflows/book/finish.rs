//! The end of a run: the final evaluation, the last checkpoint,
//! `summary.toml` and the learning curve.

use super::RunBook;
use crate::workflows::{RunSummary, StopReason};
use rlfleet_learning::agents::Agent;
use std::collections::BTreeMap;

impl RunBook {
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
            confirm: self.target.last_confirm,
            output_dir: self.out.dir().to_path_buf(),
            learner: self.learner.take(),
        };
        let dir = self.out.dir().to_path_buf();
        std::fs::write(dir.join("summary.toml"), summary.to_toml())?;
        let episodes = rlfleet_output::read_episodes(&dir.join("episodes.csv"))?;
        let evals = rlfleet_output::read_evals(&dir.join("evals.csv"))?;
        let title = format!(
            "{} — {} {} on {}",
            self.cfg.name, self.cfg.workflow, self.cfg.agent, self.cfg.env
        );
        if let Err(e) = rlfleet_output::plot_learning_curve(
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
}
