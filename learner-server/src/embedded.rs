//! Embedded mode (`learner-server run CONFIG --local-actors N`): the daemon
//! on loopback, one run, and N actors — real `actor-client` processes over
//! QUIC (`transport = "quic"`), or actor tasks in this process over the
//! in-process transport (`transport = "inproc"`) — everything shut down
//! when the run ends.

use crate::daemon;
use crate::server_config::ServerConfig;
use anyhow::Context;
use rlfleet_run::state::Start;
use rlfleet_run::workflows::{RunOptions, RunSummary};
use rlfleet_shared::config::{RunConfig, TransportKind};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How embedded actors are started.
#[derive(Debug, Clone)]
pub struct LocalActors {
    pub count: usize,
    pub envs_per_actor: u32,
    /// Connections each actor process splits its envs over (`actor-client
    /// --lanes`; actor processes only).
    pub lanes_per_actor: u32,
    /// The `actor-client` binary (default: next to this executable).
    pub binary: Option<PathBuf>,
}

/// The local-actor flags of `run`, `sweep` and `pbt`.
#[derive(clap::Args, Debug)]
pub struct LocalActorFlags {
    /// Start this many `actor-client` processes on loopback QUIC (tasks in
    /// this process when the transport is "inproc"; 0: wait for actors
    /// started elsewhere).
    #[arg(long, default_value_t = 4)]
    pub local_actors: usize,
    /// Environments each local actor runs.
    #[arg(long, default_value_t = 1)]
    pub envs_per_actor: u32,
    /// Connections each local actor process splits its envs over
    /// (`actor-client --lanes`): under `seed`, one lane's envs step
    /// while another waits for its actions.
    #[arg(long, default_value_t = 1)]
    pub lanes_per_actor: u32,
}

impl LocalActorFlags {
    pub fn actors(&self) -> LocalActors {
        LocalActors {
            count: self.local_actors,
            envs_per_actor: self.envs_per_actor,
            lanes_per_actor: self.lanes_per_actor,
            binary: None,
        }
    }
}

pub(crate) fn actor_binary(given: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(b) = given {
        return Ok(b.clone());
    }
    if let Some(b) = std::env::var_os("RLFLEET_ACTOR_CLIENT") {
        return Ok(PathBuf::from(b));
    }
    let exe = std::env::current_exe().context("locating this executable")?;
    let b = exe.with_file_name("actor-client");
    anyhow::ensure!(
        b.exists(),
        "`{}` not found: build it (cargo build --release -p actor-client) or set RLFLEET_ACTOR_CLIENT",
        b.display()
    );
    Ok(b)
}

