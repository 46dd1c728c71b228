//! rlfleet's cross-crate integration suite: one test binary, a module per
//! area. Helpers are in the `rlfleet_tests` library (`tests/support/`).

mod env_parity;
