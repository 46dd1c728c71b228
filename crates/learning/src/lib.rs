//! rlfleet's learning: networks over one flat parameter tensor, the agents
//! that train them (tch), and the device they train on.
//!
//! Layout:
//! - [`device`]: CPU or CUDA, libtorch's thread settings, host slices to
//!   and from the device.
//! - [`nets`]: networks stored as one flat parameter tensor, with the
//!   CPU's hand-written passes.
//! - [`agents`]: the [`agents::Agent`] trait and its algorithms (DQN —
//!   double, dueling, n-step, prioritized — A2C, PPO, IMPALA, R2D2, DDPG,
//!   TD3, SAC, the data-parallel lead of the `ml-*` workflows, and the
//!   conformance suite's probe).
//!
//! It knows no workflow, transport or daemon: the run (`learner-server`)
//! hands it transitions and asks for weights.

pub mod agents;
pub mod device;
pub mod nets;
