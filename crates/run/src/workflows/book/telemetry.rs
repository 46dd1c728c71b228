//! What a run reports as its env steps pass: weights to the evaluator and
//! a checkpoint at their periods, training scalars to TensorBoard, the
//! progress bar — queued as effects.

use super::{Effect, RunBook};
use crate::workflows::progress::{Confirm, ProgressLine};
use rlfleet_learning::agents::Agent;
use std::time::Instant;

/// Training scalars go to TensorBoard each time the run's env steps cross
/// a multiple of this.
const SCALARS_EVERY_STEPS: u64 = 1000;

/// The progress bar is redrawn each time this many env steps have passed.
const PROGRESS_EVERY_STEPS: u64 = 500;

impl RunBook {
    /// After the env step count went from `before` to the current count,
    /// at `now`: publishes weights to the evaluator and checkpoints when a
    /// period boundary was crossed, and refreshes the progress bar.
    pub fn after_steps(&mut self, before: u64, agent: &dyn Agent, now: Instant) {
        let steps = self.counters.env_steps;
        let crossed = |period: u64| period > 0 && steps / period > before / period;
        if crossed(self.cfg.eval.period_steps) {
            self.push(Effect::Publish {
                weights: agent.weights(),
                env_steps: steps,
            });
        }
        if crossed(self.cfg.checkpoint.period_steps) {
            if self.defer_checkpoints {
                self.checkpoint_due = true;
            } else {
                self.checkpoint(agent, None, false);
            }
        }
        if crossed(SCALARS_EVERY_STEPS) {
            self.scalars(agent, now);
        }
        if steps - self.last_progress_steps >= PROGRESS_EVERY_STEPS {
            self.last_progress_steps = steps;
            let confirm = match (self.target.confirming(), self.target.last_confirm) {
                (true, _) => Confirm::UnderWay,
                (false, Some((_, mean))) => Confirm::Latest(mean),
                (false, None) => Confirm::None,
            };
            self.push(Effect::Progress(ProgressLine {
                env_steps: steps,
                episodes: self.counters.episodes,
                steps_per_sec: self.rate(now),
                recent: self.recent_mean(),
                eval: self.target.last_eval,
                confirm,
            }));
        }
    }

    /// A batch `lag` policy versions behind the learner was trained on.
    pub fn policy_lag(&mut self, lag: u64) {
        self.lag.0 += lag;
        self.lag.1 += 1;
        self.session_lag.0 += lag;
        self.session_lag.1 += 1;
    }

    /// The agent's training scalars, the rates since the last write, the
    /// replay size and the mean policy lag, for TensorBoard.
    fn scalars(&mut self, agent: &dyn Agent, now: Instant) {
        let steps = self.counters.env_steps;
        let (then, since_steps, grads) = self.last_scalars;
        let secs = now.saturating_duration_since(then).as_secs_f64().max(1e-9);
        let train_steps = agent.train_steps();
        let mut s = agent.scalars(steps);
        if let Some(warning) = self.values.look(&s, steps) {
            self.push(Effect::Warning(warning));
        }
        s.push((
            "perf/env_steps_per_sec",
            (steps - since_steps) as f64 / secs,
        ));
        s.push((
            "perf/gradient_steps_per_sec",
            train_steps.saturating_sub(grads) as f64 / secs,
        ));
        s.push(("train/gradient_steps", train_steps as f64));
        s.push(("replay/size", agent.replay_len() as f64));
        if self.lag.1 > 0 {
            s.push(("train/policy_lag", self.lag.0 as f64 / self.lag.1 as f64));
        }
        self.push(Effect::Scalars {
            env_steps: steps,
            values: s,
        });
        self.last_scalars = (now, steps, train_steps);
        self.lag = (0, 0);
    }
}
