//! Learning-to-target tests: real networks trained until they reach a
//! return (or what a reference reaches at the same frames). They are the
//! slow part of the suite; select them with `cargo test … learn::` and
//! leave them out with `-- --skip learn::` (`scripts/test.sh --quick`
//! runs none of them). Learning tests that belong to another area (MPI,
//! ONNX Runtime actors, Python envs) sit there in a `learn` module of
//! their own, so the same filter finds them.

mod agents;
mod many_runs;
mod memory_task;
mod minatar;
mod single_dqn;
mod workflows;
