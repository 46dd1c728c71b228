//! `actor-client`: flags, logging and exit codes around the library.
//! `actor-client --server HOST:PORT --pin SHA256|--ca FILE [--token T]
//! [--envs N]` feeds a learner; `actor-client mpi` is an actor rank of an
//! MPI job (feature `mpi`); `actor-client rollout` plays locally.

use actor_client::remote::Player;
use clap::{Args, Parser, Subcommand};
use rlfleet_quic::{Liveness, Trust};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Parser, Debug)]
#[command(
    name = "actor-client",
    version,
    about = "The rlfleet actor",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(Args, Debug)]
struct ConnectArgs {
    /// The learner's QUIC address, HOST:PORT.
    #[arg(long, env = "RLFLEET_SERVER")]
    server: Option<String>,
    /// Trust the learner's certificate if it chains to these PEM CAs.
    #[arg(long, env = "RLFLEET_CA", conflicts_with = "pin")]
    ca: Option<PathBuf>,
    /// Trust exactly the certificate with this SHA-256 fingerprint.
    #[arg(long, env = "RLFLEET_PIN")]
    pin: Option<String>,
    /// Name to check in the certificate (default: the host in --server).
    #[arg(long, env = "RLFLEET_SERVER_NAME")]
    server_name: Option<String>,
    /// Shared secret, when the learner requires one.
    #[arg(
        long,
        env = "RLFLEET_TOKEN",
        default_value = "",
        hide_env_values = true
    )]
    token: String,
    #[command(flatten)]
    play: PlayArgs,
    /// Exit when the run ends instead of waiting for the next one.
    #[arg(long)]
    once: bool,
    /// Serve only this run (its id or name) of a daemon that holds
    /// several; by default the daemon shares its actors between its runs.
    #[arg(long, env = "RLFLEET_RUN")]
    run: Option<String>,
    /// Split the envs over this many connections (actors `ID/0`, `ID/1`,
    /// …) played in turn on one thread: under `seed`, one lane's envs
    /// step while another waits for its actions.
    #[arg(long, env = "RLFLEET_LANES", default_value_t = 1)]
    lanes: u32,
    /// Give up after this many seconds without reaching the learner (long
    /// enough by default to outlive a learner restart: systemd's or
    /// Slurm's, with a large replay to load).
    #[arg(long, default_value_t = 600.0)]
    give_up_secs: f64,
    /// In a run, reconnect when the learner has not answered for this
    /// many seconds (its connection alive, its run stuck); 0: wait for
    /// ever. Waiting for a run to start is not timed.
    #[arg(long, default_value_t = 600.0)]
    reply_timeout_secs: f64,
    /// QUIC keep-alive: milliseconds between the pings that keep a quiet
    /// connection open (the learner's `[actors] keep_alive_ms`).
    #[arg(long, default_value_t = 1000)]
    keep_alive_ms: u64,
    /// QUIC idle timeout: the learner is gone once not heard from for
    /// this many milliseconds, and the actor reconnects (the learner's
    /// `[actors] idle_timeout_ms`).
    #[arg(long, default_value_t = 15000)]
    idle_timeout_ms: u64,
}

/// How the actor plays, whatever links it to its learner.
#[derive(Args, Debug)]
struct PlayArgs {
    /// Environments to run (they share the link and the weights).
    #[arg(long, env = "RLFLEET_ENVS", default_value_t = 1)]
    envs: u32,
    /// Stable id of this actor (default: HOSTNAME-PID; an MPI rank:
    /// HOSTNAME-mpi-RANK).
    #[arg(long, env = "RLFLEET_ACTOR_ID")]
    actor_id: Option<String>,
    /// Log format on stderr (as `learner-server --log-format`).
    #[arg(long, value_enum, env = "RLFLEET_LOG_FORMAT", default_value = "human")]
    log_format: LogFormat,
    /// `--log-format json`, under its old name.
    #[arg(long, hide = true)]
    log_json: bool,
    /// The venv whose packages Python envs (`gymnasium:`, `python:`) import
    /// (default: the set-up's cached venv).
    #[arg(long, env = "RLFLEET_PYTHON_VENV")]
    python_venv: Option<PathBuf>,
    /// What runs the policy network: plain Rust, or ONNX Runtime (loaded
    /// from ORT_DYLIB_PATH) on the model the learner ships; `auto` takes
    /// ONNX Runtime for a convolutional network, plain Rust for an MLP.
    #[arg(
        long,
        value_enum,
        env = "RLFLEET_ACTOR_INFERENCE",
        default_value = "auto"
    )]
    inference: actor_client::remote::Inference,
}

/// The format of the actor's log lines.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

impl PlayArgs {
    fn json_logs(&self) -> bool {
        self.log_json || self.log_format == LogFormat::Json
    }

