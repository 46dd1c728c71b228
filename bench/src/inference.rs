//! `rlfleet-bench inference`: actor-side inference latency of the
//! CartPole policy network (4→64→64→2) at batch 1, 8 and 64 — ONNX Runtime
//! (the model the learner ships, weights as an input, one thread) and the
//! plain-Rust network against tch's forward pass (no grad, one thread) in
//! the same run — and of MinAtar's DQN network (one 16-channel 3×3
//! convolution over `(10, 10, 4)`, 128 hidden, 6 actions) at batch 1 and
//! 32, plain Rust against tch, with what refreshing the plain-Rust copy's
//! weights costs.

use crate::measure::{rate, write_json};
use actor_client::ort_net::OrtForward;
use rlfleet_learning::nets::FlatNet;
use rlfleet_shared::nets::{ConvLayer, ConvTorso, Forward, NetCopy, NetShape, TorsoKind};
use rlfleet_shared::onnx::{Head, PolicyGraph};
use serde::Serialize;
use std::path::Path;
use tch::{Device, Tensor};

#[derive(Debug, Serialize)]
pub struct InferenceRow {
    batch: usize,
    tch_us: f64,
    ort_us: f64,
    rust_us: f64,
    /// tch latency over ort latency (> 1: ort is faster).
    ort_speedup_vs_tch: f64,
    rust_speedup_vs_tch: f64,
}

pub fn bench(secs: f64, out: &Path) -> anyhow::Result<()> {
    tch::set_num_threads(1);
    let net = NetShape::new(4, &[64, 64], 2);
    let flat = FlatNet::new(4, &[64, 64], 2);
    tch::manual_seed(0);
    let params_t = flat.init(Device::Cpu);
    let params: Vec<f32> = Vec::try_from(&params_t)?;
    let graph = PolicyGraph {
        net: net.clone(),
        head: Head::Q,
    };
    let mut ort = OrtForward::new(&graph.model(None), net.clone())?;
    Forward::load(&mut ort, &params).map_err(anyhow::Error::msg)?;
    let mut rust = NetCopy::new(net);
    rust.load(&params).map_err(anyhow::Error::msg)?;
    let mut rows = Vec::new();
    for batch in [1usize, 8, 64] {
        let x: Vec<f32> = (0..batch * 4).map(|i| (i % 9) as f32 * 0.1 - 0.4).collect();
        let tch_rate = tch_rate(secs, &flat, &params_t, &x, batch);
        let ort_rate = rate(secs, || {
            std::hint::black_box(Forward::forward(&mut ort, &x, batch));
        });
        let rust_rate = rate(secs, || {
            std::hint::black_box(rust.forward(&x, batch));
        });
        let row = InferenceRow {
            batch,
            tch_us: 1e6 / tch_rate,
            ort_us: 1e6 / ort_rate,
            rust_us: 1e6 / rust_rate,
            ort_speedup_vs_tch: ort_rate / tch_rate,
            rust_speedup_vs_tch: rust_rate / tch_rate,
        };
        println!(
            "batch {batch:>2}: tch {:>6.1} us, ort {:>6.1} us ({:.2}x tch), plain Rust {:>6.1} us ({:.2}x tch)",
            row.tch_us, row.ort_us, row.ort_speedup_vs_tch, row.rust_us, row.rust_speedup_vs_tch
        );
        rows.push(row);
    }
    write_json(out, "inference_latency", &rows)?;
    write_json(out, "inference_latency_minatar", &minatar(secs)?)
}

/// Forward passes a second of `flat` under `params` on `batch` rows of
/// `x`, as an actor would use tch: host rows in, host values out.
fn tch_rate(secs: f64, flat: &FlatNet, params: &Tensor, x: &[f32], batch: usize) -> f64 {
    let width = (x.len() / batch) as i64;
    rate(secs, || {
        let t = Tensor::from_slice(x).view([batch as i64, width]);
        let y = tch::no_grad(|| flat.forward(params, &t));
        let v: Vec<f32> = Vec::try_from(y.view([-1])).expect("f32");
        std::hint::black_box(v);
    })
}

/// One batch size of MinAtar's network: plain Rust against tch.
#[derive(Debug, Serialize)]
pub struct ConvRow {
    batch: usize,
    tch_us: f64,
    rust_us: f64,
    rust_speedup_vs_tch: f64,
    /// Refreshing the plain-Rust copy from the learner's tensor, as `Dqn`
    /// does after each gradient step before it acts again.
    rust_reload_us: f64,
}

/// MinAtar's DQN network (`config/minatar-breakout-dqn.toml`), the way
/// `Dqn` acts with it: host rows in, Q-values out.
fn minatar(secs: f64) -> anyhow::Result<Vec<ConvRow>> {
    let torso = ConvTorso {
        input: [4, 10, 10],
        channels_last: true,
        bytes: false,
        kind: TorsoKind::Plain,
        layers: vec![ConvLayer {
            out: 16,
            kernel: 3,
            stride: 1,
        }],
    };
    let shape = NetShape::with_torso(Some(torso), 400, &[128], 6);
    let flat = FlatNet::from_shape(shape.clone());
    tch::manual_seed(0);
    let params_t = flat.init(Device::Cpu);
    let params: Vec<f32> = Vec::try_from(&params_t)?;
    let mut rust = NetCopy::new(shape);
    rust.load(&params).map_err(anyhow::Error::msg)?;
    let reload_rate = rate(secs, || {
        let w: Vec<f32> = Vec::try_from(&params_t).expect("f32");
        rust.load(&w).expect("same shape");
    });
    let mut rows = Vec::new();
    for batch in [1usize, 32] {
        let x: Vec<f32> = (0..batch * 400)
            .map(|i| (i % 7 == 0) as u8 as f32)
            .collect();
        let tch_rate = tch_rate(secs, &flat, &params_t, &x, batch);
        let rust_rate = rate(secs, || {
            std::hint::black_box(rust.forward(&x, batch));
        });
        let row = ConvRow {
            batch,
            tch_us: 1e6 / tch_rate,
            rust_us: 1e6 / rust_rate,
            rust_speedup_vs_tch: rust_rate / tch_rate,
            rust_reload_us: 1e6 / reload_rate,
        };
        println!(
            "MinAtar's network, batch {batch:>2}: tch {:>6.1} us, plain Rust {:>6.1} us ({:.2}x tch), \
             refreshing the plain-Rust copy {:>6.1} us",
            row.tch_us, row.rust_us, row.rust_speedup_vs_tch, row.rust_reload_us
        );
        rows.push(row);
    }
    Ok(rows)
}
