//! The end of a run at the desk: the final evaluation waited for, the
//! book closed and its last checkpoint written, `summary.toml` and the
//! learning curve.

use super::Desk;
use crate::workflows::book::{RunBook, RunBooks};
use crate::workflows::{RunSummary, StopReason};
use rlfleet_learning::agents::Agent;
use std::time::Instant;

impl Desk {
    /// Scores the final weights (unless the target was just reached),
    /// closes `book` and checkpoints (with `run_books`, a distributed
    /// run's), writes `summary.toml` and the learning curve.
    pub fn finish(
        mut self,
        book: &mut RunBook,
        reason: StopReason,
        agent: &dyn Agent,
        run_books: Option<RunBooks>,
    ) -> anyhow::Result<RunSummary> {
        self.perform(book)?;
        self.progress.finish();
        let last = book.final_weights(reason, agent);
        let final_version = last.as_ref().map(|(w, _)| w.version);
        let evaluator = self.evaluator.take().expect("finish is called once");
        let finals = evaluator.finish(last);
        let summary = book.close(
            reason,
            agent,
            &finals,
            final_version,
            run_books,
            Instant::now(),
        );
        self.perform(book)?;
        let dir = self.out.dir().to_path_buf();
        std::fs::write(dir.join("summary.toml"), summary.to_toml())?;
        let episodes = rlfleet_output::read_episodes(&dir.join("episodes.csv"))?;
        let evals = rlfleet_output::read_evals(&dir.join("evals.csv"))?;
        let cfg = &book.cfg;
        let title = format!(
            "{} — {} {} on {}",
            cfg.name, cfg.workflow, cfg.agent, cfg.env
        );
        if let Err(e) = rlfleet_output::plot_learning_curve(
            &dir.join("learning_curve.png"),
            &title,
            &episodes,
            &evals,
            cfg.stop.target_eval_return,
        ) {
            tracing::warn!("cannot draw the learning curve: {e}");
        }
        Ok(summary)
    }
}
