//! The hub's queue: a run accepted past `[runs] max_active` waits as a
//! [`Plan`]; when a slot frees, the waiting run of highest `priority`
//! starts, the earliest submitted among equals.

use super::{Hub, RunEntry, StartError};
use rlfleet_run::vocab::{RunShared, RunState, RunStatus};
use rlfleet_run::workflows::RunOptions;
use rlfleet_shared::config::RunConfig;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// What starts a run once it has a slot.
#[derive(Debug)]
pub(super) struct Plan {
    pub cfg: RunConfig,
    pub opts: RunOptions,
    /// Continue from the record's latest checkpoint (a resumed run).
    pub resume: bool,
    /// Submission order.
    pub seq: u64,
    /// Device memory it reserves while active, in MB.
    pub device_mb: u64,
}

impl Plan {
    pub fn new(cfg: RunConfig, opts: RunOptions, resume: bool, seq: u64, device_mb: u64) -> Plan {
        Plan {
            cfg,
            opts,
            resume,
            seq,
            device_mb,
        }
    }

    /// Orders waiting runs: the greatest starts first.
    fn rank(&self) -> (i64, std::cmp::Reverse<u64>) {
        (self.cfg.priority, std::cmp::Reverse(self.seq))
    }
}

impl Hub {
    /// Takes run `id` in as queued, then starts waiting runs while slots
    /// are free (so it starts at once when one is).
    pub(super) fn accept(self: &Arc<Self>, runs: &mut Vec<RunEntry>, id: String, plan: Plan) {
        // A resumed run replaces the entry of its earlier life.
        runs.retain(|r| r.id != id);
        let mut status = RunStatus::starting(&id, &plan.cfg);
        status.state = RunState::Queued;
        status.device_memory_mb = plan.device_mb;
        if let Some(record) = &plan.opts.record {
            record.set_state(rlfleet_run::state::RecordState::Queued, None);
        }
        let shared = Arc::new(RunShared {
            status: Mutex::new(status),
            episodes: Mutex::default(),
            watchdog: self.watchdog.clone(),
        });
        let (done_tx, done) = watch::channel(None);
        runs.push(RunEntry {
            id,
            shared,
            cancel: self.registry.shutdown.child_token(),
            done,
            done_tx: Arc::new(done_tx),
            waiting: Some(plan),
            device_mb: 0,
        });
        self.registry.metrics.queued_runs.inc();
        self.start_waiting(runs);
    }

    /// Forgets the oldest ended runs beyond `[runs] keep_ended` (their
    /// records and files stay).
    pub(super) fn forget_ended(&self, runs: &mut Vec<RunEntry>) {
        let ended = runs.iter().filter(|r| r.ended()).count();
        let mut extra = ended.saturating_sub(self.limits.keep_ended as usize);
        runs.retain(|r| {
            let forget = extra > 0 && r.ended();
            extra -= usize::from(forget);
            !forget
        });
    }

    /// Starts waiting runs, best first, while fewer than `max_active` run
    /// and the best fits the device memory the active runs leave; tells
    /// each run left waiting why.
    pub(super) fn start_waiting(self: &Arc<Self>, runs: &mut [RunEntry]) {
        if self.registry.shutdown.is_cancelled() {
            return;
        }
        let why = loop {
            let Some(next) = runs
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.waiting.as_ref().map(|p| (i, p)))
                .max_by_key(|(_, p)| p.rank())
                .map(|(i, _)| i)
            else {
                return;
            };
            let active = runs.iter().filter(|r| r.active()).count();
            if active >= self.limits.max_active as usize {
                break format!(
                    "waiting for a slot: {active} runs are active ([runs] max_active = {})",
                    self.limits.max_active
                );
            }
            let plan = runs[next].waiting.as_ref().expect("waiting");
            if let Some(limit) = self.limits.device_memory_mb {
                let reserved: u64 = runs
                    .iter()
                    .filter(|r| r.active())
                    .map(|r| r.device_mb)
                    .sum();
                if reserved + plan.device_mb > limit {
                    let head = format!(
                        "waiting for device memory: needs {} MB, {reserved} of {limit} MB are reserved by active runs ([runs] device_memory_mb)",
                        plan.device_mb
                    );
                    let behind = format!(
                        "waiting behind run `{}`, which waits for device memory",
                        runs[next].id
                    );
                    for (i, r) in runs.iter().enumerate() {
                        if r.waiting.is_some() {
                            let reason = if i == next { &head } else { &behind };
                            r.shared.status.lock().expect("status lock").queued_reason =
                                Some(reason.clone());
                        }
                    }
                    return;
                }
            }
            let next = &mut runs[next];
            let plan = next.waiting.take().expect("waiting");
            self.registry.metrics.queued_runs.dec();
            next.device_mb = plan.device_mb;
            next.shared
                .status
                .lock()
                .expect("status lock")
                .queued_reason = None;
            self.spawn_run(next, plan);
        };
        for r in runs.iter().filter(|r| r.waiting.is_some()) {
            r.shared.status.lock().expect("status lock").queued_reason = Some(why.clone());
        }
    }

    /// Device memory run `cfg` reserves while active, in MB: what it
    /// states, else (while `[runs] device_memory_mb` is set) the estimate
    /// over its env's spec; refused when it could never fit.
    pub fn device_mb(&self, cfg: &RunConfig) -> Result<u64, StartError> {
        let Some(limit) = self.limits.device_memory_mb else {
            return Ok(cfg.fleet.device_memory_mb.unwrap_or(0));
        };
        let mb = match cfg.fleet.device_memory_mb {
            Some(mb) => mb,
            None => match cfg.env_source().spec() {
                Ok(spec) => cfg.device_memory_mb(&spec),
                // The run fails with this when it starts; until then it
                // reserves the least a run takes.
                Err(e) => {
                    tracing::warn!(run = %cfg.name, "cannot estimate the run's device memory: {e}");
                    rlfleet_shared::config::RUN_OVERHEAD_MB
                }
            },
        };
        if mb > limit {
            return Err(StartError::Invalid(format!(
                "run `{}` needs {mb} MB of device memory ([fleet] device_memory_mb, or the daemon's estimate), more than the daemon's [runs] device_memory_mb = {limit}: it could never start",
                cfg.name
            )));
        }
        Ok(mb)
    }
}
