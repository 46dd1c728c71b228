//! `learner-server`: parses flags, sets up logging and signals, and calls the
//! library. Exit codes: 0 the run ended by its stop condition, 2 bad config,
//! 1 any other error, 130 stopped by a signal (after checkpointing).

use clap::{Parser, Subcommand, ValueEnum};
use learner_server::daemon;
use learner_server::run_command::load_config;
#[cfg(feature = "mpi")]
use learner_server::run_command::{finish, resume_choice};
use learner_server::server_config::ServerConfig;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

#[derive(Parser, Debug)]
#[command(name = "learner-server", version, about = "The rlfleet learner")]
struct Cli {
    /// Log format on stderr.
    #[arg(long, value_enum, env = "RLFLEET_LOG_FORMAT", default_value_t = LogFormat::Human, global = true)]
    log_format: LogFormat,
    /// The venv whose packages Python envs (`gymnasium:`, `python:`) import
    /// (default: the set-up's cached venv).
    #[arg(long, env = "RLFLEET_PYTHON_VENV", global = true)]
    python_venv: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Embedded mode: run one config to its stop condition, then exit.
    Run(learner_server::run_command::RunArgs),
    /// Daemon mode: serve actors (QUIC) and the control API (HTTP) until
    /// SIGINT/SIGTERM.
    Serve {
        /// The server config (TOML): listeners, TLS, tokens (given as
        /// `--config FILE` or, as `run` and `check` take theirs, FILE).
        #[arg(long = "config", env = "RLFLEET_SERVER_CONFIG", value_name = "FILE")]
        config: Option<PathBuf>,
        #[arg(value_name = "FILE", conflicts_with = "config", hide = true)]
        config_file: Option<PathBuf>,
        /// Once listening, write the bound addresses and the certificate
        /// fingerprint here as JSON (for scripts and tests).
        #[arg(long)]
        ready_file: Option<PathBuf>,
    },
    /// The learner rank of an MPI job (built with the `mpi` feature):
    /// `mpirun -n 1 learner-server mpi RUN.toml : -n A actor-client mpi`.
    Mpi(MpiArgs),
    /// Check a run config (or with `--server`, a server config) and print
    /// it with every default filled in.
    Check {
        /// The run config (TOML).
        #[arg(required_unless_present = "server", conflicts_with = "server")]
        config: Option<PathBuf>,
        /// Override a config key (as `run --set`).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Check this server config (`serve --config FILE`) instead; token
        /// values are not printed.
        #[arg(long, value_name = "FILE")]
        server: Option<PathBuf>,
    },
    /// Submit, list, show, stop and resume a daemon's runs through its
    /// control API (`--api`, `RLFLEET_API`; `--token`, `RLFLEET_API_TOKEN`).
    Runs {
        #[command(flatten)]
        api: learner_server::client::ApiArgs,
        #[command(subcommand)]
        what: learner_server::client::RunsCommand,
    },
    /// Embedded sweep: the daemon on loopback runs the spec's trials with
    /// local actors, then prints `sweep.csv`.
    Sweep(learner_server::embedded_study::StudyArgs),
    /// Embedded population-based training: the daemon on loopback runs
    /// the spec's members with local actors, then prints `population.csv`.
    Pbt(learner_server::embedded_study::StudyArgs),
    /// Submit, list, show and stop a daemon's sweeps (as `runs`).
    Sweeps {
        #[command(flatten)]
        api: learner_server::client::ApiArgs,
        #[command(subcommand)]
        what: learner_server::client::StudiesCommand,
    },
    /// Submit, list, show and stop a daemon's populations (as `runs`).
    Populations {
        #[command(flatten)]
        api: learner_server::client::ApiArgs,
        #[command(subcommand)]
        what: learner_server::client::StudiesCommand,
    },
    /// Write a finished run's policy as a standalone ONNX model.
    Export {
        /// The run's output directory (config.resolved.toml and
        /// checkpoint.safetensors).
        run_dir: PathBuf,
        /// The ONNX file to write.
        #[arg(long)]
        onnx: PathBuf,
        /// Export the weights of the last checkpoint instead of the best
        /// evaluated ones.
        #[arg(long)]
        latest: bool,
    },
}

