//! The run config's `[distributed]` table: parameters of the workflows in
//! which actors feed the learner over a transport.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What each actor's pool on the learner is (`rma`), as in EXARL's RMA
/// data structures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DataStructure {
    /// One slot, read without consuming: the learner takes the latest batch
    /// and a batch it has already trained on is skipped; a deposit over an
    /// unread batch overwrites it (counted `overwritten`).
    BuffUnchecked,
    /// One slot, consumed when read; a deposit over an unread batch
    /// overwrites it (counted `overwritten`).
    BuffChecked,
    /// A FIFO ring of `data_structure_length` batches.
    Queue,
    /// A LIFO ring of `data_structure_length` batches (newest first).
    Stack,
}

/// What a deposit into a full `queue`/`stack` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Overflow {
    /// The oldest batch in the pool is dropped (counted `overflow`).
    DropOldest,
    /// The deposit is refused and the actor sends it again (lossless).
    Reject,
}

/// `ml-rma`: which actor pool each learner takes its next batch from
/// (EXARL mlrma_v1's `rma_window_selector`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WindowSelector {
    /// A pool drawn at random (seeded by the run's seed) among those
    /// holding a batch; two learners may draw the same one.
    #[default]
    Random,
    /// Each learner owns a contiguous range of actors and takes from its
    /// own range, in turn.
    Bin,
}

/// What runs the `seed` front's forward passes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SeedInference {
    /// `device` for a convolutional network or one of more than
    /// [`SeedInference::DEVICE_ABOVE`] parameters, `cpu` otherwise.
    #[default]
    Auto,
    /// A plain-Rust copy of the network on the CPU (no libtorch call: the
    /// fastest for small MLPs).
    Cpu,
    /// libtorch on the learner's device (CUDA when there is one), one
    /// forward pass per batch, over its own copy of the weights.
    Device,
}

impl SeedInference {
    /// Parameters above which `auto` infers on the device.
    pub const DEVICE_ABOVE: usize = 1 << 18;

    /// Whether a network with `params` parameters (and a convolutional
    /// torso or not) infers on the device.
    pub fn on_device(self, params: usize, conv: bool) -> bool {
        match self {
            SeedInference::Auto => conv || params > Self::DEVICE_ABOVE,
            SeedInference::Cpu => false,
            SeedInference::Device => true,
        }
    }
}

/// Parameters of the workflows in which actors feed the learner: batching,
/// acting ahead, pools, inference, policy lag and rate limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DistributedConfig {
    /// `async`: an actor sends a batch every this many steps of its
    /// environments, or as soon as one of its episodes ends.
    #[schema(minimum = 1, maximum = 1000000)]
    pub batch_step_frequency: u32,
    /// `sync`: steps every actor runs (on each of its envs) per round.
    #[schema(minimum = 1, maximum = 1000000)]
    pub steps_per_round: u32,
    /// `seed`: run inference once this many environments are waiting...
    #[schema(minimum = 1, maximum = 65536)]
    pub inference_max_batch: u32,
    /// ...or once the oldest request has waited this long (µs; the front's
    /// timer has millisecond resolution), whichever comes first; and at once
    /// when every connected actor is waiting, so a lone actor is never kept
    /// waiting for a full batch.
    #[schema(maximum = 10000000)]
    pub inference_max_wait_us: u64,
    /// What runs the inference front's forward passes.
    pub seed_inference: SeedInference,
    /// `seed`, `seed-a2c`: inference batches the front may answer before
    /// the run has ingested and trained on them. 2 keeps acting within a
    /// batch or two of training; more lets the actors go on stepping
    /// while the learner trains (SEED RL's actors never wait for
    /// training), acting with weights up to that many batches old: DQN
    /// and R2D2 learn off-policy, and PPO and IMPALA compute their
    /// behaviour log-probabilities under the weights that acted.
    #[schema(minimum = 1, maximum = 1024)]
    pub max_batches_ahead: u32,
    /// Drop (and count) experience produced by weights more than this many
    /// versions old. Unset: no bound.
    pub max_policy_lag: Option<u64>,
    /// Most environments one actor may run (it asks for its capacity).
    #[schema(minimum = 1, maximum = 4096)]
    pub max_envs_per_actor: u32,
    /// An env `reset` or `step` on an actor that takes longer than this
    /// (a hung simulator) is reported as an env fault: the episode goes
    /// back to the learner and the env is rebuilt. Each env then runs on a
    /// thread of its own. 0: no limit.
    #[schema(minimum = 0, maximum = 86400)]
    pub env_step_timeout_secs: f64,
    /// The run fails when its envs raise this many times in a row with no
    /// episode finished in between (an env that cannot reset on any actor),
    /// naming the last error, instead of handing its episodes out for ever.
    #[schema(minimum = 1)]
    pub max_env_errors_in_a_row: u32,
    /// `nb-async`, `async-window`, `rma*`: batches an actor may have sent
    /// without seeing them acknowledged (it keeps playing meanwhile).
    #[schema(minimum = 1, maximum = 32)]
    pub in_flight: u32,
    /// `async-window`: the learner collects the batches that arrive within
    /// this many milliseconds, trains on them together and answers them.
    #[schema(minimum = 1, maximum = 60000)]
    pub window_ms: u64,
    /// `rma`: each actor's pool on the learner.
    pub data_structure: DataStructure,
    /// `rma` with `queue`/`stack`, `rma-queue-pop-all`: batches per pool.
    #[schema(minimum = 1, maximum = 65536)]
    pub data_structure_length: u32,
    /// `rma` with `queue`/`stack`: what a deposit into a full pool does
    /// (`rma-queue-pop-all` always rejects: it is lossless).
    pub overflow: Overflow,
    /// `ml-rma`: how each learner picks the actor pool it takes from.
    pub window_selector: WindowSelector,
    /// `random`: act greedily with the best evaluated weights of this
    /// checkpoint (its latest when it has none) instead of uniformly random
    /// actions.
    #[schema(value_type = Option<String>)]
    pub fixed_policy: Option<PathBuf>,
    /// `orchestrated`: items sampled for training per transition inserted
    /// (a gradient step on a batch of 64 samples 64)...
    pub samples_per_insert: f64,
    /// ...once this many transitions were inserted...
    pub min_size_to_sample: u64,
    /// ...kept within this many items of the ratio: inserts wait while
    /// training is behind, training waits while it is ahead. Below one
    /// sample step (half the batch size) it could stall, and is refused.
    pub error_buffer: f64,
    /// Write `batches.csv` in the output directory: one line per batch
    /// received, with its key, policy version, the learner's version and
    /// what became of it (an audit log; the conformance suite reads it).
    pub batch_log: bool,
}

impl Default for DistributedConfig {
    fn default() -> Self {
        DistributedConfig {
            batch_step_frequency: 16,
            steps_per_round: 16,
            inference_max_batch: 64,
            inference_max_wait_us: 500,
            seed_inference: SeedInference::Auto,
            max_batches_ahead: 2,
            max_policy_lag: None,
            max_envs_per_actor: 64,
            env_step_timeout_secs: 0.0,
            max_env_errors_in_a_row: 100,
            in_flight: 4,
            window_ms: 20,
            data_structure: DataStructure::Queue,
            data_structure_length: 32,
            overflow: Overflow::DropOldest,
            window_selector: WindowSelector::Random,
            fixed_policy: None,
            samples_per_insert: 32.0,
            min_size_to_sample: 1_000,
            error_buffer: 640.0,
            batch_log: false,
        }
    }
}
