//! [`TargetRule`]: when evaluations stop a run on its target return — a
//! screening evaluation at the target asks for a confirming one on the
//! same weights, and only a confirming evaluation at the target stops the
//! run. Sans-IO: evaluations in, verdicts out.

use crate::workflows::StopReason;

/// One finished evaluation, as the rule reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub mean: f64,
    pub episodes: u32,
    pub env_steps: u64,
    /// A confirming evaluation (asked for by a screening one).
    pub confirming: bool,
}

/// What the rule says of one evaluation.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Nothing to do.
    Continue,
    /// Evaluate the same weights again over this many episodes.
    Confirm(u32),
    /// The target is reached (and confirmed, when confirmation is on).
    Stop(StopReason),
}

/// The target rule and what it remembers between evaluations.
#[derive(Debug, Clone, Default)]
pub struct TargetRule {
    /// `stop.target_eval_return`.
    pub target: Option<f64>,
    /// `eval.confirm_episodes`: 0 lets a screening evaluation stop the run.
    pub confirm_episodes: u32,
    /// The screening mean a confirming evaluation under way was asked by.
    confirming: Option<f64>,
    /// The latest screening evaluation's mean.
    pub last_eval: Option<f64>,
    /// The latest confirming evaluation: the screening mean that asked for
    /// it, and its own.
    pub last_confirm: Option<(f64, f64)>,
}

impl TargetRule {
    pub fn new(target: Option<f64>, confirm_episodes: u32) -> TargetRule {
        TargetRule {
            target,
            confirm_episodes,
            ..TargetRule::default()
        }
    }

    /// The rule as a checkpoint left it: what the last evaluations said
    /// (a confirmation under way then is not: its episodes are gone).
    pub fn resumed(self, last_eval: Option<f64>, last_confirm: Option<(f64, f64)>) -> TargetRule {
        TargetRule {
            last_eval,
            last_confirm,
            ..self
        }
    }

    /// A confirming evaluation is under way.
    pub fn confirming(&self) -> bool {
        self.confirming.is_some()
    }

    /// The rule on one evaluation.
    pub fn judge(&mut self, r: Scored) -> Verdict {
        let passed = self.target.is_some_and(|t| r.mean >= t);
        if r.confirming {
            let screen = self.confirming.take().unwrap_or(f64::NAN);
            self.last_confirm = Some((screen, r.mean));
            if !passed {
                tracing::info!(
                    env_steps = r.env_steps,
                    "not confirmed: {} episodes averaged {:.1}, below the target",
                    r.episodes,
                    r.mean
                );
                return Verdict::Continue;
            }
        } else {
            self.last_eval = Some(r.mean);
            if !passed {
                return Verdict::Continue;
            }
            if self.confirm_episodes > 0 {
                if self.confirming.is_some() {
                    return Verdict::Continue;
                }
                tracing::info!(
                    env_steps = r.env_steps,
                    "screening evaluation {:.1} reached the target: confirming over {} episodes",
                    r.mean,
                    self.confirm_episodes
                );
                self.confirming = Some(r.mean);
                return Verdict::Confirm(self.confirm_episodes);
            }
        }
        Verdict::Stop(StopReason::TargetReached {
            mean_return: r.mean,
            env_steps: r.env_steps,
            confirmed_over: if r.confirming { r.episodes } else { 0 },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(mean: f64, confirming: bool) -> Scored {
        Scored {
            mean,
            episodes: if confirming { 100 } else { 10 },
            env_steps: 1000,
            confirming,
        }
    }

    #[test]
    fn a_screening_pass_asks_once_and_only_a_confirmation_stops() {
        let mut rule = TargetRule::new(Some(475.0), 100);
        assert_eq!(rule.judge(scored(400.0, false)), Verdict::Continue);
        assert_eq!(rule.judge(scored(480.0, false)), Verdict::Confirm(100));
        assert!(rule.confirming());
        // A second pass while one is under way asks for nothing more.
        assert_eq!(rule.judge(scored(490.0, false)), Verdict::Continue);
        // The confirmation falls short: the run goes on, and says so.
        assert_eq!(rule.judge(scored(470.0, true)), Verdict::Continue);
        assert_eq!(rule.last_confirm, Some((480.0, 470.0)));
        assert!(!rule.confirming());
        assert_eq!(rule.judge(scored(500.0, false)), Verdict::Confirm(100));
        assert_eq!(
            rule.judge(scored(476.0, true)),
            Verdict::Stop(StopReason::TargetReached {
                mean_return: 476.0,
                env_steps: 1000,
                confirmed_over: 100
            })
        );
        assert_eq!(rule.last_eval, Some(500.0));
    }

    #[test]
    fn without_confirmation_a_screening_pass_stops_and_without_target_nothing_does() {
        let mut rule = TargetRule::new(Some(10.0), 0);
        assert!(matches!(
            rule.judge(scored(10.0, false)),
            Verdict::Stop(StopReason::TargetReached {
                confirmed_over: 0,
                ..
            })
        ));
        let mut none = TargetRule::new(None, 100);
        assert_eq!(none.judge(scored(1e9, false)), Verdict::Continue);
        assert_eq!(none.last_eval, Some(1e9));
    }
}
