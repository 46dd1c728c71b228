//! `rlfleet-bench dqn`: DQN gradient steps/s of the agent at batch 64 and
//! 256, against the textbook tch implementation of the same step
//! (`nn::Linear` layers, tch's built-in Adam) on the same data, and against
//! PyTorch from Python when one with torch is found; and MinAtar's DQN
//! (`config/minatar-breakout-dqn.toml`) with its hand-written gradient
//! against the same agent through autograd.

use crate::measure::{rate, write_json};
use crate::{durability, torch_python};
use rlfleet_learning::agents::Dqn;
use rlfleet_learning::agents::Learn;
use rlfleet_shared::config::DqnConfig;
use rlfleet_shared::env;
use serde::Serialize;
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Reduction, Tensor};

#[derive(Serialize)]
struct DqnRow {
    batch: u32,
    hidden: Vec<u32>,
    rlfleet_steps_per_sec: f64,
    baseline_steps_per_sec: f64,
    ratio: f64,
    rlfleet_us_per_step: f64,
    /// The same update in PyTorch from Python, when a Python with torch is
    /// found (`scripts/torch-venv.sh`), and rlfleet's rate over it.
    pytorch_python_steps_per_sec: Option<f64>,
    vs_pytorch_python: Option<f64>,
}

fn filled_dqn(batch: u32) -> Dqn {
    let spec = env::spec("CartPole-v1").unwrap();
    let cfg = DqnConfig {
        batch_size: batch,
        learning_starts: 0,
        ..DqnConfig::default()
    };
    let mut dqn = Dqn::new(&cfg, &spec, None, 0, Device::Cpu);
    durability::fill(&mut dqn, 10_000);
    dqn
}

/// The same DQN step written the textbook tch way.
fn baseline_step(batch: i64, secs: f64) -> f64 {
    let vs = nn::VarStore::new(Device::Cpu);
    let target_vs = nn::VarStore::new(Device::Cpu);
    let mlp = |p: nn::Path| {
        nn::seq()
            .add(nn::linear(&p / "l1", 4, 64, Default::default()))
            .add_fn(|x| x.relu())
            .add(nn::linear(&p / "l2", 64, 64, Default::default()))
            .add_fn(|x| x.relu())
            .add(nn::linear(&p / "l3", 64, 2, Default::default()))
    };
    let q = mlp(vs.root());
    let q_target = mlp(target_vs.root());
    let mut opt = nn::Adam::default().build(&vs, 1e-3).unwrap();
    let obs = Tensor::randn([batch, 4], (Kind::Float, Device::Cpu));
    let next = Tensor::randn([batch, 4], (Kind::Float, Device::Cpu));
    let actions = Tensor::randint(2, [batch, 1], (Kind::Int64, Device::Cpu));
    let rewards = Tensor::ones([batch], (Kind::Float, Device::Cpu));
    let done = Tensor::zeros([batch], (Kind::Float, Device::Cpu));
    // Host data copied in each step, as a replay sample would be.
    let host: Vec<f32> = vec![0.5; (batch * 11) as usize];
    rate(secs, || {
        let _upload = Tensor::from_slice(&host);
        let q_sa = q.forward(&obs).gather(1, &actions, false).squeeze_dim(1);
        let target = tch::no_grad(|| {
            let best = q.forward(&next).argmax(1, true);
            let next_q = q_target
                .forward(&next)
                .gather(1, &best, false)
                .squeeze_dim(1);
            &rewards + (1.0 - &done) * next_q * 0.99
        });
        let loss = q_sa.huber_loss(&target, Reduction::Mean, 1.0);
        opt.backward_step_clip_norm(&loss, 10.0);
    })
}

