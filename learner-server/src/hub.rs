//! [`Hub`]: the daemon's runs. It starts runs (one active at a time) on
//! their own threads, records them in the state directory, publishes the
//! active run to the [`Registry`] transports route actors by, and keeps
//! each run's [`RunShared`] snapshots for the control API.

use crate::registry::Registry;
use rlfleet_run::metrics::Metrics;
use rlfleet_run::state::{RecordState, RunRecord, StateDir};
use rlfleet_run::vocab::{ActiveRun, EpisodeView, RunShared, RunState, RunStatus};
use rlfleet_run::workflows::remote::RemoteRun;
use rlfleet_run::workflows::{self, RunOptions, RunSummary};
use rlfleet_shared::config::RunConfig;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
struct RunEntry {
    id: String,
    shared: Arc<RunShared>,
    cancel: CancellationToken,
    done: watch::Receiver<Option<Result<RunSummary, String>>>,
}

/// Why a run could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("run `{0}` is active: stop it first")]
    Conflict(String),
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("run `{0}` is not in the state directory")]
    NotFound(String),
    #[error("run `{0}` finished: a finished run is not resumed")]
    Finished(String),
    #[error("{0}")]
    State(String),
    /// Another process holds the run's lock.
    #[error("{0}")]
    Held(String),
}

/// The daemon's shared state.
#[derive(Debug)]
pub struct Hub {
    /// The actors and the active run, as transports see them.
    pub registry: Arc<Registry>,
    /// Every run started, oldest first.
    runs: Mutex<Vec<RunEntry>>,
    next_run: AtomicU64,
    /// systemd's watchdog: distributed runs ping it from their loop.
    pub watchdog: Arc<rlfleet_run::notify::Watchdog>,
    /// Where runs are recorded (and found again after a restart).
    pub state: Option<StateDir>,
}

impl Hub {
    pub fn new(
        metrics: Arc<Metrics>,
        shutdown: CancellationToken,
        max_actors: u32,
        state: Option<StateDir>,
    ) -> Arc<Hub> {
        Arc::new(Hub {
            registry: Arc::new(Registry::new(metrics, shutdown, max_actors)),
            runs: Mutex::default(),
            next_run: AtomicU64::new(1),
            watchdog: Arc::new(rlfleet_run::notify::Watchdog::from_env()),
            state,
        })
    }

    /// Starts a validated run on its own thread; returns its id. Call it
    /// from within the daemon's tokio runtime (a `seed` run's inference
    /// front runs there).
    pub fn start_run(
        self: &Arc<Self>,
        cfg: RunConfig,
        mut opts: RunOptions,
    ) -> Result<String, StartError> {
        let runs = self.runs.lock().expect("runs lock");
        self.may_start(&runs)?;
        let id = match &self.state {
            Some(state) => {
                let record = state
                    .create_run(&cfg)
                    .map_err(|e| StartError::State(format!("{e:#}")))?;
                let id = record.id.clone();
                opts.record = Some(record);
                id
            }
            None => format!(
                "{}-{}",
                cfg.name,
                self.next_run.fetch_add(1, Ordering::Relaxed)
            ),
        };
        let lock = match &opts.record {
            Some(r) => Some(r.lock().map_err(|e| StartError::State(format!("{e:#}")))?),
            None => None,
        };
        Ok(self.spawn_run(runs, id, cfg, opts, lock))
    }

