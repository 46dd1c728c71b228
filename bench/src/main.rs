//! rlfleet benchmarks. Each prints its figure as a ratio against a baseline
//! measured in the same run and writes JSON under `bench/results/`.
//!
//! - `dqn`: DQN gradient steps/s of the agent at batch 64 and 256, against
//!   the textbook tch implementation of the same step (nn::Linear layers,
//!   tch's built-in Adam) on the same data.
//! - `envs`: environment steps/s of each built-in env, against the counting
//!   env through the same trait (the cost of the interface itself).
//! - `seed`: SEED central inference over QUIC (see `seed.rs`).
//! - `ingest`: experience ingest over QUIC vs memcpy (see `ingest.rs`).
//! - `workflows`: one DQN run under every workflow vs `single` (see
//!   `workflows.rs`).
//! - `agents`: gradient steps/s of every agent vs one plain MLP step (see
//!   `agents.rs`).
//! - `inference`: actor-side inference latency, ONNX Runtime and plain
//!   Rust vs tch (see `inference.rs`).
//! - `cnn`: DQN-Nature's CNN update and inference vs PyTorch-Python, and
//!   Atari frames/s end to end vs `random` (see `cnn.rs`).
//! - `learn`: every agent for rl-baselines3-zoo's budget vs the zoo's
//!   published returns (see `learn.rs`).
//! - `pyenv`: a Gymnasium env through the bridge and through an actor vs
//!   Gymnasium's own Python loop (see `pyenv.rs`).
//! - `soak`: 1,000 actor connections against one daemon process for ten
//!   minutes, `seed` and `async`: RSS over time, latency vs 16
//!   connections, nothing lost (see `soak.rs`).
//! - `checkpoint`: ingest latency during checkpoints (none, without the
//!   replay, with 50k and 1M transitions) and the time from a daemon's
//!   start on a killed run's state directory to its first gradient step
//!   (see `durability.rs`).
//! - `mpi-rma`, `mpi-transports` (feature `mpi`): RMA operations vs a
//!   two-sided ping-pong, and `async`/`rma` over MPI vs QUIC (see `mpi.rs`).

mod agents;
mod cnn;
mod durability;
mod inference;
mod inference_stall;
mod ingest;
mod learn;
mod loopback;
#[cfg(feature = "mpi")]
mod mpi;
mod pyenv;
mod seed;
mod soak;
mod solve;
mod torch_python;
mod workflows;

use clap::{Parser, Subcommand};
use learner_server::agents::{Agent, Dqn};
use rlfleet_shared::config::{DqnConfig, RunConfig};
use rlfleet_shared::env::{self, Action, ENV_IDS};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Reduction, Tensor};

#[derive(Parser, Debug)]
#[command(about = "rlfleet benchmarks")]
struct Cli {
    #[command(subcommand)]
    what: What,
    /// Where the JSON results go.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
}