/// Runs `cfg` with local actor processes, its run recorded in `state_dir`;
/// returns the run's summary.
pub async fn run(
    cfg: RunConfig,
    opts: RunOptions,
    start: Start,
    state_dir: &std::path::Path,
    actors: LocalActors,
    cancel: CancellationToken,
) -> anyhow::Result<RunSummary> {
    anyhow::ensure!(
        cfg.transport != TransportKind::Mpi,
        "transport = \"mpi\": the actors are MPI ranks; start the run with `{}`",
        rlfleet_shared::config::MPI_LAUNCH
    );
    let inproc = cfg.transport == TransportKind::Inproc;
    anyhow::ensure!(
        actors.lanes_per_actor == 1 || !inproc,
        "--lanes-per-actor {}: lanes are for actor processes (transport = \"quic\"); \
         in-process actors are tasks already",
        actors.lanes_per_actor
    );
    let output_dir = cfg.output_dir.clone();
    let binary = if actors.count > 0 && !inproc {
        Some(actor_binary(&actors.binary)?)
    } else {
        None
    };
    let mut scfg = ServerConfig::default();
    scfg.actors.listen = ([127, 0, 0, 1], 0).into();
    scfg.actors.tls_dir = cfg.output_dir.join("tls");
    scfg.api.listen = ([127, 0, 0, 1], 0).into();
    scfg.state_dir = state_dir.to_path_buf();
    let shutdown = CancellationToken::new();
    let d = daemon::start(&scfg, shutdown.clone()).await?;
    let id = start_or_resume(&d.hub, cfg, opts, &start, state_dir)?;
    if actors.count == 0 {
        eprintln!(
            "waiting for actors: actor-client --server {} --pin {}",
            d.actors_addr, d.fingerprint
        );
    }
    let stop_tasks = CancellationToken::new();
    let (children, tasks) = start_actors(&d, &actors, binary.as_deref(), true, &stop_tasks)?;
    // The run is stopped as on a signal when every actor process has
    // failed: with none left, it would wait for actors forever.
    let stop_run = cancel.child_token();
    let watch = LocalProcesses::watch(children, stop_run.clone());
    let result = wait_run(&d.hub, &id, &stop_run, &output_dir).await;
    let actors_failed = stop_run.is_cancelled() && !cancel.is_cancelled();
    shutdown.cancel();
    d.wait().await;
    let first_failure = finish_actors(&stop_tasks, tasks, watch).await;
    if actors_failed {
        anyhow::bail!(
            "every local actor-client failed before the run ended (the first: {}; its own error is above); \
             the run was stopped as on a signal, keeping what it had accepted",
            first_failure.as_deref().unwrap_or("no status")
        );
    }
    result
}

/// An in-process actor's task.
pub(crate) type ActorTask =
    tokio::task::JoinHandle<anyhow::Result<actor_client::remote::ActorReport>>;

/// Starts `actors.count` local actors on daemon `d`: `actor-client`
/// processes of `binary`, or in-process tasks when it is `None`. `once`:
/// each leaves when its first run ends (else it serves run after run).
pub(crate) fn start_actors(
    d: &daemon::Daemon,
    actors: &LocalActors,
    binary: Option<&std::path::Path>,
    once: bool,
    stop_tasks: &CancellationToken,
) -> anyhow::Result<(Vec<tokio::process::Child>, Vec<ActorTask>)> {
    let mut children = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..actors.count {
        let Some(binary) = binary else {
            let link = crate::transport::inproc::connect(&d.hub.registry);
            let player = actor_client::remote::Player {
                actor_id: format!("local-{i}"),
                token: String::new(),
                envs: actors.envs_per_actor,
                once,
                run: None,
                inference: actor_client::remote::Inference::Rust,
                env_factory: None,
            };
            let stop = stop_tasks.clone();
            tasks.push(tokio::spawn(async move {
                actor_client::remote::run_inproc(&player, link, stop).await
            }));
            continue;
        };
        let mut cmd = tokio::process::Command::new(binary);
        cmd.arg("--server")
            .arg(d.actors_addr.to_string())
            .arg("--pin")
            .arg(&d.fingerprint)
            .arg("--envs")
            .arg(actors.envs_per_actor.to_string())
            .arg("--lanes")
            .arg(actors.lanes_per_actor.to_string())
            .arg("--actor-id")
            .arg(format!("local-{i}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .kill_on_drop(true);
        if once {
            cmd.arg("--once");
        }
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "warn");
        }
        children.push(cmd.spawn().context("starting an actor-client process")?);
    }
    Ok((children, tasks))
}

/// Stops the in-process actors and waits for them and the processes;
/// returns the first failed exit of a process, if any.
pub(crate) async fn finish_actors(
    stop_tasks: &CancellationToken,
    tasks: Vec<ActorTask>,
    watch: LocalProcesses,
) -> Option<String> {
    stop_tasks.cancel();
    for t in tasks {
        match t.await {
            Ok(Ok(report)) => eprintln!("{report}"),
            Ok(Err(e)) => tracing::warn!("an in-process actor failed: {e:#}"),
            Err(e) => tracing::warn!("an in-process actor panicked: {e}"),
        }
    }
    watch.finish().await
}