    /// Resumes recorded run `id` from its latest checkpoint (from its
    /// start if it has none) under the same id.
    /// `learners`: the job's learner ranks (`ml-*` over MPI).
    pub fn resume_run(
        self: &Arc<Self>,
        id: &str,
        learners: Option<workflows::Learners>,
    ) -> Result<String, StartError> {
        let runs = self.runs.lock().expect("runs lock");
        self.may_start(&runs)?;
        let record = self
            .state
            .as_ref()
            .and_then(|s| s.record(id))
            .ok_or_else(|| StartError::NotFound(id.to_string()))?;
        let info = record
            .info()
            .map_err(|e| StartError::State(format!("{e:#}")))?;
        if info.state == RecordState::Finished {
            return Err(StartError::Finished(id.to_string()));
        }
        let cfg = record
            .config()
            .map_err(|e| StartError::State(format!("{e:#}")))?;
        let lock = record
            .lock()
            .map_err(|e| StartError::Held(format!("{e:#}")))?;
        record
            .resumed()
            .map_err(|e| StartError::State(format!("{e:#}")))?;
        let checkpoint = record.latest_checkpoint();
        tracing::info!(
            run = %id,
            checkpoint = ?checkpoint,
            "resuming the run from its latest checkpoint"
        );
        self.registry.metrics.runs_resumed.inc();
        let opts = RunOptions {
            resume: checkpoint,
            progress: false,
            learners,
            record: Some(record),
        };
        Ok(self.spawn_run(runs, id.to_string(), cfg, opts, Some(lock)))
    }