#[derive(Subcommand, Debug)]
enum What {
    /// DQN training steps per second vs. plain tch.
    Dqn {
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
    },
    /// Environment steps per second vs. the counting env.
    Envs {
        #[arg(long, default_value_t = 1.0)]
        secs: f64,
    },
    /// SEED inference over QUIC vs. a constant-action server and an echo.
    Seed {
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
        actors: Vec<usize>,
        /// Rounds of (learner, constant-action, echo); medians are reported.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Override the config's `inference_max_wait_us`.
        #[arg(long)]
        max_wait_us: Option<u64>,
        /// Override the config's `inference_max_batch`.
        #[arg(long)]
        max_batch: Option<u32>,
    },
    /// Experience ingest over QUIC vs. memcpy of the same bytes.
    Ingest {
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
        #[arg(long, value_delimiter = ',', default_value = "4,16")]
        actors: Vec<usize>,
        /// Transitions per `Experience` batch (16 steps x 8 envs).
        #[arg(long, default_value_t = 128)]
        transitions: usize,
    },
    /// Many actor connections against one daemon process for a long time
    /// (`seed` and `async`): its RSS over time, latency vs. few
    /// connections, nothing lost.
    Soak {
        #[arg(long, value_delimiter = ',', default_value = "seed,async")]
        workflows: Vec<String>,
        #[arg(long, default_value_t = 1000)]
        connections: usize,
        #[arg(long, default_value_t = 600.0)]
        secs: f64,
        /// The baseline: this many connections first, same daemon and run.
        #[arg(long, default_value_t = 16)]
        base_connections: usize,
        #[arg(long, default_value_t = 60.0)]
        base_secs: f64,
    },
    /// Every agent for rl-baselines3-zoo's env-step budget vs. its
    /// published returns.
    Learn {
        /// Run only the configs whose name contains one of these.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        #[arg(long, default_value_t = 20)]
        eval_episodes: u32,
        /// Run each config with seeds 1..=N and report, per config, how
        /// many reached the threshold within the budget, with the median
        /// and spread (`agents_learn_seeds.json` when N > 1).
        #[arg(long, default_value_t = 1)]
        seeds: u64,
        /// Run each config for this many times the zoo's budget ("reached"
        /// still counts within the budget): what happens after a run is
        /// solved, in the rolling-20 columns.
        #[arg(long, default_value_t = 1.0)]
        steps_factor: f64,
    },
    /// Time to a confirmed CartPole solve, shipped configs over QUIC with 4
    /// local actors, per seed, against the same seeds under `single`.
    Solve {
        /// Shipped config names, or paths of config files (`*.toml`).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "cartpole-dqn-async,cartpole-ppo-sync"
        )]
        configs: Vec<String>,
        #[arg(long, default_value_t = 5)]
        seeds: u64,
        #[arg(long, default_value_t = 4)]
        actors: usize,
        /// Seconds of the run without a target, per seed.
        #[arg(long, default_value_t = 45.0)]
        free_secs: f64,
    },
    /// DQN-Nature's CNN: update steps/s and inference obs/s vs.
    /// PyTorch-Python on the same threads; Atari frames/s end to end with 4
    /// actors vs. the same actors under `random`.
    Cnn {
        #[arg(long, default_value_t = 5.0)]
        secs: f64,
        /// libtorch (and PyTorch) intra-op threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        #[arg(long, value_delimiter = ',', default_value = "32,256")]
        batches: Vec<u32>,
        /// Env steps of the end-to-end Atari run (0: skip it).
        #[arg(long, default_value_t = 10_000)]
        atari_steps: u64,
    },
    /// Actor-side inference latency: ONNX Runtime and plain Rust vs. tch.
    Inference {
        #[arg(long, default_value_t = 2.0)]
        secs: f64,
    },
    /// A Gymnasium env through the bridge and through one actor process
    /// (1 and N envs) vs. Gymnasium's own Python loop.
    Pyenv {
        #[arg(long, default_value = "CartPole-v1")]
        env: String,
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
        #[arg(long, value_delimiter = ',', default_value = "1,8")]
        envs: Vec<u32>,
        /// Env steps of each actor run.
        #[arg(long, default_value_t = 200_000)]
        steps: u64,
    },
    /// Ingest latency during checkpoints vs. none; restart time with a
    /// 1M-transition replay in the checkpoint vs. without.
    Checkpoint {
        /// Seconds of ingest per stall case.
        #[arg(long, default_value_t = 10.0)]
        secs: f64,
        #[arg(long, default_value_t = 1_000_000)]
        restart_transitions: usize,
        /// Simulator clients (8 envs each) in the inference case.
        #[arg(long, default_value_t = 16)]
        inference_actors: usize,
    },
    /// Gradient steps per second of every agent vs. one plain MLP step.
    Agents {
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
    },
    /// MPI RMA operations (whole passive-target epochs) vs. a two-sided
    /// ping-pong, under `mpirun -n 2`.
    #[cfg(feature = "mpi")]
    MpiRma {
        #[arg(long, default_value_t = 20_000)]
        iters: u32,
    },
    /// The ranks of `mpi-rma` (started by it under mpirun).
    #[cfg(feature = "mpi")]
    #[command(hide = true)]
    RmaRanks {
        #[arg(long)]
        iters: u32,
    },
    /// Correctness of the RMA operations under contention (run by the
    /// test suite under `mpirun -n P`).
    #[cfg(feature = "mpi")]
    #[command(hide = true)]
    RmaCheck {
        #[arg(long, default_value_t = 2000)]
        ops: u64,
    },
    /// `async` and `rma` over MPI vs. over QUIC (no training).
    #[cfg(feature = "mpi")]
    MpiTransports {
        /// Env steps per run.
        #[arg(long, default_value_t = 400_000)]
        steps: u64,
        #[arg(long, default_value_t = 4)]
        actors: usize,
    },
    /// DQN training (feature `mpi`): the multi-learner workflows on 2
    /// learner ranks vs. their single-learner counterparts (`async`,
    /// `rma`), same actor ranks and env steps.
    #[cfg(feature = "mpi")]
    MpiLearners {
        /// Env steps per run.
        #[arg(long, default_value_t = 30_000)]
        steps: u64,
        #[arg(long, default_value_t = 4)]
        actors: usize,
    },
    /// The same DQN run under every workflow, vs. `single`.
    Workflows {
        /// Env steps per run.
        #[arg(long, default_value_t = 20_000)]
        steps: u64,
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "async,nb-async,async-window,sync,rma,rma-queue-pop-all,seed,orchestrated"
        )]
        workflows: Vec<String>,
        #[arg(long, default_value = "quic")]
        transport: String,
    },
}

