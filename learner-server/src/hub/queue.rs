//! The hub's queue: a run accepted past `[runs] max_active` waits as a
//! [`Plan`]; when a slot frees, the waiting run of highest `priority`
//! starts, the earliest submitted among equals.

use super::{Hub, RunEntry};
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
}

impl Plan {
    pub fn new(cfg: RunConfig, opts: RunOptions, resume: bool, seq: u64) -> Plan {
        Plan {
            cfg,
            opts,
            resume,
            seq,
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

    /// Starts waiting runs, best first, while fewer than `max_active` run.
    pub(super) fn start_waiting(self: &Arc<Self>, runs: &mut [RunEntry]) {
        if self.registry.shutdown.is_cancelled() {
            return;
        }
        loop {
            let active = runs.iter().filter(|r| r.active()).count();
            if active >= self.limits.max_active as usize {
                return;
            }
            let Some(next) = runs
                .iter_mut()
                .filter(|r| r.waiting.is_some())
                .max_by_key(|r| r.waiting.as_ref().expect("waiting").rank())
            else {
                return;
            };
            let plan = next.waiting.take().expect("waiting");
            self.registry.metrics.queued_runs.dec();
            self.spawn_run(next, plan);
        }
    }
}
