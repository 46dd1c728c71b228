//! Stop rules, without clocks or IO: given the counters, has the run hit a
//! limit? (The evaluation target and cancellation are checked by the loop
//! that sees them.)

use rlfleet_checkpoint::RunCounters;
use rlfleet_shared::config::StopConfig;
use std::fmt;

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopReason {
    TargetReached {
        mean_return: f64,
        env_steps: u64,
        /// Episodes of the confirming evaluation (0: the screening
        /// evaluation stopped the run, `eval.confirm_episodes = 0`).
        confirmed_over: u32,
    },
    MaxEnvSteps,
    MaxEpisodes,
    MaxWallTime,
    Cancelled,
    /// `ml-rma-queue-short`: this learner's actors are done and their
    /// pools empty.
    GroupExhausted {
        learner: usize,
    },
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::TargetReached {
                mean_return,
                env_steps,
                confirmed_over,
            } => {
                write!(
                    f,
                    "target reached (evaluation mean {mean_return:.1} at {env_steps} env steps"
                )?;
                if *confirmed_over > 0 {
                    write!(f, ", confirmed over {confirmed_over} episodes")?;
                }
                f.write_str(")")
            }
            StopReason::MaxEnvSteps => f.write_str("env step limit reached"),
            StopReason::MaxEpisodes => f.write_str("episode limit reached"),
            StopReason::MaxWallTime => f.write_str("wall time limit reached"),
            StopReason::Cancelled => f.write_str("stopped on request"),
            StopReason::GroupExhausted { learner } => {
                write!(f, "learner {learner}'s actor group is exhausted")
            }
        }
    }
}

/// The first count limit the counters have reached, if any.
pub fn check_limits(stop: &StopConfig, c: &RunCounters) -> Option<StopReason> {
    if stop.max_env_steps.is_some_and(|n| c.env_steps >= n) {
        return Some(StopReason::MaxEnvSteps);
    }
    if stop.max_episodes.is_some_and(|n| c.episodes >= n) {
        return Some(StopReason::MaxEpisodes);
    }
    if stop.max_wall_secs.is_some_and(|s| c.wall_secs >= s) {
        return Some(StopReason::MaxWallTime);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_fire_at_the_count_not_before() {
        let stop = StopConfig {
            max_env_steps: Some(10),
            max_episodes: Some(3),
            ..Default::default()
        };
        let mut c = RunCounters {
            env_steps: 9,
            episodes: 2,
            wall_secs: 0.0,
        };
        assert_eq!(check_limits(&stop, &c), None);
        c.env_steps = 10;
        assert_eq!(check_limits(&stop, &c), Some(StopReason::MaxEnvSteps));
        c.env_steps = 5;
        c.episodes = 3;
        assert_eq!(check_limits(&stop, &c), Some(StopReason::MaxEpisodes));
        let wall = StopConfig {
            max_wall_secs: Some(1.5),
            ..Default::default()
        };
        assert_eq!(
            check_limits(
                &wall,
                &RunCounters {
                    wall_secs: 1.5,
                    ..c
                }
            ),
            Some(StopReason::MaxWallTime)
        );
    }
}
