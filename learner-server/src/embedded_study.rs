//! `learner-server sweep SPEC` and `learner-server pbt SPEC`: the daemon on
//! loopback, one sweep or population, and N local actors serving its runs
//! one after another; everything shut down once the study has ended.

use crate::daemon;
use crate::embedded::{LocalActors, LocalProcesses, finish_actors, start_actors};
use crate::server_config::ServerConfig;
use crate::studies::Studies;
use crate::studies::population::PopulationSpec;
use crate::studies::store::StudyState;
use crate::studies::sweep::SweepSpec;
use rlfleet_shared::config::{RunConfig, TransportKind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A study to run embedded.
#[derive(Debug)]
pub enum Study {
    Sweep(SweepSpec),
    Population(PopulationSpec),
}

/// How an embedded study ended.
#[derive(Debug)]
pub struct Outcome {
    pub id: String,
    pub state: StudyState,
    /// `sweep.csv` or `population.csv`.
    pub csv: PathBuf,
}

impl Study {
    fn base(&self) -> &RunConfig {
        match self {
            Study::Sweep(s) => &s.base,
            Study::Population(p) => &p.base,
        }
    }

    fn start(&self, studies: &Arc<Studies>) -> anyhow::Result<String> {
        Ok(match self {
            Study::Sweep(s) => studies.start_sweep(s.clone())?,
            Study::Population(p) => studies.start_population(p.clone())?,
        })
    }

    /// Where the study is, and its CSV.
    fn state(&self, studies: &Studies, id: &str) -> (StudyState, PathBuf) {
        match self {
            Study::Sweep(_) => {
                let v = studies.sweep(id).expect("held").view();
                (v.state, v.csv.into())
            }
            Study::Population(_) => {
                let v = studies.population(id).expect("held").view();
                (v.state, v.csv.into())
            }
        }
    }
}

/// Runs `study` with local actors, its runs recorded in `state_dir`.
/// Cancelled (a signal), the daemon shuts down as `serve` does: the runs
/// checkpoint, and the study stays active for a daemon on the same state
/// directory to take back.
pub async fn run(
    study: Study,
    state_dir: &Path,
    actors: LocalActors,
    cancel: CancellationToken,
) -> anyhow::Result<Outcome> {
    let base = study.base();
    anyhow::ensure!(
        base.transport != TransportKind::Mpi,
        "base.transport = \"mpi\": a study's runs are served by a daemon (quic or inproc)"
    );
    anyhow::ensure!(
        base.workflow.is_distributed(),
        "base.workflow = \"{}\" runs without actors: a study needs an actor/learner workflow",
        base.workflow
    );
    let binary = (actors.count > 0 && base.transport != TransportKind::Inproc)
        .then(|| crate::embedded::actor_binary(&actors.binary))
        .transpose()?;
    let mut scfg = ServerConfig::default();
    scfg.actors.listen = ([127, 0, 0, 1], 0).into();
    scfg.actors.tls_dir = base.output_dir.join("tls");
    scfg.api.listen = ([127, 0, 0, 1], 0).into();
    scfg.state_dir = state_dir.to_path_buf();
    let shutdown = CancellationToken::new();
    let d = daemon::start(&scfg, shutdown.clone()).await?;
    let id = study.start(&d.studies)?;
    eprintln!("{id}: started; GET http://{}/v1/ for its runs", d.api_addr);
    let stop_tasks = CancellationToken::new();
    let (children, tasks) = start_actors(&d, &actors, binary.as_deref(), false, &stop_tasks)?;
    let all_failed = CancellationToken::new();
    let watch = LocalProcesses::watch(children, all_failed.clone());
    let (state, csv) = loop {
        let (state, csv) = study.state(&d.studies, &id);
        if state != StudyState::Active || cancel.is_cancelled() || all_failed.is_cancelled() {
            break (state, csv);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = cancel.cancelled() => {}
            _ = all_failed.cancelled() => {}
        }
    };
    shutdown.cancel();
    d.wait().await;
    let first_failure = finish_actors(&stop_tasks, tasks, watch).await;
    if all_failed.is_cancelled() && state == StudyState::Active && !cancel.is_cancelled() {
        anyhow::bail!(
            "every local actor-client failed before {id} ended (the first: {}); its runs checkpointed",
            first_failure.as_deref().unwrap_or("no status")
        );
    }
    Ok(Outcome { id, state, csv })
}

/// Flags of `learner-server sweep` and `learner-server pbt`.
#[derive(clap::Args, Debug)]
pub struct StudyArgs {
    /// The spec (TOML); its `base` names a run config file or holds one
    /// as a `[base]` table.
    pub spec: PathBuf,
    /// Where runs and studies are recorded.
    #[arg(long, default_value = crate::server_config::DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
    /// The local actors, serving the study's runs one after another.
    #[command(flatten)]
    pub actors: crate::embedded::LocalActorFlags,
}

/// `learner-server sweep|pbt`: reads the spec, runs the study, prints
/// where its CSV is. Exit codes: 0 ended, 2 bad spec, 1 other errors,
/// 130 stopped by a signal.
pub fn command(
    args: StudyArgs,
    population: bool,
    cancel: CancellationToken,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    let study = if population {
        crate::studies::spec_file::load(&args.spec).map(Study::Population)
    } else {
        crate::studies::spec_file::load(&args.spec).map(Study::Sweep)
    };
    let study = match study {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let actors = args.actors.actors();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run(study, &args.state_dir, actors, cancel.clone())) {
        Ok(o) if cancel.is_cancelled() => {
            eprintln!(
                "{}: interrupted; its runs checkpointed (`learner-server serve` on {} takes it back)",
                o.id,
                args.state_dir.display()
            );
            ExitCode::from(130)
        }
        Ok(o) => {
            println!("{} {:?}: {}", o.id, o.state, o.csv.display());
            if let Ok(text) = std::fs::read_to_string(&o.csv) {
                print!("{text}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
