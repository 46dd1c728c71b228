//! The run config: one training job in TOML (env, agent, workflow,
//! transport, hyperparameters, stop condition, seed, output directory).
//!
//! Two stages, as ripgrep does with its flags: serde parses the raw form
//! (unknown keys and wrong types are rejected there, with the line), then
//! [`RunConfig::validate`] checks ranges and cross-field rules and names the
//! key, the value and what is allowed.

mod a2c;
mod agent_tables;
mod distributed;
mod dqn;
mod error;
mod footprint;
mod impala;
mod keyed;
mod kinds;
mod model;
mod overrides;
mod ppo;
mod r2d2;
mod sections;
mod suggest;
mod td3;
mod validate;
mod validate_agents;
mod validate_distributed;
mod validate_model;

pub use a2c::{A2cConfig, TrainOn};
pub use distributed::{DataStructure, DistributedConfig, Overflow, SeedInference, WindowSelector};
pub use dqn::{DqnConfig, OptimizerKind, ProbeConfig, TargetUpdate};
pub use error::ConfigError;
pub use footprint::{Footprint, RUN_OVERHEAD_MB};
pub use impala::ImpalaConfig;
pub use keyed::{from_json_keyed, from_toml_keyed};
pub use kinds::{AgentKind, MPI_LAUNCH, TransportKind, WorkflowKind};
pub use model::{CoreKind, ImageLayout, ModelConfig, Torso};
pub use overrides::parse_assignment;
pub use ppo::PpoConfig;
pub use r2d2::R2d2Config;
pub use sections::{CheckpointConfig, EvalConfig, FleetConfig, StopConfig};
pub use td3::{DdpgConfig, SacConfig, Td3Config};

use crate::env::EnvSource;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One training run, as written in a TOML file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// A short name for logs and the control API.
    #[schema(min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9._-]+$")]
    pub name: String,
    /// A built-in environment id (`CartPole-v1`, `Acrobot-v1`,
    /// `MountainCar-v0`, `MountainCarContinuous-v0`, `Pendulum-v1`,
    /// `Counting-v0`, `MemoryCorridor-v0`, `HeatRod-v0`), `gymnasium:ID`
    /// (any registered Gymnasium id) or `python:module:attr` (a class or
    /// factory with the Gymnasium API).
    #[schema(value_type = EnvId, inline)]
    pub env: String,
    /// Keyword arguments for `gymnasium.make` or the `python:` callable.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = Object)]
    pub env_kwargs: BTreeMap<String, serde_json::Value>,
    /// `module:attr` wrappers applied to a Python env in order, each called
    /// with the env; `module:attr(key=value, ...)` passes keyword arguments
    /// too (Python literals), e.g.
    /// `gymnasium.wrappers:FrameStackObservation(stack_size=4)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_wrappers: Vec<String>,
    /// Folders put in front of Python's `sys.path` (relative ones are
    /// relative to the config file's folder; to the daemon's working
    /// directory for a config posted as JSON).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<String>)]
    pub python_path: Vec<PathBuf>,
    pub agent: AgentKind,
    pub workflow: WorkflowKind,
    #[serde(default)]
    pub transport: TransportKind,
    /// Seeds the networks, replay sampling, exploration and environments.
    #[serde(default)]
    pub seed: u64,
    /// Frames an observation stacks (Gymnasium's `FrameStackObservation`:
    /// the last `frame_stack` frames, oldest first, the first frame of an
    /// episode filling every place). The env gives single frames; actors
    /// send only each step's newest, and the learner keeps each env's
    /// stack. 1: the env's observations as they are.
    #[serde(default = "one")]
    #[schema(minimum = 1, maximum = 16)]
    pub frame_stack: u32,
    /// Ranks one environment instance spans (EXARL's `process_per_env`):
    /// the actor ranks of an MPI job form groups of this many consecutive
    /// ranks; each group's first rank is the actor, and every rank of the
    /// group builds the env (with the group's communicator) and steps it
    /// together. Every `actor-client mpi` must be given the same
    /// `--ranks-per-env`. 1: each actor rank runs whole envs.
    #[serde(default = "one")]
    #[schema(minimum = 1, maximum = 4096)]
    pub ranks_per_env: u32,
    /// Where the run writes its resolved config, episodes, checkpoint and
    /// plots. Relative paths are relative to the working directory.
    #[schema(value_type = String)]
    pub output_dir: PathBuf,
    /// Where a run waits when the daemon is at `[runs] max_active`: the
    /// highest priority starts first, then the earliest submitted.
    #[serde(default)]
    pub priority: i64,
    #[serde(default)]
    pub stop: StopConfig,
    #[serde(default)]
    pub eval: EvalConfig,
    #[serde(default)]
    pub checkpoint: CheckpointConfig,
    /// Parameters of the actor/learner workflows.
    #[serde(default)]
    pub distributed: DistributedConfig,
    /// The run's share of a daemon's actors while other runs are active.
    #[serde(default)]
    pub fleet: FleetConfig,
    /// Hyperparameters of the `dqn` agent (its `hidden` widths also shape
    /// the `probe` agent's network).
    #[serde(default)]
    pub dqn: DqnConfig,
    /// The `probe` agent.
    #[serde(default)]
    pub probe: ProbeConfig,
    /// Hyperparameters of the `a2c` agent.
    #[serde(default)]
    pub a2c: A2cConfig,
    /// Hyperparameters of the `ppo` agent.
    #[serde(default)]
    pub ppo: PpoConfig,
    /// Hyperparameters of the `impala` agent.
    #[serde(default)]
    pub impala: ImpalaConfig,
    /// Hyperparameters of the `r2d2` agent.
    #[serde(default)]
    pub r2d2: R2d2Config,
    /// Hyperparameters of the `ddpg` agent.
    #[serde(default)]
    pub ddpg: DdpgConfig,
    /// Hyperparameters of the `td3` agent.
    #[serde(default)]
    pub td3: Td3Config,
    /// Hyperparameters of the `sac` agent.
    #[serde(default)]
    pub sac: SacConfig,
    /// The network's torso (a CNN for image observations), before the
    /// agent's `hidden` layers.
    #[serde(default)]
    pub model: ModelConfig,
}