/// The local actor processes, each awaited by a task of its own: a failed
/// exit is logged when it happens, and when every process has failed (none
/// was ever told to leave: leaving is a success), `stop` fires.
pub(crate) struct LocalProcesses {
    waits: Vec<tokio::task::JoinHandle<()>>,
    monitor: tokio::task::JoinHandle<Option<String>>,
}

impl LocalProcesses {
    pub(crate) fn watch(
        children: Vec<tokio::process::Child>,
        stop: CancellationToken,
    ) -> LocalProcesses {
        let count = children.len();
        let (tx, mut exits) = tokio::sync::mpsc::unbounded_channel();
        let waits = children
            .into_iter()
            .map(|mut child| {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let _ = tx.send(child.wait().await);
                })
            })
            .collect();
        // Ends when every process's task has reported (with none, at once).
        let monitor = tokio::spawn(async move {
            let (mut failed, mut first) = (0, None);
            while let Some(exit) = exits.recv().await {
                let why = match exit {
                    Ok(status) if status.success() => continue,
                    Ok(status) => status.to_string(),
                    Err(e) => format!("cannot wait for it: {e}"),
                };
                tracing::warn!("an actor-client exited with {why}");
                first.get_or_insert(why);
                failed += 1;
                if failed == count {
                    stop.cancel();
                }
            }
            first
        });
        LocalProcesses { waits, monitor }
    }

    /// Gives the processes 10 s to exit, kills the rest; returns the first
    /// failed exit, if any.
    async fn finish(self) -> Option<String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        for mut wait in self.waits {
            if tokio::time::timeout_at(deadline, &mut wait).await.is_err() {
                tracing::warn!("an actor-client did not exit; killing it");
                // Dropping its `Child` kills it (`kill_on_drop`).
                wait.abort();
                let _ = wait.await;
            }
        }
        self.monitor.await.ok().flatten()
    }
}

/// Starts `cfg` on `hub`, or resumes the newest unfinished run of its name
/// in `state_dir` (with the job's learners, if any); returns the run's id.
pub(crate) fn start_or_resume(
    hub: &std::sync::Arc<crate::hub::Hub>,
    cfg: RunConfig,
    opts: RunOptions,
    start: &Start,
    state_dir: &std::path::Path,
) -> anyhow::Result<String> {
    Ok(match start.settle(state_dir, &cfg.name)? {
        Start::New | Start::Continue => hub.start_run(cfg, opts)?,
        Start::ResumeLatest => {
            let id = rlfleet_run::state::StateDir::open(state_dir)?
                .resumable(&cfg.name)?
                .id;
            hub.resume_run(&id, opts.learners)?
        }
    })
}

/// Writes what `/metrics` serves now to `metrics.prom` in `output_dir`.
pub(crate) fn write_metrics(hub: &crate::hub::Hub, output_dir: &std::path::Path) {
    if let Err(e) = std::fs::write(output_dir.join("metrics.prom"), hub.metrics().render()) {
        tracing::warn!("cannot write metrics.prom: {e}");
    }
}

/// Waits for the daemon's only run to end (stopping it when `cancel`
/// fires), then writes the daemon's metrics beside the run's other output
/// (what `/metrics` served last).
pub(crate) async fn wait_run(
    hub: &std::sync::Arc<crate::hub::Hub>,
    id: &str,
    cancel: &CancellationToken,
    output_dir: &std::path::Path,
) -> anyhow::Result<RunSummary> {
    let result = tokio::select! {
        r = hub.wait_run(id) => r,
        _ = cancel.cancelled() => {
            hub.stop_run(id);
            hub.wait_run(id).await
        }
    };
    write_metrics(hub, output_dir);
    match result {
        Some(Ok(summary)) => Ok(summary),
        Some(Err(e)) => Err(anyhow::anyhow!(e)),
        None => anyhow::bail!("the run vanished"),
    }
}
