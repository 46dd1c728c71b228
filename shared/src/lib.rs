//! What the learner and the actors share: the run config schema and its
//! validation, the environment trait with the built-in environments, and
//! observation/action spaces.
//!
//! Layout:
//! - [`config`]: the TOML run config, parsed in two stages (raw serde form,
//!   then validated ranges and cross-field rules).
//! - [`env`]: the [`env::Env`] trait, spaces, the Gymnasium-exact classic
//!   control environments and the deterministic counting env.
//! - [`wire`]: the actor/learner protocol (rkyv messages in validated,
//!   length-prefixed frames).
//! - [`nets`]: the plain-Rust MLP forward pass that acts from weights.
//! - [`policy`]: the actors' policies over that network (epsilon-greedy Q,
//!   sampled logits, the continuous heads) and `ActorPolicy`, built from a
//!   `Welcome`.
//! - [`onnx`]: a policy network written as an ONNX model.
//! - `mpi` (feature `mpi`): rank layout, owned non-blocking sends, RMA
//!   windows and the `rma` mailboxes.
//!
//! This crate never links libtorch: actor processes depend on it alone.

pub mod config;
pub mod env;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod nets;
pub mod onnx;
pub mod policy;
pub mod wire;
