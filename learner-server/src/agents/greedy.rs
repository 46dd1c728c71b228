//! [`GreedyPolicy`]: an agent's evaluation policy, acting from published
//! flat weights (on the CPU in plain Rust; a convolutional or large network
//! in libtorch on the learner's device, as the `seed` front does): the
//! actors' [`ActorPolicy`] made greedy (the best Q-value or logit for
//! discrete actions, a dueling head's best advantage, the deterministic
//! action of a continuous head).

use super::{AgentError, Policy, Weights, check_weights};
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::policy::ActorPolicy;

/// Greedy action selection with its own copy of the weights.
#[derive(Debug)]
pub struct GreedyPolicy {
    policy: ActorPolicy,
    /// The action picked (reused).
    picked: Vec<f32>,
}

impl GreedyPolicy {
    pub fn new(cfg: &RunConfig, spec: &EnvSpec) -> GreedyPolicy {
        let policy = ActorPolicy::new(
            spec,
            cfg.agent,
            cfg.torso(spec),
            cfg.policy_hidden(),
            cfg.dueling(),
            cfg.seed,
        );
        // A convolutional or large network evaluates in libtorch, as the
        // `seed` front answers with it.
        let policy = crate::nets::place(policy, cfg.distributed.seed_inference, "evaluation");
        GreedyPolicy {
            policy: policy.greedy(),
            picked: Vec::with_capacity(spec.action_space.flat_dim()),
        }
    }
}

impl Policy for GreedyPolicy {
    fn load(&mut self, w: &Weights) -> Result<(), AgentError> {
        check_weights(&w.data, self.policy.numel())?;
        self.policy.load(w.version, &w.data).expect("count checked");
        Ok(())
    }

    fn act(&mut self, obs: &[f32], action: &mut [f32]) {
        self.policy.act(obs, 1, &mut self.picked);
        action.copy_from_slice(&self.picked);
    }

    fn version(&self) -> u64 {
        self.policy.version()
    }
}
