//! Second stage of config parsing: ranges and cross-field rules.

use super::{AgentKind, ConfigError, RunConfig, TransportKind, WorkflowKind};
use crate::env;
use std::fmt::Display;

/// `Err(OutOfRange)` unless `ok`.
pub(super) fn require<T: Display>(
    key: &'static str,
    value: T,
    ok: bool,
    allowed: &str,
) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            key,
            value: value.to_string(),
            allowed: allowed.to_string(),
        })
    }
}

pub(super) fn positive_finite(key: &'static str, v: f64) -> Result<(), ConfigError> {
    require(key, v, v.is_finite() && v > 0.0, "a finite number > 0")
}

pub(super) fn unit_interval(key: &'static str, v: f64) -> Result<(), ConfigError> {
    require(key, v, (0.0..=1.0).contains(&v), "a number in [0, 1]")
}

/// The hidden widths, learning rate and discount every agent table has;
/// `keys` names them in errors.
pub(super) fn network(
    keys: [&'static str; 3],
    hidden: &[u32],
    lr: f64,
    gamma: f64,
) -> Result<(), ConfigError> {
    require(
        keys[0],
        format!("{hidden:?}"),
        !hidden.is_empty()
            && hidden.len() <= 8
            && hidden.iter().all(|&h| (1..=65_536).contains(&h)),
        "1 to 8 layer widths, each in 1..=65536",
    )?;
    positive_finite(keys[1], lr)?;
    require(
        keys[2],
        gamma,
        gamma > 0.0 && gamma <= 1.0,
        "a number in (0, 1]",
    )
}

impl RunConfig {
    /// Checks ranges and cross-field rules; the first problem is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_agent_tables()?;
        require(
            "name",
            format!("{:?}", self.name),
            !self.name.is_empty()
                && self.name.len() <= 128
                && self
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "1 to 128 characters of letters, digits, '-', '_' or '.'",
        )?;
        require(
            "frame_stack",
            self.frame_stack,
            (1..=16).contains(&self.frame_stack),
            "an integer in 1..=16",
        )?;
        require(
            "ranks_per_env",
            self.ranks_per_env,
            (1..=4096).contains(&self.ranks_per_env),
            "an integer in 1..=4096",
        )?;
        if self.ranks_per_env > 1 && self.transport != TransportKind::Mpi {
            return Err(ConfigError::Unsupported {
                key: "ranks_per_env",
                value: self.ranks_per_env.to_string(),
                allowed: format!(
                    "an env spans several ranks only in an MPI job (`learner-server mpi` \
                     under mpirun or srun, actors `actor-client mpi --ranks-per-env {}`); \
                     this run's transport is \"{}\"",
                    self.ranks_per_env, self.transport
                ),
            });
        }
        let spec = self.env_source().spec().map_err(|e| match e {
            env::EnvError::Unknown(_) => ConfigError::Unsupported {
                key: "env",
                value: format!("{:?}", self.env),
                allowed: format!(
                    "built-in environments are {}; any other Gymnasium id is \
                     `gymnasium:ID`, a Python class or factory `python:module:attr`",
                    env::ENV_IDS.join(", ")
                ),
            },
            other => ConfigError::Env(other.to_string()),
        })?;
        if !WorkflowKind::IMPLEMENTED.contains(&self.workflow) {
            let names: Vec<String> = WorkflowKind::IMPLEMENTED
                .iter()
                .map(|w| w.to_string())
                .collect();
            return Err(ConfigError::Unsupported {
                key: "workflow",
                value: format!("\"{}\"", self.workflow),
                allowed: format!("this build runs {}", names.join(", ")),
            });
        }
        if self.workflow == WorkflowKind::Single && self.transport != TransportKind::Inproc {
            return Err(ConfigError::Unsupported {
                key: "transport",
                value: format!("\"{}\"", self.transport),
                allowed: "workflow `single` runs in one process: use \"inproc\"".into(),
            });
        }
        if self.workflow.is_multi_learner() {
            let w = self.workflow;
            if self.transport != TransportKind::Mpi {
                return Err(ConfigError::Unsupported {
                    key: "transport",
                    value: format!("\"{}\"", self.transport),
                    allowed: format!("workflow `{w}` trains on several learner ranks: use \"mpi\""),
                });
            }
            if !matches!(self.agent, AgentKind::Dqn | AgentKind::Probe) {
                return Err(ConfigError::Conflict(format!(
                    "workflow `{w}` runs data-parallel DQN (or the probe) in this build, \
                     not agent `{}`",
                    self.agent
                )));
            }
            if self.agent == AgentKind::Dqn && self.dqn.n_step != 1 {
                return Err(ConfigError::Conflict(format!(
                    "workflow `{w}` needs dqn.n_step = 1 (the lead learner counts what each \
                     learner's replay holds)"
                )));
            }
        }
        if self.workflow.ends_on_episodes() && self.stop.max_episodes.is_none() {
            return Err(ConfigError::Conflict(format!(
                "workflow `{}` ends when all episodes have finished: set stop.max_episodes",
                self.workflow
            )));
        }
        if self.distributed.fixed_policy.is_some() && self.workflow != WorkflowKind::Random {
            return Err(ConfigError::Conflict(format!(
                "distributed.fixed_policy is for workflow `random`, not `{}`",
                self.workflow
            )));
        }
        self.validate_distributed()?;
        if self.frame_stack > 1 && spec.obs_shape.len() > 3 {
            return Err(ConfigError::Conflict(format!(
                "frame_stack = {} stacks frames of 1 or 2 axes (a vector or a \
                 grayscale image); `{}` observes frames of shape {:?}",
                self.frame_stack,
                self.env,
                &spec.obs_shape[1..]
            )));
        }
        self.validate_action_space(&spec.action_space)?;
        self.validate_model(&spec)?;
        self.validate_dqn()?;
        self.validate_a2c()?;
        self.validate_ppo()?;
        self.validate_impala()?;
        self.validate_r2d2()?;
        self.validate_continuous_agents()?;
        if self.agent == AgentKind::Probe {
            require(
                "probe.train_every",
                self.probe.train_every,
                self.probe.train_every >= 1,
                "an integer >= 1",
            )?;
            unit_interval("probe.epsilon", self.probe.epsilon)?;
        }
        self.validate_stop()
    }

    fn validate_stop(&self) -> Result<(), ConfigError> {
        let s = &self.stop;
        if s.target_eval_return.is_none()
            && s.max_env_steps.is_none()
            && s.max_episodes.is_none()
            && s.max_wall_secs.is_none()
        {
            return Err(ConfigError::Conflict(
                "[stop] sets no condition: give at least one of target_eval_return, \
                 max_env_steps, max_episodes, max_wall_secs"
                    .into(),
            ));
        }
        if let Some(t) = s.target_eval_return {
            require(
                "stop.target_eval_return",
                t,
                t.is_finite(),
                "a finite number",
            )?;
        }
        if let Some(n) = s.max_env_steps {
            require("stop.max_env_steps", n, n >= 1, "an integer >= 1")?;
        }
        if let Some(n) = s.max_episodes {
            require("stop.max_episodes", n, n >= 1, "an integer >= 1")?;
        }
        if let Some(w) = s.max_wall_secs {
            positive_finite("stop.max_wall_secs", w)?;
        }
        let e = &self.eval;
        require(
            "eval.period_steps",
            e.period_steps,
            e.period_steps >= 1,
            "an integer >= 1",
        )?;
        require(
            "eval.episodes",
            e.episodes,
            (1..=10_000).contains(&e.episodes),
            "an integer in 1..=10000",
        )?;
        require(
            "eval.confirm_episodes",
            e.confirm_episodes,
            e.confirm_episodes <= 10_000,
            "an integer in 0..=10000 (0: no confirming evaluation)",
        )?;
        require(
            "eval.epsilon",
            e.epsilon,
            (0.0..1.0).contains(&e.epsilon),
            "a probability in [0, 1) (0: greedy)",
        )?;
        positive_finite(
            "checkpoint.max_failed_secs",
            self.checkpoint.max_failed_secs,
        )?;
        let k = self.checkpoint.keep;
        require(
            "checkpoint.keep",
            k,
            (1..=1000).contains(&k),
            "an integer in 1..=1000",
        )?;
        let f = &self.fleet;
        positive_finite("fleet.weight", f.weight)?;
        if let Some(max) = f.max_envs {
            require(
                "fleet.max_envs",
                max,
                max >= f.min_envs.max(1),
                "an integer >= 1 and >= fleet.min_envs",
            )?;
        }
        if let Some(mb) = f.device_memory_mb {
            require("fleet.device_memory_mb", mb, mb >= 1, "an integer >= 1")?;
        }
        Ok(())
    }
}
