//! The numeric kernels: every hand-written vector pass on the CPU and the
//! BLAS it falls back to, behind safe functions, with [`cpu`] the one
//! place that decides which CPU features (AVX2, AVX-512) they may use.
//!
//! - [`cpu`]: the features detected once per process; setting
//!   `RLFLEET_PORTABLE_KERNELS=1` sends every kernel down its portable path
//!   (the test command runs the kernels' tests both ways).
//! - [`gemm_avx512`]: matrix products of a small network's layers in
//!   AVX-512; [`blas`]: the BLAS a loaded library carries (`sgemm_`).
//! - [`dense`]: a fully connected layer laid out for the actors' plain-Rust
//!   forward pass (AVX2 + FMA).
//! - [`norm`], [`rmsprop`]: a gradient's norm and an RMSprop step over
//!   host memory.
//!
//! This crate holds the numerics' `unsafe` (intrinsics, the one FFI call
//! to BLAS); nothing here depends on libtorch or on another crate of the
//! workspace.

pub mod blas;
pub mod conv;
pub mod cpu;
pub mod dense;
#[cfg(target_arch = "x86_64")]
pub mod gemm_avx512;
pub mod norm;
pub mod rmsprop;
