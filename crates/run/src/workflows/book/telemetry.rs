//! What a run reports as its env steps pass: weights to the evaluator and
//! a checkpoint at their periods, training scalars to TensorBoard, the
//! progress bar.

use super::RunBook;
use crate::workflows::progress::Confirm;
use rlfleet_learning::agents::Agent;
use std::time::Instant;

/// Training scalars go to TensorBoard each time the run's env steps cross
/// a multiple of this.
const SCALARS_EVERY_STEPS: u64 = 1000;

impl RunBook {
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
            let confirm = match (self.target.confirming(), self.target.last_confirm) {
                (true, _) => Confirm::UnderWay,
                (false, Some((_, mean))) => Confirm::Latest(mean),
                (false, None) => Confirm::None,
            };
            self.progress.update(
                now,
                self.counters.episodes,
                self.rate(),
                self.recent_mean(),
                self.target.last_eval,
                confirm,
            );
        }
        Ok(())
    }

    /// A batch `lag` policy versions behind the learner was trained on.
    pub fn policy_lag(&mut self, lag: u64) {
        self.lag.0 += lag;
        self.lag.1 += 1;
        self.session_lag.0 += lag;
        self.session_lag.1 += 1;
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
}