/// Runs `f` repeatedly for about `secs` seconds (after a warm-up); returns
/// calls per second.
fn rate(secs: f64, mut f: impl FnMut()) -> f64 {
    let warm = Instant::now();
    while warm.elapsed().as_secs_f64() < secs * 0.1 {
        f();
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..16 {
            f();
        }
        n += 16;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

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

fn write_json<T: Serialize>(out: &std::path::Path, name: &str, value: &T) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let path = out.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(value)?)?;
    println!("wrote {}", path.display());
    Ok(())
}

fn bench_dqn(secs: f64, out: &std::path::Path) -> anyhow::Result<()> {
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
    write_json(out, "dqn_train", &rows)
}

#[derive(Serialize)]
struct EnvRow {
    env: String,
    steps_per_sec: f64,
    baseline_steps_per_sec: f64,
    ratio: f64,
}

fn env_rate(id: &str, secs: f64) -> f64 {
    let mut e = env::make(id).unwrap();
    let spec = e.spec().clone();
    let mut obs = vec![0f32; spec.obs_dim()];
    e.reset(Some(0), &mut obs);
    let cont = [0.3f32];
    let mut i = 0usize;
    rate(secs, || {
        i += 1;
        let a = match spec.action_space.n() {
            Some(n) => Action::Discrete(i % n),
            None => Action::Continuous(&cont),
        };
        if e.step(a, &mut obs).done() {
            e.reset(None, &mut obs);
        }
    })
}

fn bench_envs(secs: f64, out: &std::path::Path) -> anyhow::Result<()> {
    let base = env_rate("Counting-v0", secs);
    let mut rows = vec![];
    for id in ENV_IDS.iter().filter(|id| **id != "Counting-v0") {
        let r = env_rate(id, secs);
        println!(
            "{id:<26} {:>12.0} steps/s; counting env {base:>12.0}; ratio {:.2}",
            r,
            r / base
        );
        rows.push(EnvRow {
            env: id.to_string(),
            steps_per_sec: r,
            baseline_steps_per_sec: base,
            ratio: r / base,
        });
    }
    write_json(out, "env_steps", &rows)
}

