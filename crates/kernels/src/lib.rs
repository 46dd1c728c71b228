//! The numeric kernels: every hand-written vector pass on the CPU and the
//! products it leaves to `matrixmultiply`, behind safe functions, with
//! [`cpu`] the one place that decides which CPU features (AVX2, AVX-512)
//! they may use.
//!
//! - [`cpu`]: the features detected once per process; setting
//!   `RLFLEET_PORTABLE_KERNELS=1` sends every kernel down its portable path
//!   (the test command runs the kernels' tests both ways).
//! - [`gemm`]: a network's matrix products, each where it was measured
//!   fastest: [`gemm_avx512`]'s loops or the `matrixmultiply` crate.
//! - [`conv`]: a network's first convolution, dense and over sparse
//!   planes.
//! - [`dense`]: a fully connected layer laid out for the actors' plain-Rust
//!   forward pass (AVX2 + FMA).
//! - [`norm`], [`rmsprop`]: a gradient's norm and an RMSprop step over
//!   host memory.
//!
//! This crate holds the numerics' `unsafe` (intrinsics, the call into
//! `matrixmultiply`); nothing here depends on libtorch or on another crate
//! of the workspace.

pub mod conv;
pub mod cpu;
pub mod dense;
pub mod gemm;
#[cfg(target_arch = "x86_64")]
pub mod gemm_avx512;
pub mod norm;
pub mod rmsprop;
