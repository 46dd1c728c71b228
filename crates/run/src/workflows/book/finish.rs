//! The end of a run in the book: the weights to score last, the final
//! evaluations recorded, the last checkpoint queued and the summary.

use super::{RunBook, RunBooks};
use crate::workflows::{EvalResult, RunSummary, StopReason};
use rlfleet_checkpoint::Weights;
use rlfleet_learning::agents::Agent;
use std::time::Instant;

impl RunBook {
    /// The weights the end scores (none when the target was just reached:
    /// the confirming evaluation scored them).
    pub fn final_weights(&self, reason: StopReason, agent: &dyn Agent) -> Option<(Weights, u64)> {
        (!matches!(reason, StopReason::TargetReached { .. }))
            .then(|| (agent.weights(), self.counters.env_steps))
    }

    /// Closes the book at `now`: records the evaluations the end waited
    /// for (`finals`, the last of them scoring `final_version`), queues
    /// the last checkpoint (with `run_books`, a distributed run's, written
    /// before the desk goes on) and says how the run went.
    pub fn close(
        &mut self,
        reason: StopReason,
        agent: &dyn Agent,
        finals: &[EvalResult],
        final_version: Option<u64>,
        run_books: Option<RunBooks>,
        now: Instant,
    ) -> RunSummary {
        let mut final_eval = None;
        for r in finals {
            self.record_eval(r);
            if Some(r.weights.version) == final_version {
                final_eval = Some(r.mean());
            }
        }
        if let StopReason::TargetReached { mean_return, .. } = reason {
            final_eval = Some(mean_return);
        }
        self.tick(now);
        self.checkpoint(agent, run_books, true);
        RunSummary {
            reason,
            counters: self.counters,
            train_steps: agent.train_steps(),
            best_eval: self.best.as_ref().map(|b| (b.mean_return, b.env_steps)),
            final_eval,
            env_steps_per_sec: self.rate(now),
            env_errors: self.env_errors,
            confirm: self.target.last_confirm,
            output_dir: self.cfg.output_dir.clone(),
            learner: self.learner.take(),
        }
    }
}
