//! The rlfleet learner daemon: it holds runs (`rlfleet-run`) and lets
//! actors reach them — the QUIC, in-process and MPI transports, the actor
//! registry, the HTTP control API, `learner-server serve`, the embedded
//! run (`learner-server run`) and the MPI learner rank.
//!
//! Layout:
//! - [`malloc`]: the C allocator's thresholds, set at the binaries' start.
//! - [`server_config`]: the daemon's `server.toml`.
//! - [`registry`]: the actors connected to the daemon and the run they are
//!   routed to.
//! - [`hub`]: the daemon's runs: started, recorded, resumed, ended.
//! - [`studies`]: sweeps and population-based training, driven through
//!   the hub's runs.
//! - [`transport`]: what carries actors' messages (QUIC, in-process
//!   channels, MPI ranks) to the active run's `rlfleet_run::vocab::Intake`.
//! - [`api`]: the axum control API and its OpenAPI document.
//! - [`daemon`], [`embedded`], [`embedded_study`]: `serve`, `run
//!   --local-actors N`, and `sweep`/`pbt` (a study with local actors);
//!   `mpi_run` (feature `mpi`): `learner-server mpi`, the learner rank.
//! - [`export`]: `learner-server export`, a policy as an ONNX model.
//! - [`reference`]: the config reference in `docs/`, generated from the
//!   config schemas.
//!
//! Below it: `rlfleet-run` (workflows, books, state directory, metrics),
//! `rlfleet-learning` (networks, agents, device), `rlfleet-replay`,
//! `rlfleet-output`, `rlfleet-checkpoint`, `rlfleet-quic`,
//! `rlfleet-shared`, `rlfleet-kernels`.
//!
//! The binary (`src/main.rs`) only parses flags, sets up logging and calls
//! into this library, so tests drive the same code.

pub mod api;
pub mod client;
pub mod daemon;
pub mod embedded;
pub mod embedded_study;
pub mod export;
pub mod fleet;
pub mod hub;
pub mod malloc;
#[cfg(feature = "mpi")]
pub mod mpi_run;
pub mod reference;
pub mod registry;
pub mod run_command;
pub mod server_config;
pub mod studies;
pub mod transport;