pub fn bench(secs: f64, out: &std::path::Path) -> anyhow::Result<()> {
    tch::set_num_threads(1);
    let mut rows = vec![];
    let batches = [64u32, 256];
    let python = torch_python::rates(secs, &batches);
    if let Err(why) = &python {
        println!("PyTorch-Python: not measured: {why}");
    }
    for batch in batches {
        let mut dqn = filled_dqn(batch);
        let ours = rate(secs, || {
            dqn.train(0);
        });
        let base = baseline_step(batch as i64, secs);
        let py = python.as_ref().ok().and_then(|r| r.get(&batch).copied());
        let row = DqnRow {
            batch,
            hidden: vec![64, 64],
            rlfleet_steps_per_sec: ours,
            baseline_steps_per_sec: base,
            ratio: ours / base,
            rlfleet_us_per_step: 1e6 / ours,
            pytorch_python_steps_per_sec: py,
            vs_pytorch_python: py.map(|p| ours / p),
        };
        println!(
            "dqn batch {batch:>3}: {ours:>8.0} steps/s ({:.0} us/step); plain tch {base:>8.0} steps/s; ratio {:.2}{}",
            1e6 / ours,
            ours / base,
            py.map_or(String::new(), |p| format!(
                "; PyTorch-Python {p:>8.0} steps/s; ratio {:.2}",
                ours / p
            ))
        );
        rows.push(row);
    }
    write_json(out, "dqn_train", &rows)?;
    write_json(out, "dqn_train_minatar", &minatar(secs)?)
}

#[derive(Serialize)]
struct MinatarRow {
    config: &'static str,
    batch: u32,
    hand_written_us_per_step: f64,
    autograd_us_per_step: f64,
    /// Steps/s of the hand-written gradient over autograd's.
    ratio: f64,
}

/// MinAtar Breakout's DQN (one 3x3 convolution, 128 hidden units,
/// centred RMSprop) on 10,000 synthetic transitions of sparse bool planes:
/// gradient steps through `FlatNet::backward_into` and through autograd.
fn minatar(secs: f64) -> anyhow::Result<MinatarRow> {
    use rlfleet_replay::Transition;
    use rlfleet_shared::config::RunConfig;
    use rlfleet_shared::env::{EnvSpec, ObsDtype, Space};
    let config = "config/minatar-breakout-dqn.toml";
    let cfg = RunConfig::load(std::path::Path::new(config))?;
    let spec = EnvSpec {
        id: "MinAtar/Breakout-v0".into(),
        observation_space: Space::uniform_box(400, 0.0, 1.0),
        obs_shape: vec![10, 10, 4],
        obs_dtype: ObsDtype::Bool,
        action_space: Space::Discrete { n: 6 },
        max_episode_steps: None,
        reward_threshold: None,
    };
    let plane = |t: usize| -> Vec<f32> {
        (0..400)
            .map(|i| f32::from(u8::from((i * 7 + t * 13).is_multiple_of(11))))
            .collect()
    };
    let steps_per_sec = |autograd: bool| -> f64 {
        let mut dqn = Dqn::new(&cfg.dqn, &spec, cfg.torso(&spec), 0, Device::Cpu);
        if autograd {
            dqn.use_autograd();
        }
        for t in 0..10_000 {
            dqn.observe(&Transition {
                episode: 0,
                step: 0,
                obs: &plane(t),
                action: &[(t % 6) as f32],
                reward: f32::from(u8::from(t % 3 == 0)),
                next_obs: &plane(t + 1),
                terminated: t % 500 == 499,
                logp: None,
            });
        }
        rate(secs, || {
            dqn.sample_step();
        })
    };
    let (hand, auto) = (steps_per_sec(false), steps_per_sec(true));
    let row = MinatarRow {
        config,
        batch: cfg.dqn.batch_size,
        hand_written_us_per_step: 1e6 / hand,
        autograd_us_per_step: 1e6 / auto,
        ratio: hand / auto,
    };
    println!(
        "MinAtar DQN batch {}: hand-written gradient {:.0} us/step, autograd {:.0} us/step; ratio {:.2}",
        row.batch, row.hand_written_us_per_step, row.autograd_us_per_step, row.ratio
    );
    Ok(row)
}
