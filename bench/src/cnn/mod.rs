//! `rlfleet-bench cnn`: DQN-Nature's convolutional network (uint8 [4, 84,
//! 84], 6 actions) on this machine's CPU (or GPU, where libtorch finds
//! one), side by side in one run with PyTorch from Python doing the same
//! work on the same thread count (`bench/python/cnn_step.py`):
//! - DQN updates per second at batch 32 and 256 (the agent's own step:
//!   replay sample, double-DQN target, Huber loss, clip, Adam);
//! - inference observations per second at the same batches, through
//!   [`DeviceForward`] (what the `seed` front runs for a CNN), and through
//!   ONNX Runtime and the plain-Rust copy (what actors could run);
//! - Atari frames per second end to end: `config/pong-dqn-async.toml`
//!   (or the configs named) with 4 local actors (or as many as asked) of
//!   one env each (or as many as asked) for a fixed number of env steps
//!   (training from the 1,000th), against the same actors playing the
//!   same env under `random` (no network anywhere). Episodes are cut at
//!   4,000 frames so that the closing evaluation of an untrained policy
//!   stays short.
//!
//! Inference takes the frames as bytes (`Rows::Bytes`), as the `seed`
//! front does for a uint8 run: on a GPU they are uploaded as uint8.

mod atari;

use atari::atari_row;
pub use atari::{AtariRow, AtariRuns};
use rlfleet_learning::agents::{Learn, Persist};

use crate::measure::write_json;
use crate::torch_python;
use actor_client::ort_net::OrtForward;
use rand::{Rng, SeedableRng};
use rlfleet_learning::agents::Dqn;
use rlfleet_learning::nets::DeviceForward;
use rlfleet_replay::Transition;
use rlfleet_shared::config::{DqnConfig, ModelConfig, Torso};
use rlfleet_shared::env::{EnvSpec, ObsDtype, Space};
use rlfleet_shared::nets::{Forward, NetCopy, NetShape, Rows};
use rlfleet_shared::onnx::{Head, PolicyGraph};
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// The end-to-end runs' local actors: (processes, envs each, connections
/// each splits them over).
pub type Actors = (usize, u32, u32);

/// Atari's observation after Gymnasium's preprocessing and a 4-frame stack.
fn atari_spec() -> EnvSpec {
    let dim = 4 * 84 * 84;
    EnvSpec {
        id: "atari-frames".into(),
        observation_space: Space::Box {
            low: vec![0.0; dim],
            high: vec![255.0; dim],
        },
        obs_shape: vec![4, 84, 84],
        obs_dtype: ObsDtype::U8,
        action_space: Space::Discrete { n: 6 },
        max_episode_steps: None,
        reward_threshold: None,
    }
}

