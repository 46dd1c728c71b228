//! `rlfleet-bench products`: the matrix products of the networks the
//! benchmarks train on the CPU, each shape through every implementation
//! at hand — what the learner runs (`rlfleet_kernels::gemm`), the
//! hand-written AVX-512 loops alone (where the CPU has AVX-512 and the
//! shape suits them), the `matrixmultiply` crate alone (pure Rust, BLIS's
//! micro-kernels) and libtorch's `mm` into a given output (MKL inside; the
//! baseline) — as time per product and as ratios. One thread.
//!
//! The shapes are the layers' three products (forward `x · Wᵀ`, input
//! gradient `d · W`, weight gradient `dᵀ · x`): CartPole's 4 → 64 → 64 → 2
//! MLP at batch 64 and 256 (`rlfleet-bench dqn`), MinAtar DQN's 1,024 →
//! 128 → 6 head at batch 32 (the reference benchmark), and wider layers
//! (128 to 512) to show where the choices cross.

use crate::measure::{rate, write_json};
use serde::Serialize;
use std::path::Path;
use tch::{Device, Kind, Tensor};

#[derive(Debug, Serialize)]
pub struct ProductRow {
    net: &'static str,
    product: &'static str,
    m: usize,
    n: usize,
    k: usize,
    /// Microseconds per product: what the learner runs.
    learner_us: f64,
    /// The hand-written loops alone (`None`: they decline this shape or
    /// this CPU).
    kernels_us: Option<f64>,
    matrixmultiply_us: f64,
    libtorch_us: f64,
    /// libtorch's time over the learner's (> 1: the learner is faster).
    learner_speedup_vs_libtorch: f64,
    /// `matrixmultiply`'s time over the loops' (> 1: the loops win).
    matrixmultiply_vs_kernels: Option<f64>,
}

/// One product: its name, `(m, n, k)`, and whether `a` and `b` are
/// stored transposed.
type Product = (&'static str, (usize, usize, usize), bool, bool);

/// A network: its name, the batch, its layers' `(fan_in, fan_out)`.
type Net = (&'static str, usize, &'static [(usize, usize)]);

/// One layer's products, for a layer `out × in` at `batch`.
fn layer(batch: usize, fan_in: usize, fan_out: usize) -> [Product; 3] {
    [
        ("forward x·Wᵀ", (batch, fan_out, fan_in), false, true),
        ("input grad d·W", (batch, fan_in, fan_out), false, false),
        ("weight grad dᵀ·x", (fan_out, fan_in, batch), true, false),
    ]
}

pub fn bench(secs: f64, out: &Path) -> anyhow::Result<()> {
    tch::set_num_threads(1);
    let nets: [Net; 5] = [
        ("CartPole b64", 64, &[(4, 64), (64, 64), (64, 2)]),
        ("CartPole b256", 256, &[(4, 64), (64, 64), (64, 2)]),
        ("MinAtar b32", 32, &[(1024, 128), (128, 6)]),
        ("wider b64", 64, &[(128, 128), (256, 256)]),
        ("wider b32", 32, &[(512, 512), (64, 256)]),
    ];
    let mut rows = Vec::new();
    for (net, batch, layers) in nets {
        for &(fan_in, fan_out) in layers {
            for (product, (m, n, k), a_t, b_t) in layer(batch, fan_in, fan_out) {
                if product.starts_with("input") && fan_in == 4 {
                    continue; // the first layer's input gradient is never taken
                }
                rows.push(measure(secs, net, product, (m, n, k), a_t, b_t));
            }
        }
    }
    for r in &rows {
        let fmt = |v: Option<f64>| v.map_or("    —".into(), |v| format!("{v:>5.2}"));
        println!(
            "{:<14} {:<17} {:>4}x{:>4}x{:>4}: learner {:>7.2} us ({:>5.2}x libtorch)  kernels {:>8} us  matrixmultiply {:>7.2} us ({}x kernels)  libtorch {:>7.2} us",
            r.net,
            r.product,
            r.m,
            r.n,
            r.k,
            r.learner_us,
            r.learner_speedup_vs_libtorch,
            r.kernels_us.map_or("—".into(), |v| format!("{v:.2}")),
            r.matrixmultiply_us,
            fmt(r.matrixmultiply_vs_kernels),
            r.libtorch_us,
        );
    }
    write_json(out, "products", &rows)
}

fn measure(
    secs: f64,
    net: &'static str,
    product: &'static str,
    (m, n, k): (usize, usize, usize),
    a_t: bool,
    b_t: bool,
) -> ProductRow {
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
        .collect();
    let mut c = vec![0f32; m * n];
    let us = |r: f64| 1e6 / r;
    let kernels =
        rlfleet_kernels::gemm_avx512::gemm((m, n, k), &a, a_t, &b, b_t, &mut c).then(|| {
            us(rate(secs, || {
                rlfleet_kernels::gemm_avx512::gemm((m, n, k), &a, a_t, &b, b_t, &mut c);
                std::hint::black_box(&c);
            }))
        });
    let learner = us(rate(secs, || {
        rlfleet_kernels::gemm::gemm((m, n, k), &a, a_t, &b, b_t, &mut c);
        std::hint::black_box(&c);
    }));
    let mm = us(rate(secs, || {
        rlfleet_kernels::gemm::matrixmultiply((m, n, k), &a, a_t, &b, b_t, &mut c);
        std::hint::black_box(&c);
    }));
    let (ta, tb) = (stored(&a, m, k, a_t), stored(&b, k, n, b_t));
    let into = Tensor::zeros([m as i64, n as i64], (Kind::Float, Device::Cpu));
    let libtorch = us(rate(secs, || {
        let _ = std::hint::black_box(tch::no_grad(|| ta.mm_out(&into, &tb)));
    }));
    ProductRow {
        net,
        product,
        m,
        n,
        k,
        learner_us: learner,
        kernels_us: kernels,
        matrixmultiply_us: mm,
        libtorch_us: libtorch,
        learner_speedup_vs_libtorch: libtorch / learner,
        matrixmultiply_vs_kernels: kernels.map(|t| mm / t),
    }
}

/// `op(x)` as a libtorch view of the values stored as the learner stores
/// them (`[cols, rows]` when `t`).
fn stored(x: &[f32], rows: usize, cols: usize, t: bool) -> Tensor {
    let (r, c) = if t { (cols, rows) } else { (rows, cols) };
    let v = Tensor::from_slice(x).view([r as i64, c as i64]);
    if t { v.tr() } else { v }
}
