//! One training run, whatever carries its actors' messages: the workflows
//! (`single` in one process, every distributed workflow as a driver over
//! sans-IO families), the bookkeeping they share, the state directory that
//! makes a run durable, and what a run reports.
//!
//! Layout:
//! - [`notify`]: systemd's readiness, status and watchdog notifications.
//! - [`turns`]: the learner's device shared by runs, in turns by weight.
//! - [`state`]: the state directory: run records, checkpoints, the
//!   received-batch journal.
//! - [`vocab`]: what every layer above the run's state shares — connection
//!   ids, the [`vocab::Intake`] transports hand messages to, drop reasons,
//!   the API's views.
//! - [`metrics`]: Prometheus metrics.
//! - [`workflows`]: the workflows, the run book and the run core.
//!
//! It knows no socket, no HTTP and no MPI call: the daemon
//! (`learner-server`) binds those and hands a run its messages through the
//! `Intake`.

pub mod metrics;
pub mod notify;
pub mod state;
pub mod turns;
pub mod vocab;
pub mod workflows;
