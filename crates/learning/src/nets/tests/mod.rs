//! Tests of what the networks run on: the kernels against libtorch.

mod conv;
mod gemm;
