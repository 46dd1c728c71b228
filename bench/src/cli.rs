//! The command line of `rlfleet-bench`: one subcommand per benchmark, with
//! the knobs each takes (run lengths, actor counts, configs, seeds).

use crate::reference;
use clap::{Parser, Subcommand, ValueEnum};
use rlfleet_shared::config::TransportKind;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(about = "rlfleet benchmarks")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) what: What,
    /// Where the JSON results go.
    #[arg(long, default_value = "bench/results")]
    pub(crate) out: PathBuf,
}

#[derive(Subcommand, Debug)]
pub(crate) enum What {
    /// DQN training steps per second vs. plain tch.
    Dqn {
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
    },
    /// R2D2 sequence updates per second vs. PyTorch-Python.
    R2d2 {
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
    /// `seed-a2c` inference with an LSTM core vs. the same network
    /// without it, over QUIC.
    SeedCore {
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
        #[arg(long, value_delimiter = ',', default_value = "4,16")]
        actors: Vec<usize>,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Units of the LSTM.
        #[arg(long, default_value_t = 64)]
        core_size: u32,
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
        /// Atari-sized frames instead of CartPole's: `config/pong-dqn-async.toml`
        /// (one uint8 84 x 84 frame a step, `frame_stack = 4`, frame chains).
        #[arg(long)]
        atari: bool,
    },
    /// Many runs on one daemon sharing one fleet: 1, 2 and 4 concurrent
    /// runs vs. one, the hand-off when a run ends vs. a fresh actor's
    /// join, RSS per queued run, and N short runs through one daemon.
    Fleet {
        /// Seconds each concurrency level is measured.
        #[arg(long, default_value_t = 20.0)]
        secs: f64,
        #[arg(long, default_value_t = 4)]
        actors: usize,
        #[arg(long, default_value_t = 2)]
        envs: u32,
        /// Short runs sent through one daemon, one after the other.
        #[arg(long, default_value_t = 1000)]
        short_runs: usize,
        /// The config the concurrent runs share (default: the main job's,
        /// `config/cartpole-dqn-async.toml`).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Comma-separated numbers of concurrent runs, the first the
        /// baseline.
        #[arg(long, default_value = "1,2,4", value_delimiter = ',')]
        levels: Vec<usize>,
        /// Seconds the runs play before each measurement starts.
        #[arg(long, default_value_t = 5.0)]
        warmup_secs: f64,
        /// Only the concurrent runs (into `fleet_shares.json`): no
        /// hand-off, queued runs, short runs or device turns.
        #[arg(long)]
        shares_only: bool,
    },
    /// Experience workflows over a bad link (a user-space UDP relay):
    /// episodes/s with datagrams lost each way, a delay and a blackout,
    /// and on a milder link, vs. the same delay without loss; each run's
    /// books checked once stopped.
    Lossy {
        #[arg(long, value_delimiter = ',', default_value = "async")]
        workflows: Vec<String>,
        /// Seconds each link is measured (the blackout starts a quarter in).
        #[arg(long, default_value_t = 40.0)]
        secs: f64,
        /// Share of datagrams lost, each way.
        #[arg(long, default_value_t = 0.2)]
        loss: f64,
        /// One-way delay, ms (both links).
        #[arg(long, default_value_t = 50)]
        delay_ms: u64,
        #[arg(long, default_value_t = 8.0)]
        blackout_secs: f64,
        /// A milder link measured too (no blackout): its share lost each
        /// way (0: not measured)...
        #[arg(long, default_value_t = 0.05)]
        mild_loss: f64,
        /// ...and its one-way delay, ms.
        #[arg(long, default_value_t = 10)]
        mild_delay_ms: u64,
        #[arg(long, default_value_t = 3)]
        actors: usize,
        #[arg(long, default_value_t = 2)]
        envs: u32,
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
    /// A change to learning against the build before it: shipped configs
    /// per seed under this build and under `--before`'s, env steps to the
    /// confirmed stop.
    Ab {
        /// The directory of the other build's `learner-server` and
        /// `actor-client`.
        #[arg(long)]
        before: PathBuf,
        /// Shipped config names.
        #[arg(long, value_delimiter = ',')]
        configs: Vec<String>,
        #[arg(long, default_value_t = 3)]
        seeds: u64,
        #[arg(long, default_value_t = 4)]
        actors: usize,
        /// The JSON file's name under `--out` (without `.json`).
        #[arg(long, default_value = "ab")]
        name: String,
    },
    /// Time to a confirmed CartPole solve, shipped configs over QUIC with 4
    /// local actors, per seed, against the same seeds under `single`; then
    /// whether it stays solved without a target, beside CleanRL's DQN.
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
        /// Seconds of the run without a target, per seed (and of CleanRL's
        /// DQN beside a DQN config).
        #[arg(long, default_value_t = 45.0)]
        free_secs: f64,
        /// Leave out CleanRL's DQN (it needs the torch Python:
        /// `scripts/torch-venv.sh`).
        #[arg(long)]
        no_cleanrl: bool,
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
        /// Local actor processes of the end-to-end runs.
        #[arg(long, default_value_t = 4)]
        actors: usize,
        /// Envs each of those actors steps (a `seed` actor sends them in
        /// one request and waits for their actions together).
        #[arg(long, default_value_t = 1)]
        envs_per_actor: u32,
        /// Connections each of those actors splits its envs over
        /// (`actor-client --lanes`).
        #[arg(long, default_value_t = 1)]
        lanes_per_actor: u32,
        /// The shipped configs run end to end.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "config/pong-dqn-async.toml"
        )]
        configs: Vec<String>,
        /// `seed` workflows: inference batches the front may answer ahead
        /// of training (default: each config's `[distributed]
        /// max_batches_ahead`).
        #[arg(long)]
        max_batches_ahead: Option<u32>,
    },
    /// The networks' matrix products: the hand-written AVX-512 loops vs.
    /// BLAS, matrixmultiply and libtorch's mm.
    Products {
        #[arg(long, default_value_t = 0.5)]
        secs: f64,
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
    /// MinAtar or Atari games: rlfleet's `config/SUITE-GAME-AGENT.toml`
    /// against the same algorithm in PyTorch-Python
    /// (`bench/python/minatar_dqn.py`, MinAtar's DQN; `ppo.py`), the same
    /// seeds and frames, one after the other: returns per frame and per
    /// second, frames/s.
    Reference {
        #[arg(long, value_enum, default_value = "minatar")]
        suite: reference::Suite,
        #[arg(long, value_enum, default_value = "dqn")]
        agent: reference::Agent,
        #[arg(long, value_delimiter = ',', default_value = "breakout")]
        games: Vec<String>,
        #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
        seeds: Vec<u64>,
        #[arg(long, default_value_t = 100_000)]
        frames: u64,
    },
    /// Env steps/s of HeatRod-v0 spanning K = 1, 2, 4 ranks (env groups)
    /// vs. the same env on one rank with no group.
    #[cfg(feature = "mpi")]
    EnvGroups {
        /// Cells of the compute-bound rod.
        #[arg(long, default_value_t = 65_536)]
        cells: u32,
        #[arg(long, default_value_t = 32)]
        substeps: u32,
        /// Steps per configuration (20 times as many for the small rod).
        #[arg(long, default_value_t = 300)]
        steps: u64,
    },
    /// The ranks of `env-groups` (started by it under mpirun).
    #[cfg(feature = "mpi")]
    #[command(hide = true)]
    EnvGroupRanks {
        #[arg(long)]
        cells: u32,
        #[arg(long)]
        substeps: u32,
        #[arg(long)]
        steps: u64,
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
    /// Bytes the learner receives per env step and keeps per replay slot,
    /// against one frame, for image configs with local actors over QUIC.
    Wire {
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "config/pong-dqn-async.toml,config/pong-ppo-seed-a2c.toml,config/breakout-dqn-rma.toml"
        )]
        configs: Vec<String>,
        /// Env steps per run.
        #[arg(long, default_value_t = 4_000)]
        steps: u64,
        #[arg(long, default_value_t = 2)]
        actors: usize,
        /// Also run each config under the build whose `learner-server` and
        /// `actor-client` are in this directory (the change's baseline).
        #[arg(long)]
        before: Option<PathBuf>,
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
        #[arg(long, value_enum, default_value_t = Transport::Quic)]
        transport: Transport,
    },
}

/// The transports `workflows` runs over (MPI has `mpi-transports`).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Transport {
    Quic,
    Inproc,
}

impl From<Transport> for TransportKind {
    fn from(t: Transport) -> TransportKind {
        match t {
            Transport::Quic => TransportKind::Quic,
            Transport::Inproc => TransportKind::Inproc,
        }
    }
}
