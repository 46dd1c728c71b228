//! `learner-server run`: its flags, reading the config (with `--set
//! KEY=VALUE` overrides), and the exit code of the run it starts (0 done,
//! 2 bad config, 1 error, 130 stopped by a signal).

use crate::embedded;
use rlfleet_run::state::Start;
use rlfleet_run::workflows::{self, RunOptions, StopReason};
use rlfleet_shared::config::{RunConfig, parse_assignment};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// Flags of `learner-server run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The run config (TOML).
    pub config: PathBuf,
    /// Override a config key: `--set dqn.lr=0.001 --set seed=3 --set
    /// output_dir=runs/seed3` (values in TOML: numbers, `true`, `[64, 64]`;
    /// anything else is a string).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The run's seed (as `--set seed=N`).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Write into `output_dir` even when it holds another run's results
    /// (by default a new run takes the first free `<output_dir>-2`, `-3`,
    /// …).
    #[arg(long)]
    pub overwrite: bool,
    /// Resume: with a checkpoint file, a new run from that checkpoint
    /// (weights, optimizer state, counters, books); alone, the newest
    /// run of this config's name in the state directory that did not
    /// finish, from its latest checkpoint, under its id.
    #[arg(long, value_name = "CHECKPOINT", num_args = 0..=1)]
    pub resume: Option<Option<PathBuf>>,
    /// Resume the newest unfinished run of this config's name if the
    /// state directory holds one, else start a new run (what a systemd
    /// unit or a requeued job runs each time).
    #[arg(long = "continue", conflicts_with = "resume")]
    pub continue_: bool,
    /// Where runs are recorded (config, state, rotated checkpoints).
    #[arg(long, default_value = crate::server_config::DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
    /// Do not draw the progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Distributed workflows: the local actors.
    #[command(flatten)]
    pub actors: embedded::LocalActorFlags,
}

/// Reads a config, applies `--set` overrides, validates; a problem is
/// printed and is exit code 2.
pub fn load_config(path: &Path, sets: &[String]) -> Result<RunConfig, ExitCode> {
    let bad = |e: String| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    };
    let cfg = RunConfig::load(path).map_err(|e| bad(e.to_string()))?;
    if sets.is_empty() {
        return Ok(cfg);
    }
    let values = sets
        .iter()
        .map(|s| parse_assignment(s).map_err(|e| format!("--set {s}: {e}")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    cfg.with_values(&values)
        .map_err(|e| bad(format!("--set: {e}")))
}

/// The exit code of a finished run, printing its summary or error.
pub fn finish(result: anyhow::Result<workflows::RunSummary>) -> ExitCode {
    match result {
        Ok(summary) => {
            println!("{summary}");
            if summary.reason == StopReason::Cancelled {
                ExitCode::from(130)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// What `--resume [CHECKPOINT]` or `--continue` asks for: a new run (from
/// a checkpoint file, if one is named), the newest unfinished recorded run,
/// or that if there is one and a new run if not.
pub fn resume_choice(resume: Option<Option<PathBuf>>, continue_: bool) -> (Option<PathBuf>, Start) {
    match resume {
        None if continue_ => (None, Start::Continue),
        None => (None, Start::New),
        Some(Some(path)) => (Some(path), Start::New),
        Some(None) => (None, Start::ResumeLatest),
    }
}

/// `learner-server run`, stopped (checkpointing) when `cancel` fires.
pub fn command(a: RunArgs, cancel: CancellationToken) -> ExitCode {
    let mut sets = a.set.clone();
    sets.extend(a.seed.map(|s| format!("seed={s}")));
    let cfg = match load_config(&a.config, &sets) {
        Ok(cfg) => cfg,
        Err(code) => return code,
    };
    let (checkpoint, start) = resume_choice(a.resume, a.continue_);
    let mut opts = RunOptions::new(
        checkpoint,
        !a.no_progress && std::io::stderr().is_terminal(),
    );
    opts.keep_output_dir = a.overwrite;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let state_dir = a.state_dir;
    let result = runtime.block_on(async {
        if cfg.workflow.is_distributed() {
            let actors = a.actors.actors();
            Ok(embedded::run(cfg, opts, start, &state_dir, actors, cancel).await)
        } else {
            tokio::task::spawn_blocking(move || {
                workflows::run_recorded(&cfg, opts, start, &state_dir, cancel)
            })
            .await
        }
    });
    match result {
        Ok(r) => finish(r),
        Err(e) => {
            eprintln!("error: the run panicked: {e}");
            ExitCode::FAILURE
        }
    }
}
