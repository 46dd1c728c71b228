//! Validation of the `[model]` table: a convolutional torso that fits the
//! env's observations, and a recurrent core with the agents and workflows
//! that keep its state.

use super::validate::require;
use super::{AgentKind, ConfigError, RunConfig};

impl RunConfig {
    /// A convolutional torso fits the env's observations, and the agent
    /// takes one.
    pub(super) fn validate_model(&self, spec: &crate::env::EnvSpec) -> Result<(), ConfigError> {
        self.validate_core(spec)?;
        if self.model.torso == super::Torso::Mlp {
            return Ok(());
        }
        if !matches!(
            self.agent,
            AgentKind::Dqn | AgentKind::A2c | AgentKind::Ppo | AgentKind::Impala | AgentKind::R2d2
        ) {
            return Err(ConfigError::Unsupported {
                key: "model.torso",
                value: serde_json::to_string(&self.model.torso).expect("an enum serialises"),
                allowed: format!(
                    "agents dqn, a2c, ppo, impala and r2d2 take a convolutional torso; `{}` takes \"mlp\"",
                    self.agent
                ),
            });
        }
        self.model.torso_for(spec).map_err(ConfigError::Conflict)?;
        Ok(())
    }

    /// A recurrent core: its sizes, and the agents that run one so far
    /// (PPO, IMPALA, A2C and R2D2, on discrete actions).
    fn validate_core(&self, spec: &crate::env::EnvSpec) -> Result<(), ConfigError> {
        let m = &self.model;
        if m.core == super::CoreKind::None {
            return Ok(());
        }
        require(
            "model.core_size",
            m.core_size,
            (1..=4096).contains(&m.core_size),
            "an integer in 1..=4096",
        )?;
        require(
            "model.core_layers",
            m.core_layers,
            (1..=4).contains(&m.core_layers),
            "an integer in 1..=4",
        )?;
        require(
            "model.max_seq_len",
            m.max_seq_len,
            (1..=100_000).contains(&m.max_seq_len),
            "an integer in 1..=100000",
        )?;
        if !matches!(
            self.agent,
            AgentKind::Ppo | AgentKind::Impala | AgentKind::A2c | AgentKind::R2d2
        ) {
            return Err(ConfigError::Unsupported {
                key: "model.core",
                value: "\"lstm\"".into(),
                allowed: format!(
                    "agents ppo, impala, a2c and r2d2 take a recurrent core; `{}` takes \"none\"",
                    self.agent
                ),
            });
        }
        if !spec.action_space.is_discrete() {
            return Err(ConfigError::Conflict(format!(
                "model.core = \"lstm\" is for discrete actions so far, and `{}` has a \
                 continuous action space",
                self.env
            )));
        }
        // PPO's, IMPALA's and A2C's workflows (`single`, `sync`, `async`,
        // `seed-a2c`) all keep the state: actors per env slot, the `seed`
        // front per actor env.
        Ok(())
    }
}
