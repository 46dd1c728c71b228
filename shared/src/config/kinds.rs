//! The names a run config chooses among: agents, workflows, transports.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The learner-side algorithm (also on the wire, in `Welcome`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum AgentKind {
    Dqn,
    /// Advantage actor-critic (on-policy; trains on finished episodes).
    A2c,
    /// Proximal policy optimisation (on-policy; discrete or continuous).
    Ppo,
    /// IMPALA: an actor-critic trained on unrolls with V-trace targets,
    /// which correct for the policy lag of the steps it is given
    /// (discrete actions).
    Impala,
    /// R2D2: a recurrent Q-network trained on replayed sequences with
    /// burn-in, n-step double-Q targets under value rescaling, and
    /// sequence priorities (discrete actions; needs a recurrent core).
    R2d2,
    /// Deterministic policy gradient (off-policy; continuous actions).
    Ddpg,
    /// Twin delayed DDPG (off-policy; continuous actions).
    Td3,
    /// Soft actor-critic (off-policy; continuous actions).
    Sac,
    /// Trains nothing: records every transition it is given to `probe.csv`
    /// and bumps its policy version on a schedule (workflow conformance
    /// tests).
    Probe,
}

impl AgentKind {
    /// The agent's published network gives logits that actors sample from
    /// (rather than Q-values they act epsilon-greedily on).
    pub fn samples_softmax(self) -> bool {
        matches!(self, AgentKind::A2c | AgentKind::Ppo | AgentKind::Impala)
    }

    /// The agent only acts in continuous action spaces.
    pub fn needs_continuous(self) -> bool {
        matches!(self, AgentKind::Ddpg | AgentKind::Td3 | AgentKind::Sac)
    }

    /// The agent can act in continuous action spaces.
    pub fn handles_continuous(self) -> bool {
        self.needs_continuous() || self == AgentKind::Ppo
    }
}

/// How actors and learners cooperate (the manual's [Which workflow](workflows.md); also
/// on the wire, in `Welcome`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum WorkflowKind {
    Single,
    Sync,
    Async,
    AsyncWindow,
    NbAsync,
    Rma,
    RmaQueuePopAll,
    Random,
    Seed,
    SeedA2c,
    MlAsync,
    MlRma,
    MlRmaQueue,
    MlRmaQueueShort,
    Orchestrated,
}

impl WorkflowKind {
    /// Workflows this build can run.
    pub const IMPLEMENTED: &[WorkflowKind] = &[
        WorkflowKind::Single,
        WorkflowKind::Async,
        WorkflowKind::Sync,
        WorkflowKind::Seed,
        WorkflowKind::NbAsync,
        WorkflowKind::AsyncWindow,
        WorkflowKind::Rma,
        WorkflowKind::RmaQueuePopAll,
        WorkflowKind::Random,
        WorkflowKind::SeedA2c,
        WorkflowKind::Orchestrated,
        WorkflowKind::MlAsync,
        WorkflowKind::MlRma,
        WorkflowKind::MlRmaQueue,
        WorkflowKind::MlRmaQueueShort,
    ];

    /// Workflows that end when every episode id has been handed out and
    /// finished (they need `stop.max_episodes`).
    pub fn ends_on_episodes(self) -> bool {
        matches!(
            self,
            WorkflowKind::Async
                | WorkflowKind::MlAsync
                | WorkflowKind::NbAsync
                | WorkflowKind::Rma
                | WorkflowKind::RmaQueuePopAll
                | WorkflowKind::Random
                | WorkflowKind::MlRma
                | WorkflowKind::MlRmaQueue
                | WorkflowKind::MlRmaQueueShort
        )
    }

    /// Several learner ranks train one model data-parallel (MPI).
    pub fn is_multi_learner(self) -> bool {
        matches!(
            self,
            WorkflowKind::MlAsync
                | WorkflowKind::MlRma
                | WorkflowKind::MlRmaQueue
                | WorkflowKind::MlRmaQueueShort
        )
    }

    /// Lossless queues that the run drains before it ends: it waits for
    /// every actor's end sentinel and empty pools (`ml-rma-queue-short`
    /// may end sooner, on a group).
    pub fn ends_on_sentinels(self) -> bool {
        matches!(
            self,
            WorkflowKind::RmaQueuePopAll | WorkflowKind::MlRmaQueue | WorkflowKind::MlRmaQueueShort
        )
    }

    /// Actors deposit their batches into pools on the learner (one-sided
    /// over MPI) rather than send them as requests.
    pub fn deposits(self) -> bool {
        matches!(
            self,
            WorkflowKind::Rma
                | WorkflowKind::RmaQueuePopAll
                | WorkflowKind::MlRma
                | WorkflowKind::MlRmaQueue
                | WorkflowKind::MlRmaQueueShort
        )
    }

    /// Actors send `Experience` (rather than observations for central
    /// inference).
    pub fn sends_experience(self) -> bool {
        self.is_distributed() && !matches!(self, WorkflowKind::Seed | WorkflowKind::SeedA2c)
    }

    /// Actors feed the learner over a transport.
    pub fn is_distributed(self) -> bool {
        self != WorkflowKind::Single
    }
}

/// How experience and weights travel between actors and the learner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    #[default]
    Inproc,
    Quic,
    Mpi,
}

/// How a run with `transport = "mpi"` is started (MPMD: learner ranks,
/// then actor ranks).
pub const MPI_LAUNCH: &str = "mpirun -n 1 learner-server mpi RUN.toml : -n ACTORS actor-client mpi";

/// The config spelling of a kind (its serde name).
fn config_name<T: Serialize>(v: &T) -> String {
    // A unit variant serialises as its kebab-case name.
    toml::Value::try_from(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

macro_rules! display_by_config_name {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&config_name(self))
            }
        }
    )*};
}

display_by_config_name!(AgentKind, WorkflowKind, TransportKind);