/// The runtime the QUIC benchmarks run on (2 workers: this machine's cores).
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.what {
        What::Dqn { secs } => bench_dqn(secs, &cli.out),
        What::Envs { secs } => bench_envs(secs, &cli.out),
        What::Agents { secs } => agents::bench(secs, &cli.out),
        What::Pyenv {
            env,
            secs,
            envs,
            steps,
        } => pyenv::run(&env, secs, &envs, steps, &cli.out),
        What::Cnn {
            secs,
            threads,
            batches,
            atari_steps,
        } => cnn::bench(secs, threads, &batches, atari_steps, &cli.out),
        What::Inference { secs } => inference::bench(secs, &cli.out),
        What::Learn {
            only,
            eval_episodes,
            seeds,
            steps_factor,
        } => learn::bench(&only, eval_episodes, seeds, steps_factor, &cli.out),
        What::Solve {
            configs,
            seeds,
            actors,
            free_secs,
        } => solve::bench(&configs, seeds, actors, free_secs, &cli.out),
        What::Seed {
            secs,
            actors,
            rounds,
            max_wait_us,
            max_batch,
        } => {
            let rt = runtime()?;
            let mut cfg = RunConfig::load(std::path::Path::new("config/cartpole-dqn-seed.toml"))?;
            if let Some(w) = max_wait_us {
                cfg.distributed.inference_max_wait_us = w;
            }
            if let Some(b) = max_batch {
                cfg.distributed.inference_max_batch = b;
            }
            let rows = rt.block_on(seed::bench(cfg, &actors, secs, rounds))?;
            write_json(&cli.out, "seed", &rows)
        }
        What::Ingest {
            secs,
            actors,
            transitions,
        } => {
            let rt = runtime()?;
            let cfg = RunConfig::load(std::path::Path::new("config/cartpole-dqn-async.toml"))?;
            let rows = rt.block_on(ingest::bench(cfg, &actors, transitions, secs))?;
            write_json(&cli.out, "ingest", &rows)
        }
        What::Checkpoint {
            secs,
            restart_transitions,
            inference_actors,
        } => {
            #[derive(Serialize)]
            struct Durability {
                stall: Vec<durability::StallRow>,
                inference: Vec<inference_stall::InferenceRow>,
                restart: Vec<durability::RestartRow>,
            }
            let stall = durability::stall(secs)?;
            let inference = runtime()?.block_on(inference_stall::bench(inference_actors, secs))?;
            let restart = durability::restart(restart_transitions)?;
            write_json(
                &cli.out,
                "checkpoint",
                &Durability {
                    stall,
                    inference,
                    restart,
                },
            )
        }
        What::Soak {
            workflows,
            connections,
            secs,
            base_connections,
            base_secs,
        } => {
            let rt = runtime()?;
            let mut rows = Vec::new();
            for w in &workflows {
                let path = format!("config/cartpole-dqn-{w}.toml");
                let cfg = RunConfig::load(std::path::Path::new(&path))?;
                rows.push(rt.block_on(soak::bench(
                    &cfg,
                    w,
                    connections,
                    secs,
                    base_connections,
                    base_secs,
                ))?);
            }
            write_json(&cli.out, "soak", &rows)
        }
        #[cfg(feature = "mpi")]
        What::MpiRma { iters } => mpi::rma(iters, &cli.out),
        #[cfg(feature = "mpi")]
        What::RmaRanks { iters } => mpi::rma_ranks(iters),
        #[cfg(feature = "mpi")]
        What::RmaCheck { ops } => mpi::rma_check(ops),
        #[cfg(feature = "mpi")]
        What::MpiTransports { steps, actors } => mpi::transports(steps, actors, &cli.out),
        #[cfg(feature = "mpi")]
        What::MpiLearners { steps, actors } => mpi::learners(steps, actors, &cli.out),
        What::Workflows {
            steps,
            workflows,
            transport,
        } => {
            let transport = match transport.as_str() {
                "quic" => rlfleet_shared::config::TransportKind::Quic,
                "inproc" => rlfleet_shared::config::TransportKind::Inproc,
                other => anyhow::bail!("transport `{other}`: use quic or inproc"),
            };
            let rows = workflows::run(steps, &workflows, transport)?;
            write_json(&cli.out, &format!("workflows_{transport}"), &rows)
        }
    }
}
