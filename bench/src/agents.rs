//! `rlfleet-bench agents`: gradient steps per second of every agent from
//! its shipped config (default batch sizes, one CPU thread), against one
//! textbook supervised step (nn::Linear MLP of the agent's widths, MSE,
//! tch's Adam) on a batch of the same size in the same run: the ratio says
//! what one agent step costs in plain network updates.

use crate::measure::{rate, write_json};
use rand::{Rng, SeedableRng};
use rlfleet_learning::agents::{Agent, build_agent};
use rlfleet_replay::Transition;
use rlfleet_shared::config::{AgentKind, RunConfig};
use rlfleet_shared::env::{self, Action, Space};
use serde::Serialize;
use std::path::Path;
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

/// The configs benchmarked: each agent on the env it is shown on.
pub const CONFIGS: &[&str] = &[
    "cartpole-dqn-single",
    "acrobot-dqn-single",
    "cartpole-a2c-single",
    "cartpole-ppo-single",
    "pendulum-ppo-single",
    "pendulum-ddpg-single",
    "pendulum-td3-single",
    "pendulum-sac-single",
];

#[derive(Debug, Serialize)]
pub struct AgentRow {
    config: String,
    agent: String,
    env: String,
    hidden: Vec<u32>,
    /// Transitions per gradient step (for A2C, the mean episode length of
    /// the random play it trains on).
    batch: u32,
    steps_per_sec: f64,
    us_per_step: f64,
    baseline_steps_per_sec: f64,
    /// Agent steps/s over baseline steps/s.
    ratio: f64,
}

/// Feeds `n` transitions of random play, ending episodes as the env does.
fn feed(agent: &mut dyn Agent, env_id: &str, n: usize, seed: u64) {
    let mut e = env::make(env_id).expect("built-in env");
    let spec = e.spec().clone();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let (mut obs, mut next) = (vec![0f32; spec.obs_dim()], vec![0f32; spec.obs_dim()]);
    let mut action = vec![0f32; spec.action_space.flat_dim()];
    let mut episode = seed * 1_000_000;
    e.reset(Some(seed), &mut obs);
    for _ in 0..n {
        let s = match &spec.action_space {
            Space::Discrete { n } => {
                action[0] = rng.random_range(0..*n) as f32;
                e.step(Action::Discrete(action[0] as usize), &mut next)
            }
            Space::Box { low, high } => {
                for (a, (l, h)) in action.iter_mut().zip(low.iter().zip(high)) {
                    *a = l + rng.random::<f32>() * (h - l);
                }
                e.step(Action::Continuous(&action), &mut next)
            }
        };
        agent.observe(&Transition {
            obs: &obs,
            action: &action,
            reward: s.reward as f32,
            next_obs: &next,
            terminated: s.terminated,
            episode,
            step: 0,
            logp: None,
        });
        if s.done() {
            agent.end_episode(episode);
            episode += 1;
            e.reset(None, &mut obs);
        } else {
            obs.copy_from_slice(&next);
        }
    }
}

/// Gradient steps per second of the agent `cfg` builds, and the mean
/// transitions per gradient step.
fn agent_rate(cfg: &RunConfig, secs: f64) -> (f64, f64) {
    let spec = env::spec(&cfg.env).expect("validated");
    let mut agent = build_agent(cfg, &spec, Device::Cpu);
    match cfg.agent {
        // On-policy: time whole updates on freshly collected data.
        AgentKind::Ppo | AgentKind::A2c | AgentKind::Impala => {
            let chunk = match cfg.agent {
                AgentKind::Ppo => cfg.ppo.n_steps as usize,
                AgentKind::Impala => cfg.impala.n_steps as usize,
                _ => 500,
            };
            let (mut steps, mut busy, mut round) = (0u64, 0.0, 0u64);
            while busy < secs {
                round += 1;
                feed(agent.as_mut(), &cfg.env, chunk, round);
                let start = std::time::Instant::now();
                steps += u64::from(agent.train(0));
                busy += start.elapsed().as_secs_f64();
            }
            let per_step = match cfg.agent {
                AgentKind::Ppo => f64::from(cfg.ppo.batch_size),
                // Each gradient step reads every held step.
                AgentKind::Impala => f64::from(cfg.impala.n_steps),
                // One step per episode of random play.
                _ => (chunk as u64 * round) as f64 / steps.max(1) as f64,
            };
            (steps as f64 / busy, per_step)
        }
        _ => {
            feed(agent.as_mut(), &cfg.env, 20_000, 1);
            let batch = cfg.items_per_sample().unwrap_or(1) as f64;
            let r = rate(secs, || {
                agent.sample_step();
            });
            (r, batch)
        }
    }
}

/// One supervised MLP step written the textbook tch way.
fn baseline_rate(input: i64, hidden: &[u32], output: i64, batch: i64, secs: f64) -> f64 {
    let vs = nn::VarStore::new(Device::Cpu);
    let mut seq = nn::seq();
    let mut fan_in = input;
    for (i, &h) in hidden.iter().enumerate() {
        seq = seq
            .add(nn::linear(
                vs.root() / format!("l{i}"),
                fan_in,
                i64::from(h),
                Default::default(),
            ))
            .add_fn(|x| x.relu());
        fan_in = i64::from(h);
    }
    let net = seq.add(nn::linear(
        vs.root() / "out",
        fan_in,
        output,
        Default::default(),
    ));
    let mut opt = nn::Adam::default().build(&vs, 1e-3).expect("adam");
    let x = Tensor::randn([batch, input], (Kind::Float, Device::Cpu));
    let y = Tensor::randn([batch, output], (Kind::Float, Device::Cpu));
    rate(secs, || {
        let loss = net.forward(&x).mse_loss(&y, tch::Reduction::Mean);
        opt.backward_step(&loss);
    })
}

pub fn bench(secs: f64, out: &Path) -> anyhow::Result<()> {
    tch::set_num_threads(1);
    let mut rows = Vec::new();
    for name in CONFIGS {
        let cfg = RunConfig::load(Path::new(&format!("config/{name}.toml")))?;
        let spec = env::spec(&cfg.env)?;
        let (ours, per_step) = agent_rate(&cfg, secs);
        let batch = per_step.round() as u32;
        let outputs = spec
            .action_space
            .n()
            .unwrap_or(spec.action_space.flat_dim());
        let base = baseline_rate(
            spec.obs_dim() as i64,
            cfg.policy_hidden(),
            outputs as i64,
            i64::from(batch),
            secs,
        );
        println!(
            "{name:<22} {:<5} batch {batch:>3}: {ours:>7.0} steps/s ({:>6.0} us/step); \
             one MLP step {base:>7.0}/s; ratio {:.3}",
            cfg.agent.to_string(),
            1e6 / ours,
            ours / base
        );
        rows.push(AgentRow {
            config: name.to_string(),
            agent: cfg.agent.to_string(),
            env: cfg.env.clone(),
            hidden: cfg.policy_hidden().to_vec(),
            batch,
            steps_per_sec: ours,
            us_per_step: 1e6 / ours,
            baseline_steps_per_sec: base,
            ratio: ours / base,
        });
    }
    write_json(out, "agents_train", &rows)
}
