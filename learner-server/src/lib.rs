//! The rlfleet learner: agents (tch), replay, checkpoints, workflows, and the
//! embedded run (`learner-server run`).
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
//!
//! The binary (`src/main.rs`) only parses flags, sets up logging and calls
//! into this library, so tests drive the same code.

pub mod agents;
pub mod checkpoint;
pub mod device;
pub mod nets;
pub mod output;
pub mod replay;
pub mod workflows;
