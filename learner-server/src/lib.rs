//! The rlfleet learner: agents (tch), checkpoints, workflows, the
//! daemon (`learner-server serve`) with its QUIC actor transport and HTTP
//! control API, and the embedded run (`learner-server run`).
//!
//! Layout:
//! - [`device`]: CPU or CUDA, and libtorch's thread settings.
//! - [`nets`]: networks stored as one flat parameter tensor.
//! - [`agents`]: the [`agents::Agent`] trait and its algorithms (DQN —
//!   double, dueling, n-step, prioritized — A2C, PPO, DDPG, TD3, SAC, the
//!   data-parallel lead of the `ml-*` workflows, and the conformance
//!   suite's probe).
//! - replay: experience storage is the `rlfleet-replay` crate (no
//!   libtorch, no clock).
//! - checkpoints: the file format is the `rlfleet-checkpoint` crate (no
//!   libtorch); [`state`] keeps a run's checkpoints in the state directory.
//! - [`workflows`]: how acting, training and evaluation are arranged:
//!   `single` in one process, every distributed workflow as a
//!   [`workflows::remote::RemoteRun`] over a shared core.
//! - [`output`]: what a run leaves on disk (resolved config, CSVs, plot).
//! - [`transport`]: what carries actors' messages (QUIC, in-process
//!   channels, MPI ranks) to the active run's [`vocab::Intake`].
//! - [`hub`]: the registry of runs and actors the daemon and API share.
//! - [`api`]: the axum control API and its OpenAPI document.
//! - [`metrics`]: Prometheus metrics.
//! - [`daemon`], [`embedded`]: `serve` and `run --local-actors N`;
//!   `mpi_run` (feature `mpi`): `learner-server mpi`, the learner rank.
//! - [`export`]: `learner-server export`, a policy as an ONNX model.
//! - [`server_config`]: the daemon's `server.toml`.
//! - [`notify`]: systemd's readiness, status and watchdog notifications.
//!
//! The binary (`src/main.rs`) only parses flags, sets up logging and calls
//! into this library, so tests drive the same code.

pub mod agents;
pub mod api;
pub mod daemon;
pub mod device;
pub mod embedded;
pub mod export;
pub mod hub;
pub mod malloc;
pub mod metrics;
#[cfg(feature = "mpi")]
pub mod mpi_run;
pub mod nets;
pub mod notify;
pub mod output;
pub mod registry;
pub mod server_config;
pub mod state;
pub mod transport;
pub mod vocab;
pub mod workflows;
