//! [`GreedyPolicy`]: an agent's evaluation policy, acting from published
//! flat weights (on the CPU in plain Rust; a convolutional or large network
//! in libtorch on the learner's device, as the `seed` front does): the
//! actors' [`ActorPolicy`] made greedy (the best Q-value or logit for
//! discrete actions, a dueling head's best advantage, the deterministic
//! action of a continuous head), or with `eval.epsilon` a uniformly random
//! discrete action at that rate.

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
            cfg.policy_net(spec),
            cfg.dueling(),
            cfg.seed,
        );
        // A convolutional or large network evaluates in libtorch, as the
        // `seed` front answers with it.
        let policy = crate::nets::place(policy, cfg.distributed.seed_inference, "evaluation");
        let mut policy = policy.greedy();
        if spec.action_space.is_discrete() {
            // `eval.epsilon`: a random action now and then (validated 0 for
            // continuous actions).
            policy.set_exploration(cfg.eval_epsilon() as f32);
        }
        GreedyPolicy {
            policy,
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

    fn begin_episode(&mut self) {
        self.policy.reset_slot(0);
    }

    fn version(&self) -> u64 {
        self.policy.version()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zero weights make every Q-value equal, so the greedy action is
    /// always action 0; `eval.epsilon` replaces it with a uniformly random
    /// one (action 1 half the time) at its rate.
    #[test]
    fn eval_epsilon_takes_random_actions_at_its_rate() {
        let picks_of_action_1 = |epsilon: f64| {
            let text = format!(
                "name = \"e\"\nenv = \"CartPole-v1\"\nagent = \"dqn\"\nworkflow = \"single\"\noutput_dir = \"runs/e\"\n\
                 [stop]\nmax_env_steps = 10\n[eval]\nepsilon = {epsilon}\n[dqn]\nhidden = [8]\n"
            );
            let cfg = RunConfig::from_toml(&text, "unit").expect("a valid config");
            let spec = cfg.env_source().spec().expect("a built-in env");
            let mut p = GreedyPolicy::new(&cfg, &spec);
            let numel = p.policy.numel();
            p.load(&Weights {
                version: 1,
                data: vec![0.0; numel],
            })
            .expect("weights");
            let mut action = [0f32];
            (0..4000)
                .filter(|_| {
                    p.act(&[0.1, 0.0, -0.1, 0.0], &mut action);
                    action[0] == 1.0
                })
                .count()
        };
        assert_eq!(picks_of_action_1(0.0), 0, "greedy");
        let n = picks_of_action_1(0.2);
        // Expected 4000 * 0.2 / 2 = 400.
        assert!((300..500).contains(&n), "{n} of 4000");
    }
}
