//! [`Hub`]: the daemon's runs. It accepts runs, starts up to `[runs]
//! max_active` of them at once on their own threads (the rest wait
//! queued, highest `priority` first), records them in the state
//! directory, adds each active run to the [`Registry`] whose fleet shares
//! the actors between them, and keeps each run's [`RunShared`] snapshots
//! for the control API.

mod queue;
mod thread;

use crate::registry::Registry;
use crate::server_config::RunsConfig;
use queue::Plan;
use rlfleet_run::metrics::Metrics;
use rlfleet_run::state::{RecordState, RunRecord, StateDir};
use rlfleet_run::turns::DeviceTurns;
use rlfleet_run::vocab::{EpisodeView, RunShared, RunState, RunStatus};
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
    done_tx: Arc<watch::Sender<Option<Result<RunSummary, String>>>>,
    /// What starts it, while it waits for a slot.
    waiting: Option<Plan>,
    /// Device memory it reserves once started, in MB.
    device_mb: u64,
}

impl RunEntry {
    fn ended(&self) -> bool {
        self.done.borrow().is_some()
    }

    fn active(&self) -> bool {
        self.waiting.is_none() && !self.ended()
    }
}

/// Why a run could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("run `{0}` is active or queued: stop it first")]
    Conflict(String),
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("run `{0}` is not in the state directory")]
    NotFound(String),
    #[error("run `{0}` finished: a finished run is not resumed")]
    Finished(String),
    #[error("{0}")]
    State(String),
    /// A sweep or population spec that cannot run (names the problem).
    #[error("{0}")]
    Invalid(String),
    /// Another process holds the run's lock.
    #[error("{0}")]
    Held(String),
}

/// The daemon's shared state.
#[derive(Debug)]
pub struct Hub {
    /// The actors and the active runs, as transports see them.
    pub registry: Arc<Registry>,
    /// Every run accepted, oldest first.
    runs: Mutex<Vec<RunEntry>>,
    next_run: AtomicU64,
    /// Submission order of queued runs.
    next_seq: AtomicU64,
    /// systemd's watchdog: distributed runs ping it from their loop.
    pub watchdog: Arc<rlfleet_run::notify::Watchdog>,
    /// Where runs are recorded (and found again after a restart).
    pub state: Option<StateDir>,
    /// Slots and metrics retention (`[runs]`).
    limits: RunsConfig,
    /// The daemon's tokio runtime (a `seed` run's inference front and the
    /// metrics' retention timers run there).
    rt: Mutex<Option<tokio::runtime::Handle>>,
    /// The learner's device, shared by the active runs' gradient steps.
    pub device: Arc<DeviceTurns>,
}

impl Hub {
    pub fn new(
        metrics: Arc<Metrics>,
        shutdown: CancellationToken,
        max_actors: u32,
        state: Option<StateDir>,
        limits: RunsConfig,
    ) -> Arc<Hub> {
        Arc::new(Hub {
            registry: Arc::new(Registry::new(metrics, shutdown, max_actors)),
            runs: Mutex::default(),
            next_run: AtomicU64::new(1),
            next_seq: AtomicU64::new(1),
            watchdog: Arc::new(rlfleet_run::notify::Watchdog::from_env()),
            state,
            device: DeviceTurns::new(limits.sharing(rlfleet_learning::device::is_gpu())),
            limits,
            rt: Mutex::new(None),
        })
    }

    /// Accepts a validated run: started at once on its own thread while a
    /// slot is free, else queued. Returns its id. Call it from within the
    /// daemon's tokio runtime.
    pub fn start_run(
        self: &Arc<Self>,
        mut cfg: RunConfig,
        mut opts: RunOptions,
    ) -> Result<String, StartError> {
        self.remember_runtime();
        let device_mb = self.device_mb(&cfg)?;
        let mut runs = self.runs.lock().expect("runs lock");
        self.may_accept()?;
        // Never into another run's results (a free sibling instead).
        workflows::settle_output_dir(&mut cfg, &opts)
            .map_err(|e| StartError::State(format!("{e:#}")))?;
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
        let plan = Plan::new(
            cfg,
            opts,
            false,
            self.next_seq.fetch_add(1, Ordering::Relaxed),
            device_mb,
        );
        self.accept(&mut runs, id.clone(), plan);
        Ok(id)
    }

