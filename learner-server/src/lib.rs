//! The rlfleet learner: agents (tch), replay, checkpoints, workflows, the
//! daemon (`learner-server serve`) with its QUIC actor transport and HTTP
//! control API, and the embedded run (`learner-server run`).
//!
//! Layout:
//! - [`device`]: CPU or CUDA, and libtorch's thread settings.
//! - [`nets`]: networks stored as one flat parameter tensor.
//! - [`agents`]: the [`agents::Agent`] trait and its algorithms (DQN).
//! - [`replay`]: experience storage (uniform ring).
//! - [`checkpoint`]: atomic save/load of agent state and counters.
//! - [`workflows`]: how acting, training and evaluation are arranged
//!   (`single` now; the distributed ones build on the same pieces).
//! - [`output`]: what a run leaves on disk (resolved config, CSVs, plot).
//! - [`transport`]: actors' messages as events for the active run (QUIC).
//! - [`hub`]: the registry of runs and actors the daemon and API share.
//! - [`api`]: the axum control API and its OpenAPI document.
//! - [`metrics`]: Prometheus metrics.
//! - [`daemon`], [`embedded`]: `serve` and `run --local-actors N`.
//! - [`server_config`]: the daemon's `server.toml`.
//!
//! The binary (`src/main.rs`) only parses flags, sets up logging and calls
//! into this library, so tests drive the same code.

pub mod agents;
pub mod api;
pub mod checkpoint;
pub mod daemon;
pub mod device;
pub mod embedded;
pub mod export;
pub mod hub;
pub mod metrics;
#[cfg(feature = "mpi")]
pub mod mpi_run;
pub mod nets;
pub mod output;
pub mod replay;
pub mod server_config;
pub mod transport;
pub mod workflows;