    /// The daemon's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.registry.metrics
    }

    /// Cancelled when the daemon shuts down.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.registry.shutdown
    }

    /// Resumes the run the state directory says was active when the
    /// daemon stopped (the newest, should there be more: the others are
    /// marked stopped). Returns its id.
    pub fn resume_interrupted(self: &Arc<Self>) -> Option<String> {
        let state = self.state.as_ref()?;
        let mut active: Vec<RunRecord> = state
            .records()
            .into_iter()
            .filter(|r| r.info().is_ok_and(|i| i.state == RecordState::Active))
            .collect();
        let newest = active.pop()?;
        for older in active {
            tracing::warn!(run = %older.id, "also recorded as active: marked stopped");
            older.set_state(
                RecordState::Stopped,
                Some(format!("interrupted while {} was active", newest.id)),
            );
        }
        match self.resume_run(&newest.id, None) {
            Ok(id) => Some(id),
            // Another process runs it: leave its record alone.
            Err(e @ StartError::Held(_)) => {
                tracing::error!(run = %newest.id, "cannot resume the interrupted run: {e}");
                None
            }
            Err(e) => {
                tracing::error!(run = %newest.id, "cannot resume the interrupted run: {e}");
                newest.set_state(RecordState::Failed, Some(e.to_string()));
                None
            }
        }
    }

    /// Errors unless a run may start now.
    fn may_start(&self, runs: &[RunEntry]) -> Result<(), StartError> {
        if self.registry.shutdown.is_cancelled() {
            return Err(StartError::ShuttingDown);
        }
        if let Some(r) = runs.iter().find(|r| r.done.borrow().is_none()) {
            return Err(StartError::Conflict(r.id.clone()));
        }
        Ok(())
    }

    /// Starts run `id` on its own thread (the runs lock held, so that no
    /// other run starts in between).
    fn spawn_run(
        self: &Arc<Self>,
        mut runs: std::sync::MutexGuard<'_, Vec<RunEntry>>,
        id: String,
        cfg: RunConfig,
        opts: RunOptions,
        lock: Option<std::fs::File>,
    ) -> String {
        // A resumed run replaces the entry of its earlier life.
        runs.retain(|r| r.id != id);
        let shared = Arc::new(RunShared {
            status: Mutex::new(RunStatus::starting(&id, &cfg)),
            episodes: Mutex::default(),
            watchdog: self.watchdog.clone(),
        });
        let cancel = self.registry.shutdown.child_token();
        let (done_tx, done) = watch::channel(None);
        runs.push(RunEntry {
            id: id.clone(),
            shared: shared.clone(),
            cancel: cancel.clone(),
            done,
        });
        self.registry.metrics.runs_started.inc();
        self.registry.metrics.active_runs.inc();
        let hub = self.clone();
        let run_id = id.clone();
        let rt = tokio::runtime::Handle::current();
        std::thread::Builder::new()
            .name(format!("run {id}"))
            .spawn(move || {
                let result = hub.run_thread(&run_id, &cfg, &opts, shared.clone(), &cancel, &rt);
                hub.registry.set_active(None);
                hub.registry.metrics.active_runs.dec();
                if let Some(record) = &opts.record {
                    // Interrupted by the daemon's shutdown: the next daemon
                    // resumes it.
                    let interrupted = hub.registry.shutdown.is_cancelled();
                    workflows::record_end(
                        record,
                        result.as_ref().map_err(Clone::clone),
                        interrupted,
                    );
                }
                // Released only now that the record says how it ended.
                drop(lock);
                let mut s = shared.status.lock().expect("status lock");
                match &result {
                    Ok(summary) => {
                        s.state = RunState::Finished;
                        s.reason = Some(summary.reason.to_string());
                        tracing::info!(run = %run_id, "{summary}");
                    }
                    Err(e) => {
                        s.state = RunState::Failed;
                        s.error = Some(e.clone());
                        tracing::error!(run = %run_id, "run failed: {e}");
                    }
                }
                drop(s);
                let _ = done_tx.send(Some(result));
            })
            .expect("spawn run thread");
        id
    }

    fn run_thread(
        &self,
        id: &str,
        cfg: &RunConfig,
        opts: &RunOptions,
        shared: Arc<RunShared>,
        cancel: &CancellationToken,
        rt: &tokio::runtime::Handle,
    ) -> Result<RunSummary, String> {
        tracing::info!(run = %id, workflow = %cfg.workflow, env = %cfg.env, "run started");
        if !cfg.workflow.is_distributed() {
            return workflows::run(cfg, opts, cancel.clone()).map_err(|e| format!("{e:#}"));
        }
        let mut run = RemoteRun::new(
            id,
            cfg,
            opts,
            self.registry.metrics.clone(),
            shared,
            self.registry.max_actors,
        )
        .map_err(|e| format!("{e:#}"))?;
        let inbox = run.inbox(rt);
        self.registry.set_active(Some(ActiveRun {
            id: id.to_string(),
            events: inbox,
        }));
        let result = run.run(cancel).map_err(|e| format!("{e:#}"));
        self.registry.set_active(None);
        result
    }

    /// Applies `f` to run `id`, if there is one.
    fn with_run<T>(&self, id: &str, f: impl FnOnce(&RunEntry) -> T) -> Option<T> {
        let runs = self.runs.lock().expect("runs lock");
        runs.iter().find(|r| r.id == id).map(f)
    }

    /// Asks a run to stop (it checkpoints first). False if there is no such
    /// run.
    pub fn stop_run(&self, id: &str) -> bool {
        self.with_run(id, |r| r.cancel.cancel()).is_some()
    }

    pub fn run_status(&self, id: &str) -> Option<RunStatus> {
        self.with_run(id, |r| r.shared.status.lock().expect("status lock").clone())
    }

    pub fn list_runs(&self) -> Vec<RunStatus> {
        let runs = self.runs.lock().expect("runs lock");
        runs.iter()
            .map(|r| r.shared.status.lock().expect("status lock").clone())
            .collect()
    }

    /// Episodes of a run from index `since` on.
    pub fn episodes(&self, id: &str, since: usize) -> Option<Vec<EpisodeView>> {
        self.with_run(id, |r| {
            let eps = r.shared.episodes.lock().expect("episodes lock");
            eps.iter().skip(since).cloned().collect()
        })
    }

    /// Waits for a run to end; returns its summary or error.
    pub async fn wait_run(&self, id: &str) -> Option<Result<RunSummary, String>> {
        let mut done = self.with_run(id, |r| r.done.clone())?;
        let r = done.wait_for(|d| d.is_some()).await.ok()?;
        r.clone()
    }

    /// Waits until every run has ended.
    pub async fn wait_all(&self) {
        let dones: Vec<_> = self
            .runs
            .lock()
            .expect("runs lock")
            .iter()
            .map(|r| r.done.clone())
            .collect();
        for mut d in dones {
            let _ = d.wait_for(|d| d.is_some()).await;
        }
    }
}