impl RunConfig {
    /// Reads, parses and validates a config file.
    pub fn load(path: &Path) -> Result<RunConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut cfg: RunConfig = from_toml_keyed(&text).map_err(|message| ConfigError::Parse {
            origin: path.display().to_string(),
            message,
        })?;
        // python_path entries are relative to the file's folder.
        let folder = path.parent().unwrap_or(Path::new("."));
        for p in &mut cfg.python_path {
            if p.is_relative() {
                *p = folder.join(&*p);
            }
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parses and validates config text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<RunConfig, ConfigError> {
        let cfg: RunConfig = from_toml_keyed(text).map_err(|message| ConfigError::Parse {
            origin: origin.to_string(),
            message,
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Hidden layer widths of the network that picks actions (what actors
    /// and the inference front run).
    pub fn policy_hidden(&self) -> &[u32] {
        match self.agent {
            AgentKind::A2c => &self.a2c.hidden,
            AgentKind::Ppo => &self.ppo.hidden,
            AgentKind::Impala => &self.impala.hidden,
            AgentKind::R2d2 => &self.r2d2.hidden,
            AgentKind::Ddpg => &self.ddpg.hidden,
            AgentKind::Td3 => &self.td3.hidden,
            AgentKind::Sac => &self.sac.hidden,
            AgentKind::Dqn | AgentKind::Probe => &self.dqn.hidden,
        }
    }

    /// The convolutional torso of the agent's networks for observations of
    /// `spec` (`None`: an MLP reads the observation). Panics on a config
    /// that [`RunConfig::validate`] refuses for that env.
    pub fn torso(&self, spec: &crate::env::EnvSpec) -> Option<crate::nets::ConvTorso> {
        self.model
            .torso_for(spec)
            .expect("the model table is validated against the env")
    }

    /// The policy network's parts before its head (what the evaluator and
    /// the inference front build their policy from).
    pub fn policy_net(&self, spec: &crate::env::EnvSpec) -> crate::nets::Net<'_> {
        crate::nets::Net {
            torso: self.torso(spec),
            hidden: self.policy_hidden(),
            core: self.model.core(),
        }
    }

    /// The network that picks actions (what actors, the inference front
    /// and the evaluator run), with `outputs` outputs.
    pub fn policy_shape(
        &self,
        spec: &crate::env::EnvSpec,
        outputs: usize,
    ) -> crate::nets::NetShape {
        crate::nets::NetShape::with_torso(
            self.torso(spec),
            spec.obs_dim(),
            self.policy_hidden(),
            outputs,
        )
        .with_core(self.model.core())
    }

    /// The chance of a random action at each evaluation step:
    /// `eval.epsilon`, or for `r2d2` at least `r2d2.eval_epsilon`.
    pub fn eval_epsilon(&self) -> f64 {
        match self.agent {
            AgentKind::R2d2 => self.eval.epsilon.max(self.r2d2.eval_epsilon),
            _ => self.eval.epsilon,
        }
    }

    /// The published Q-network has a dueling head.
    pub fn dueling(&self) -> bool {
        self.agent == AgentKind::Dqn && self.dqn.dueling
    }

    /// Items one gradient step samples, as `orchestrated`'s rate limiter
    /// counts them (`None`: the agent does not train from replay).
    pub fn items_per_sample(&self) -> Option<u64> {
        match self.agent {
            AgentKind::Dqn => Some(u64::from(self.dqn.batch_size)),
            AgentKind::R2d2 => Some(u64::from(self.r2d2.batch_size)),
            AgentKind::Probe => Some(1),
            AgentKind::Ddpg => Some(u64::from(self.ddpg.batch_size)),
            AgentKind::Td3 => Some(u64::from(self.td3.batch_size)),
            AgentKind::Sac => Some(u64::from(self.sac.batch_size)),
            AgentKind::A2c | AgentKind::Ppo | AgentKind::Impala => None,
        }
    }

    /// Where the run's environment comes from, with its Python options
    /// (relative `python_path` entries made absolute against the working
    /// directory).
    pub fn env_source(&self) -> EnvSource {
        let cwd = std::env::current_dir().unwrap_or_default();
        EnvSource {
            id: self.env.clone(),
            kwargs_json: if self.env_kwargs.is_empty() {
                String::new()
            } else {
                serde_json::to_string(&self.env_kwargs).expect("JSON values serialise")
            },
            wrappers: self.env_wrappers.clone(),
            python_path: self
                .python_path
                .iter()
                .map(|p| cwd.join(p).to_string_lossy().into_owned())
                .collect(),
            frame_stack: self.frame_stack,
        }
    }

    /// The run's output directory.
    pub fn output_dir(&self) -> PathBuf {
        self.output_dir.clone()
    }
}

#[cfg(test)]
mod tests;

/// `frame_stack`'s default: no stacking.
fn one() -> u32 {
    1
}

/// The schema of one width in a `hidden` list (what `validate` requires;
/// the field says the list holds 1 to 8 of them).
pub(crate) struct HiddenWidth;

impl utoipa::PartialSchema for HiddenWidth {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(1))
            .maximum(Some(65_536))
            .into()
    }
}

impl utoipa::ToSchema for HiddenWidth {}

/// The schema of `env`: a built-in id, `gymnasium:ID` or
/// `python:module:attr` (whether a Gymnasium id or Python object exists is
/// the server's to find out).
pub(crate) struct EnvId;

impl utoipa::PartialSchema for EnvId {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let builtin: Vec<String> = crate::env::ENV_IDS
            .iter()
            .map(|id| id.replace('.', "\\."))
            .collect();
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(format!(
                "^({}|gymnasium:[^:]+|python:[^:]+:[^:]+)$",
                builtin.join("|")
            )))
            .into()
    }
}

impl utoipa::ToSchema for EnvId {}