/// Flags of `learner-server mpi`.
#[derive(clap::Args, Debug)]
struct MpiArgs {
    /// The run config (TOML); its transport is taken to be "mpi".
    config: PathBuf,
    /// Resume: from this checkpoint (a new run), or alone the newest
    /// unfinished run of this config's name in the state directory, under
    /// its id (a job started again after its learner rank died).
    #[arg(long, value_name = "CHECKPOINT", num_args = 0..=1)]
    resume: Option<Option<PathBuf>>,
    /// Resume the newest unfinished run of this config's name if there is
    /// one, else start a new run (a job script that is started again).
    #[arg(long = "continue", conflicts_with = "resume")]
    continue_: bool,
    /// Where runs are recorded (default: the server config's `state_dir`).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Listeners and tokens (server TOML) for QUIC actors joining the
    /// run from outside the job (default: loopback, ephemeral port).
    #[arg(long)]
    server_config: Option<PathBuf>,
    /// Once listening, write the QUIC address and the certificate
    /// fingerprint here as JSON.
    #[arg(long)]
    ready_file: Option<PathBuf>,
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Human => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Cancels `token` on SIGINT or SIGTERM.
async fn cancel_on_signal(token: CancellationToken) {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::warn!("signal received: stopping (runs checkpoint first)");
    token.cancel();
}

#[cfg(feature = "mpi")]
fn mpi_command(a: MpiArgs) -> ExitCode {
    let (checkpoint, start) = resume_choice(a.resume, a.continue_);
    let mut options = rlfleet_run::workflows::RunOptions::new(checkpoint, false);
    // Every rank writes under the one `output_dir` the job names.
    options.keep_output_dir = true;
    let args = learner_server::mpi_run::MpiRun {
        config: a.config,
        options,
        server_config: a.server_config,
        ready_file: a.ready_file,
        start,
        state_dir: a.state_dir,
    };
    // Before the signal thread: it sets an environment variable.
    rlfleet_shared::mpi::steer_components();
    let token = signal_token();
    match learner_server::mpi_run::run(args, token) {
        // A helper learner: the lead prints the run's summary.
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(summary)) => finish(Ok(summary)),
        Err(e) => finish(Err(e)),
    }
}

#[cfg(not(feature = "mpi"))]
fn mpi_command(_: MpiArgs) -> ExitCode {
    eprintln!(
        "error: this learner-server was built without MPI: cargo build --release --features mpi \
         (needs an MPI library and libclang: RLFLEET_SETUP=test scripts/setup.sh installs OpenMPI and libclang on Debian)"
    );
    ExitCode::from(2)
}

/// A token cancelled on SIGINT or SIGTERM, by a thread of its own (for
/// commands that run without the daemon's runtime at hand).
fn signal_token() -> CancellationToken {
    let token = CancellationToken::new();
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let t = token.clone();
    std::thread::spawn(move || signals.block_on(cancel_on_signal(t)));
    token
}

/// `sweep` and `pbt`, stopped by SIGINT or SIGTERM.
fn study_command(args: learner_server::embedded_study::StudyArgs, population: bool) -> ExitCode {
    let token = signal_token();
    learner_server::embedded_study::command(args, population, token)
}

/// The exit code of a client command.
fn client_exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    learner_server::malloc::keep_tensors_in_the_heap();
    let cli = Cli::parse();
    init_logging(cli.log_format);
    rlfleet_shared::env::python::set_venv(cli.python_venv.clone());
    match cli.command {
        Command::Runs { api, what } => client_exit(learner_server::client::run(&api, what)),
        Command::Sweeps { api, what } => {
            client_exit(learner_server::client::studies(&api, "sweeps", what))
        }
        Command::Populations { api, what } => {
            client_exit(learner_server::client::studies(&api, "populations", what))
        }
        Command::Sweep(args) => study_command(args, false),
        Command::Pbt(args) => study_command(args, true),
        Command::Check {
            server: Some(server),
            ..
        } => match ServerConfig::load(&server) {
            Ok(cfg) => {
                print!("{}", cfg.to_checked_toml());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::Check {
            config: Some(config),
            set,
            ..
        } => match load_config(&config, &set) {
            Ok(cfg) => {
                print!("{}", cfg.to_resolved_toml());
                // What a daemon's `[runs] device_memory_mb` reserves for it.
                if let Ok(spec) = cfg.env_source().spec() {
                    let how = match cfg.fleet.device_memory_mb {
                        Some(_) => "stated",
                        None => "estimated",
                    };
                    println!(
                        "# device memory: {} MB ({how})",
                        cfg.device_memory_mb(&spec)
                    );
                }
                ExitCode::SUCCESS
            }
            Err(code) => {
                if ServerConfig::load(&config).is_ok() {
                    eprintln!(
                        "{} is a server config: check it with `learner-server check --server {0}`",
                        config.display()
                    );
                }
                code
            }
        },
        Command::Check { .. } => unreachable!("clap requires a config or --server"),
        Command::Export {
            run_dir,
            onnx,
            latest,
        } => client_exit(learner_server::export::command(&run_dir, &onnx, latest)),
        Command::Mpi(args) => mpi_command(args),
        Command::Serve {
            config,
            config_file,
            ready_file,
        } => {
            let Some(config) = config.or(config_file) else {
                eprintln!("error: serve needs a server config: learner-server serve --config FILE");
                return ExitCode::from(2);
            };
            let cfg = match ServerConfig::load(&config) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("tokio runtime");
            runtime.block_on(async {
                let shutdown = CancellationToken::new();
                tokio::spawn(cancel_on_signal(shutdown.clone()));
                match daemon::start(&cfg, shutdown).await {
                    Ok(d) => {
                        d.hub
                            .registry
                            .comes_back
                            .store(true, std::sync::atomic::Ordering::Relaxed);
                        d.hub.resume_interrupted();
                        d.studies.resume();
                        if let Some(path) = ready_file
                            && let Err(e) = d.write_ready_file(&path)
                        {
                            eprintln!("error: cannot write {}: {e}", path.display());
                        }
                        d.wait().await;
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("error: {e:#}");
                        ExitCode::FAILURE
                    }
                }
            })
        }
        Command::Run(args) => learner_server::run_command::command(args, signal_token()),
    }
}
