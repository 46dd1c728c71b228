//! `rlfleet-bench r2d2`: R2D2 sequence updates per second (prioritized
//! sampling, burn-in through online and target, n-step double-Q under h,
//! priorities back) against the same update in PyTorch from Python, in one
//! run: MemoryCorridor-sized (3 → 32 → LSTM 32 → 2, unroll 10, burn-in 5,
//! batch 32) and masked-CartPole-sized (2 → 64 → LSTM 64 → 2, unroll 20,
//! burn-in 10, batch 32) and seed_rl's Atari unroll on the small network
//! (unroll 80, burn-in 40, batch 64). Both on the GPU when there is one
//! (the learner's default device).

use crate::measure::{rate, write_json};
use crate::torch_python;
use rlfleet_learning::agents::Learn;
use rlfleet_learning::agents::R2d2;
use rlfleet_replay::Transition;
use rlfleet_shared::config::R2d2Config;
use rlfleet_shared::env::{EnvSpec, Space};
use rlfleet_shared::nets::Core;
use serde::Serialize;
use std::borrow::Cow;
use tch::Device;

#[derive(Serialize)]
struct Row {
    case: String,
    device: String,
    /// obs, hidden, core, actions, batch, unroll, burn-in.
    shape: [u32; 7],
    rlfleet_updates_per_sec: f64,
    pytorch_python_updates_per_sec: Option<f64>,
    vs_pytorch_python: Option<f64>,
}

/// An agent of `shape` whose replay holds sequences of 4,000 steps of
/// random observations (episodes of 5 unrolls).
fn filled(shape: [u32; 7], device: Device) -> R2d2 {
    let [obs, hidden, core, actions, batch, unroll, burn] = shape;
    let spec = EnvSpec {
        id: Cow::Borrowed("bench"),
        observation_space: Space::uniform_box(obs as usize, -1.0, 1.0),
        obs_shape: vec![obs as usize],
        action_space: Space::Discrete {
            n: actions as usize,
        },
        ..rlfleet_shared::env::spec("CartPole-v1").expect("built in")
    };
    let cfg = R2d2Config {
        hidden: vec![hidden],
        batch_size: batch,
        unroll_length: unroll,
        burn_in: burn,
        buffer_size: 2_000,
        learning_starts: 0,
        train_freq: 1,
        ..R2d2Config::default()
    };
    let core = Core {
        size: core as usize,
        layers: 1,
    };
    let mut agent = R2d2::new(&cfg, &spec, None, core, 0, device);
    let len = 5 * unroll as usize;
    let row = |i: usize| -> Vec<f32> {
        (0..obs as usize)
            .map(|j| ((i * 31 + j * 7) % 17) as f32 / 8.5 - 1.0)
            .collect()
    };
    for step in 0..4_000usize.max(2 * len * batch as usize) {
        let (episode, t) = ((step / len) as u64, step % len);
        agent.observe(&Transition {
            episode,
            step: 0,
            obs: &row(step),
            action: &[(step % actions as usize) as f32],
            reward: (t % 3) as f32,
            next_obs: &row(step + 1),
            terminated: t + 1 == len,
            logp: None,
        });
        if t + 1 == len {
            agent.end_episode(episode);
        }
    }
    agent
}

pub fn bench(secs: f64, out: &std::path::Path) -> anyhow::Result<()> {
    tch::set_num_threads(1);
    let device = rlfleet_learning::device::current();
    let cases = [
        ("memory", [3, 32, 32, 2, 32, 10, 5]),
        ("masked-cartpole", [2, 64, 64, 2, 32, 20, 10]),
        ("atari-unroll", [2, 64, 64, 2, 64, 80, 40]),
    ];
    let mut rows = Vec::new();
    for (case, shape) in cases {
        let mut agent = filled(shape, device);
        let ours = rate(secs, || {
            agent.sample_step();
        });
        let py = torch_python::r2d2_rate(secs, shape);
        if let Err(why) = &py {
            println!("PyTorch-Python: not measured: {why}");
        }
        let py = py.ok();
        println!(
            "r2d2 {case:<16} ({device:?}) {ours:>7.1} updates/s ({:.1} ms each){}",
            1e3 / ours,
            py.map_or(String::new(), |p| format!(
                "; PyTorch-Python {p:>7.1} updates/s; ratio {:.2}",
                ours / p
            ))
        );
        rows.push(Row {
            case: case.into(),
            device: format!("{device:?}").to_lowercase(),
            shape,
            rlfleet_updates_per_sec: ours,
            pytorch_python_updates_per_sec: py,
            vs_pytorch_python: py.map(|p| ours / p),
        });
    }
    write_json(out, "r2d2_update", &rows)
}
