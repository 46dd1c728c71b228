//! rlfleet's cross-crate integration suite: one test binary, a module per
//! area. Helpers are in the `rlfleet_tests` library (`tests/support/`).

mod bad_config;
mod env_parity;
mod resume;
mod single_dqn;
