//! The numeric kernels' common ground: [`cpu`], the one place that decides
//! which CPU features the hand-written passes (AVX2, AVX-512) may use.
//!
//! Every kernel asks [`cpu::features`] before it calls a `target_feature`
//! function, so setting `RLFLEET_PORTABLE_KERNELS=1` sends every one of
//! them down its portable path (the test command runs the kernels' tests
//! both ways).

pub mod cpu;
