//! [`GreedyPolicy`]: an agent's evaluation policy, acting from published
//! flat weights on the CPU in plain Rust: the best Q-value or logit for
//! discrete actions (a dueling head's best advantage), the deterministic
//! action of a continuous head.

use super::{AgentError, Policy, Weights, check_weights};
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::{EnvSpec, Space};
use rlfleet_shared::policy::{ContinuousPolicy, QPolicy, continuous_head};

/// Greedy action selection with its own copy of the weights.
#[derive(Debug)]
pub enum GreedyPolicy {
    Discrete(QPolicy),
    Continuous(ContinuousPolicy),
}

impl GreedyPolicy {
    pub fn new(cfg: &RunConfig, spec: &EnvSpec) -> GreedyPolicy {
        let hidden = cfg.policy_hidden();
        match &spec.action_space {
            Space::Discrete { n } => {
                let mut q =
                    QPolicy::new(spec.obs_dim(), hidden, *n, cfg.seed).dueling(cfg.dueling());
                q.epsilon = 0.0;
                GreedyPolicy::Discrete(q)
            }
            Space::Box { low, high } => GreedyPolicy::Continuous(ContinuousPolicy::new(
                spec.obs_dim(),
                hidden,
                continuous_head(cfg.agent),
                low,
                high,
                cfg.seed,
            )),
        }
    }

    fn numel(&self) -> usize {
        match self {
            GreedyPolicy::Discrete(q) => q.numel(),
            GreedyPolicy::Continuous(c) => c.numel(),
        }
    }
}

impl Policy for GreedyPolicy {
    fn load(&mut self, w: &Weights) -> Result<(), AgentError> {
        check_weights(&w.data, self.numel())?;
        match self {
            GreedyPolicy::Discrete(q) => q.load(w.version, &w.data),
            GreedyPolicy::Continuous(c) => c.load(w.version, &w.data),
        }
        .expect("count checked");
        Ok(())
    }

    fn act(&mut self, obs: &[f32], action: &mut [f32]) {
        let mut out = Vec::with_capacity(action.len());
        match self {
            GreedyPolicy::Discrete(q) => q.act(obs, 1, &mut out),
            GreedyPolicy::Continuous(c) => c.act(obs, 1, false, &mut out),
        }
        action.copy_from_slice(&out);
    }

    fn version(&self) -> u64 {
        match self {
            GreedyPolicy::Discrete(q) => q.version,
            GreedyPolicy::Continuous(c) => c.version,
        }
    }
}
