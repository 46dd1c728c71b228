//! What the learner and the actors share: the run config schema and its
//! validation, the environment trait with the built-in environments, and
//! observation/action spaces.
//!
//! Layout:
//! - [`config`]: the TOML run config, parsed in two stages (raw serde form,
//!   then validated ranges and cross-field rules).
//! - [`env`]: the [`env::Env`] trait, spaces, the Gymnasium-exact classic
//!   control environments and the deterministic counting env.
//!
//! This crate never links libtorch: actor processes depend on it alone.

pub mod config;
pub mod env;