/// Calls per second of `f`, timed call by call for `secs` after a warm-up
/// of a tenth of that (at least one call each).
fn per_sec(secs: f64, mut f: impl FnMut()) -> f64 {
    let warm = Instant::now();
    f();
    while warm.elapsed().as_secs_f64() < secs * 0.1 {
        f();
    }
    let start = Instant::now();
    let mut n = 0u64;
    while n == 0 || start.elapsed().as_secs_f64() < secs {
        f();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

#[derive(Debug, Serialize)]
pub struct NetRow {
    batch: u32,
    device: String,
    threads: usize,
    /// DQN updates per second: rlfleet's agent, PyTorch-Python, ratio.
    update_per_sec: f64,
    pytorch_update_per_sec: Option<f64>,
    update_vs_pytorch: Option<f64>,
    /// Observations answered per second: the `seed` front's libtorch
    /// forward, PyTorch-Python, ratio; ONNX Runtime and plain Rust.
    infer_obs_per_sec: f64,
    pytorch_infer_obs_per_sec: Option<f64>,
    infer_vs_pytorch: Option<f64>,
    /// ONNX Runtime with the weights embedded (its packed layouts).
    ort_obs_per_sec: f64,
    /// ONNX Runtime with the weights as an input, and the ratio.
    ort_params_input_obs_per_sec: f64,
    ort_prepacked_vs_params_input: f64,
    /// Seconds from the weights' load to their embedded session.
    ort_prepack_secs: f64,
    plain_rust_obs_per_sec: f64,
}

/// Random frames as bytes.
fn frames(n: usize, rng: &mut rand_pcg::Pcg64) -> Vec<u8> {
    (0..n).map(|_| rng.random_range(0..256u32) as u8).collect()
}

fn net_rows(secs: f64, threads: usize, batches: &[u32]) -> anyhow::Result<Vec<NetRow>> {
    tch::set_num_threads(threads as i32);
    let device = rlfleet_learning::device::current();
    let python = torch_python::cnn_rates(secs, threads, batches);
    if let Err(why) = &python {
        println!("PyTorch-Python: not measured: {why}");
    }
    let py = |what: &str, b: u32| {
        python
            .as_ref()
            .ok()
            .and_then(|r| r.get(&(what.to_string(), b)).copied())
    };
    let spec = atari_spec();
    let model = ModelConfig {
        torso: Torso::NatureCnn,
        ..ModelConfig::default()
    };
    let torso = model.torso_for(&spec).map_err(anyhow::Error::msg)?;
    let od = spec.obs_dim();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(5);
    let mut rows = Vec::new();
    for &batch in batches {
        let cfg = DqnConfig {
            hidden: vec![512],
            lr: 1e-4,
            batch_size: batch,
            buffer_size: 2 * batch.max(256),
            learning_starts: 0,
            double: true,
            ..DqnConfig::default()
        };
        let mut dqn = Dqn::new(&cfg, &spec, torso.clone(), 0, device);
        for i in 0..cfg.buffer_size as usize {
            let (obs, next) = (frames(od, &mut rng), frames(od, &mut rng));
            dqn.observe_bytes(&Transition {
                episode: 0,
                step: 0,
                obs: &obs,
                action: &[(i % 6) as f32],
                reward: 1.0,
                next_obs: &next,
                terminated: false,
                logp: None,
            });
        }
        let update = per_sec(secs, || {
            dqn.train(0);
        });
        let weights = dqn.weights().data;
        let shape = NetShape::with_torso(torso.clone(), od, &cfg.hidden, 6);
        let bytes = frames(batch as usize * od, &mut rng);
        let x: Vec<f32> = bytes.iter().map(|&b| f32::from(b)).collect();
        let mut front = DeviceForward::new(shape.clone(), device);
        front.load(&weights).map_err(anyhow::Error::msg)?;
        let infer = per_sec(secs, || {
            front.forward_rows(Rows::Bytes(&bytes), batch as usize);
        }) * f64::from(batch);
        let graph = PolicyGraph {
            net: shape.clone(),
            head: Head::Q,
        };
        // Weights as an input, as each pass right after a weight update
        // runs; then the session with them embedded that follows.
        let mut ort = OrtForward::new(&graph.model(None), shape.clone())?.without_prepacking();
        ort.load(&weights).map_err(anyhow::Error::msg)?;
        let ort_input_rate = per_sec(secs, || {
            ort.forward(&x, batch as usize);
        }) * f64::from(batch);
        let mut ort = OrtForward::new(&graph.model(None), shape.clone())?;
        ort.load(&weights).map_err(anyhow::Error::msg)?;
        let prepack_secs = ort
            .wait_prepacked(std::time::Duration::from_secs(60))?
            .as_secs_f64();
        let ort_rate = per_sec(secs, || {
            ort.forward(&x, batch as usize);
        }) * f64::from(batch);
        let mut plain = NetCopy::new(shape);
        plain.load(&weights).map_err(anyhow::Error::msg)?;
        let plain_rate = per_sec(secs, || {
            plain.forward(&x, batch as usize);
        }) * f64::from(batch);
        let (py_update, py_infer) = (py("update", batch), py("infer", batch));
        let row = NetRow {
            batch,
            device: format!("{device:?}"),
            threads,
            update_per_sec: update,
            pytorch_update_per_sec: py_update,
            update_vs_pytorch: py_update.map(|p| update / p),
            infer_obs_per_sec: infer,
            pytorch_infer_obs_per_sec: py_infer,
            infer_vs_pytorch: py_infer.map(|p| infer / p),
            ort_obs_per_sec: ort_rate,
            ort_params_input_obs_per_sec: ort_input_rate,
            ort_prepacked_vs_params_input: ort_rate / ort_input_rate,
            ort_prepack_secs: prepack_secs,
            plain_rust_obs_per_sec: plain_rate,
        };
        let vs = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.2}x"));
        println!(
            "nature-cnn batch {batch:>3} ({device:?}, {threads} threads): update {update:>7.1}/s \
             ({} PyTorch-Python {:.1}/s); seed inference {infer:>7.0} obs/s ({} PyTorch-Python \
             {:.0}); ONNX Runtime {ort_rate:.0} obs/s (1 thread; {:.2}x its weights-as-input \
             {ort_input_rate:.0}; built in {prepack_secs:.3} s), plain Rust {plain_rate:.0} obs/s",
            vs(row.update_vs_pytorch),
            py_update.unwrap_or(f64::NAN),
            vs(row.infer_vs_pytorch),
            py_infer.unwrap_or(f64::NAN),
            ort_rate / ort_input_rate,
        );
        rows.push(row);
    }
    Ok(rows)
}

#[derive(Debug, Serialize)]
struct CnnResults {
    nets: Vec<NetRow>,
    atari: Vec<AtariRow>,
}

pub fn bench(
    secs: f64,
    threads: usize,
    batches: &[u32],
    runs: AtariRuns<'_>,
    out: &Path,
) -> anyhow::Result<()> {
    let nets = net_rows(secs, threads, batches)?;
    let mut atari = Vec::new();
    if runs.steps > 0 {
        let dir = tempfile::tempdir()?;
        for shipped in runs.configs {
            atari.push(atari_row(shipped, &runs, dir.path())?);
        }
    }
    write_json(out, "cnn", &CnnResults { nets, atari })
}