    /// Resumes recorded run `id` from its latest checkpoint (from its
    /// start if it has none) under the same id: at once while a slot is
    /// free, else queued. `learners`: the job's learner ranks (`ml-*` over
    /// MPI).
    pub fn resume_run(
        self: &Arc<Self>,
        id: &str,
        learners: Option<workflows::Learners>,
    ) -> Result<String, StartError> {
        self.remember_runtime();
        let mut runs = self.runs.lock().expect("runs lock");
        self.may_accept()?;
        if runs.iter().any(|r| r.id == id && !r.ended()) {
            return Err(StartError::Conflict(id.to_string()));
        }
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
        // Refused now, not when a slot frees: another process runs it.
        drop(
            record
                .lock()
                .map_err(|e| StartError::Held(format!("{e:#}")))?,
        );
        let device_mb = self.device_mb(&cfg)?;
        // A run queued before it ever started starts from scratch.
        let resume = info.state != RecordState::Queued || record.latest_checkpoint().is_some();
        let opts = RunOptions {
            resume: None,
            progress: false,
            learners,
            record: Some(record),
            device: None,
            // Its own results are there.
            keep_output_dir: true,
        };
        let plan = Plan::new(
            cfg,
            opts,
            resume,
            self.next_seq.fetch_add(1, Ordering::Relaxed),
            device_mb,
        );
        self.accept(&mut runs, id.to_string(), plan);
        Ok(id.to_string())
    }

    /// The daemon's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.registry.metrics
    }

    /// Cancelled when the daemon shuts down.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.registry.shutdown
    }

    /// Takes back every run the state directory says was active or queued
    /// when the daemon stopped, oldest first: they resume (or start)
    /// while slots are free and queue after. Returns their ids.
    pub fn resume_interrupted(self: &Arc<Self>) -> Vec<String> {
        let Some(state) = self.state.as_ref() else {
            return Vec::new();
        };
        let records: Vec<RunRecord> = state
            .records()
            .into_iter()
            .filter(|r| {
                r.info()
                    .is_ok_and(|i| matches!(i.state, RecordState::Active | RecordState::Queued))
            })
            .collect();
        let mut ids = Vec::new();
        for record in records {
            match self.resume_run(&record.id, None) {
                Ok(id) => ids.push(id),
                // Another process runs it: leave its record alone.
                Err(e @ StartError::Held(_)) => {
                    tracing::error!(run = %record.id, "cannot resume the interrupted run: {e}");
                }
                Err(e) => {
                    tracing::error!(run = %record.id, "cannot resume the interrupted run: {e}");
                    record.set_state(RecordState::Failed, Some(e.to_string()));
                }
            }
        }
        ids
    }

    /// Errors unless a run may be accepted now.
    fn may_accept(&self) -> Result<(), StartError> {
        if self.registry.shutdown.is_cancelled() {
            return Err(StartError::ShuttingDown);
        }
        Ok(())
    }

    fn remember_runtime(&self) {
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            self.rt.lock().expect("runtime lock").get_or_insert(h);
        }
    }

    /// Applies `f` to run `id`, if there is one.
    fn with_run<T>(&self, id: &str, f: impl FnOnce(&RunEntry) -> T) -> Option<T> {
        let runs = self.runs.lock().expect("runs lock");
        runs.iter().find(|r| r.id == id).map(f)
    }

    /// Asks a run to stop (it checkpoints first); a queued run leaves the
    /// queue, recorded as stopped. False if there is no such run.
    pub fn stop_run(self: &Arc<Self>, id: &str) -> bool {
        let mut runs = self.runs.lock().expect("runs lock");
        let Some(entry) = runs.iter_mut().find(|r| r.id == id) else {
            return false;
        };
        match entry.waiting.take() {
            Some(plan) => {
                self.registry.metrics.queued_runs.dec();
                if let Some(record) = &plan.opts.record {
                    record.set_state(RecordState::Stopped, Some("stopped while queued".into()));
                }
                let mut s = entry.shared.status.lock().expect("status lock");
                s.state = RunState::Finished;
                s.reason = Some("stopped while queued".into());
                drop(s);
                let _ = entry
                    .done_tx
                    .send(Some(Err("stopped while queued".to_string())));
            }
            None => entry.cancel.cancel(),
        }
        true
    }

    pub fn run_status(&self, id: &str) -> Option<RunStatus> {
        self.with_run(id, |r| self.status_of(r))
    }

    /// A run's status with its share of the fleet now.
    fn status_of(&self, r: &RunEntry) -> RunStatus {
        let mut s = r.shared.status.lock().expect("status lock").clone();
        s.envs = self.registry.envs_of(&r.id);
        s
    }

    /// Every run, oldest first; only those in `state` when given.
    pub fn list_runs(&self, state: Option<RunState>) -> Vec<RunStatus> {
        let runs = self.runs.lock().expect("runs lock");
        runs.iter()
            .map(|r| self.status_of(r))
            .filter(|s| state.is_none_or(|want| s.state == want))
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

    /// Waits until every run has ended (queued runs are dropped from the
    /// queue once the daemon shuts down: they stay queued in the record).
    pub async fn wait_all(&self) {
        let dones: Vec<_> = self
            .runs
            .lock()
            .expect("runs lock")
            .iter()
            .filter(|r| r.waiting.is_none())
            .map(|r| r.done.clone())
            .collect();
        for mut d in dones {
            let _ = d.wait_for(|d| d.is_some()).await;
        }
    }
}
