//! [`ValueWatch`]: whether a value-based agent's Q-values stay within what
//! any return can be. Its training scalars carry the largest |Q| on its
//! last sampled batch (`train/q_max`) and the largest discounted return
//! the rewards seen so far allow (`train/q_bound`: max |reward| / (1 − γ)).
//! Values far above that, or not finite, have diverged, and the greedy
//! policy they give degrades while the run plays on: said once per
//! streak, and counted.

/// |Q| past this many times the bound is called diverging: function
/// approximation overshoots a little, a diverged network by orders of
/// magnitude.
pub const DIVERGING_FACTOR: f64 = 2.0;

/// What the run's Q-values did, from its training scalars.
#[derive(Debug, Default, Clone)]
pub struct ValueWatch {
    /// The largest |Q| at the latest look.
    pub q_max: Option<f64>,
    /// The largest discounted return at the latest look.
    pub q_bound: Option<f64>,
    /// Streaks of diverging values begun this session.
    pub divergences: u64,
    diverging: bool,
}

impl ValueWatch {
    /// Looks at one write of training `scalars` at `env_steps`; returns
    /// the warning to give when a streak of diverging values begins.
    pub fn look(&mut self, scalars: &[(&'static str, f64)], env_steps: u64) -> Option<String> {
        let get = |name: &str| scalars.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        let (Some(q), Some(bound)) = (get("train/q_max"), get("train/q_bound")) else {
            return None;
        };
        self.q_max = Some(q);
        self.q_bound = Some(bound);
        let diverging = !q.is_finite() || q > DIVERGING_FACTOR * bound;
        let begins = diverging && !self.diverging;
        self.diverging = diverging;
        if !begins {
            return None;
        }
        self.divergences += 1;
        Some(format!(
            "Q-values diverge at {env_steps} env steps: |Q| reaches {q:.4e} where no \
             discounted return of the rewards seen can pass {bound:.4} (max |reward| / \
             (1 - gamma)); the policy degrades from here: lower dqn.lr, copy the target \
             less often (dqn.target_update_interval) or take double Q (dqn.double)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_of_values_past_the_bound_is_said_once() {
        let mut w = ValueWatch::default();
        let at = |q: f64| {
            [
                ("train/loss", 1.0),
                ("train/q_max", q),
                ("train/q_bound", 100.0),
            ]
        };
        assert_eq!(w.look(&[("train/loss", 1.0)], 1), None);
        assert_eq!(w.q_max, None);
        assert_eq!(w.look(&at(150.0), 2), None);
        let said = w.look(&at(250.0), 3).expect("diverging");
        assert!(
            said.contains("2.5000e2") && said.contains("100.0000"),
            "{said}"
        );
        assert_eq!(w.look(&at(7e4), 4), None);
        assert_eq!(w.divergences, 1);
        assert_eq!(w.look(&at(90.0), 5), None);
        assert!(w.look(&at(f64::NAN), 6).is_some());
        assert_eq!((w.divergences, w.q_bound), (2, Some(100.0)));
    }
}