    fn player(self, default_id: impl FnOnce() -> String, token: String, once: bool) -> Player {
        Player {
            actor_id: self.actor_id.unwrap_or_else(default_id),
            token,
            envs: self.envs.max(1),
            once,
            run: None,
            inference: self.inference,
            env_factory: None,
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// An actor rank of an MPI job (built with the `mpi` feature):
    /// `mpirun -n 1 learner-server mpi RUN.toml : -n A actor-client mpi`.
    Mpi {
        #[command(flatten)]
        play: PlayArgs,
        /// Simulate a failure: leave the run instead of sending batch
        /// N + 1 (0: before the first). A test hook.
        #[arg(long, hide = true)]
        fail_after_batches: Option<u64>,
        /// Ranks each env spans: the actor ranks form groups of this many
        /// consecutive ranks, the first of each the actor (must equal the
        /// run's `ranks_per_env`).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
        ranks_per_env: u32,
    },
    /// Play episodes locally with random actions; print one CSV row each.
    Rollout {
        #[arg(long, default_value = "CartPole-v1")]
        env: String,
        #[arg(long, default_value_t = 10)]
        episodes: u64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

fn rollout(env: &str, episodes: u64, seed: u64) -> anyhow::Result<()> {
    let results = actor_client::random_rollout(env, episodes, seed)?;
    println!("episode,return,length,terminated");
    for r in &results {
        println!("{},{},{},{}", r.episode, r.ret, r.length, r.terminated);
    }
    let mean = results.iter().map(|r| r.ret).sum::<f64>() / results.len().max(1) as f64;
    eprintln!("{} episodes of {env}, mean return {mean:.2}", results.len());
    Ok(())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "actor".into())
}

fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.with_ansi(std::io::stderr().is_terminal()).init();
    }
}

/// The exit lines (one per lane) and code of an actor that ran: the
/// first failed lane's.
fn finish(
    result: anyhow::Result<Vec<anyhow::Result<actor_client::remote::ActorReport>>>,
) -> ExitCode {
    let lanes = match result {
        Ok(lanes) => lanes,
        Err(e) => vec![Err(e)],
    };
    let mut code = ExitCode::SUCCESS;
    for lane in lanes {
        match lane {
            Ok(r) => {
                // One write, so lines of actors sharing a terminal do not mix.
                let line = format!("{r}\n");
                let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                if code == ExitCode::SUCCESS {
                    code = if e.is::<actor_client::remote::Refused>() {
                        ExitCode::from(3)
                    } else {
                        ExitCode::FAILURE
                    };
                }
            }
        }
    }
    code
}

#[cfg(feature = "mpi")]
fn mpi_actor(play: PlayArgs, fail_after_batches: Option<u64>, ranks_per_env: u32) -> ExitCode {
    // No other thread exists yet (it sets an environment variable).
    rlfleet_shared::mpi::steer_components();
    let rank = std::env::var("OMPI_COMM_WORLD_RANK")
        .or_else(|_| std::env::var("PMI_RANK"))
        .unwrap_or_else(|_| std::process::id().to_string());
    let args = actor_client::mpi_link::MpiActor {
        player: play.player(|| format!("{}-mpi-{rank}", hostname()), String::new(), true),
        fail_after_batches,
        ranks_per_env,
    };
    // The rank prints its own outcome (before leaving MPI).
    match actor_client::mpi_link::run(args, CancellationToken::new()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(not(feature = "mpi"))]
fn mpi_actor(_: PlayArgs, _: Option<u64>, _: u32) -> ExitCode {
    eprintln!(
        "error: this actor-client was built without MPI: cargo build --release --features mpi \\
         (needs an MPI library and libclang: RLFLEET_SETUP=test scripts/setup.sh installs OpenMPI and libclang on Debian)"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Mpi {
        play,
        fail_after_batches,
        ranks_per_env,
    }) = cli.command
    {
        init_logging(play.json_logs());
        rlfleet_shared::env::python::set_venv(play.python_venv.clone());
        return mpi_actor(play, fail_after_batches, ranks_per_env);
    }
    if let Some(Command::Rollout {
        env,
        episodes,
        seed,
    }) = cli.command
    {
        return match rollout(&env, episodes, seed) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let c = cli.connect;
    let lanes = c.lanes;
    init_logging(c.play.json_logs());
    rlfleet_shared::env::python::set_venv(c.play.python_venv.clone());
    let Some(server) = c.server else {
        eprintln!("error: give --server HOST:PORT (or the `rollout` subcommand)");
        return ExitCode::from(2);
    };
    let trust = match (c.ca, c.pin) {
        (Some(ca), None) => Trust::CaFile(ca),
        (None, Some(pin)) => Trust::Pin(pin),
        _ => {
            eprintln!("error: give --ca FILE or --pin SHA256 to trust the learner");
            return ExitCode::from(2);
        }
    };
    let mut player = c.play.player(
        || format!("{}-{}", hostname(), std::process::id()),
        c.token,
        c.once,
    );
    player.run = c.run;
    let opts = actor_client::remote::ActorOptions {
        server,
        server_name: c.server_name,
        trust,
        player,
        liveness: Liveness {
            keep_alive: Duration::from_millis(c.keep_alive_ms),
            idle_timeout: Duration::from_millis(c.idle_timeout_ms),
        },
        max_frame_bytes: rlfleet_shared::wire::DEFAULT_MAX_FRAME_BYTES,
        give_up_after: Duration::from_secs_f64(c.give_up_secs),
        reply_timeout: (c.reply_timeout_secs > 0.0)
            .then(|| Duration::from_secs_f64(c.reply_timeout_secs)),
    };
    let runtime = actor_client::remote::runtime().expect("tokio runtime");
    let cancel = CancellationToken::new();
    let result = runtime.block_on(async {
        let c2 = cancel.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            c2.cancel();
        });
        actor_client::remote::run_lanes(&opts, lanes, cancel).await
    });
    finish(result)
}
