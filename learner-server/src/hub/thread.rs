//! A run's life on its own thread: lock and mark its record, build it,
//! add it to the registry's fleet, run it, record how it ended, free its
//! slot for the next waiting run, and drop its metrics after
//! `[runs] metrics_retention_secs`.

use super::queue::Plan;
use super::{Hub, RunEntry};
use rlfleet_run::state::RecordState;
use rlfleet_run::vocab::{ActiveRun, RunShared, RunState};
use rlfleet_run::workflows::remote::RemoteRun;
use rlfleet_run::workflows::{self, RunOptions, RunSummary};
use rlfleet_shared::config::RunConfig;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

impl Hub {
    /// Starts the run of `entry` on its own thread (the runs lock held,
    /// so that no other run takes the slot in between).
    pub(super) fn spawn_run(self: &Arc<Self>, entry: &RunEntry, plan: Plan) {
        let id = entry.id.clone();
        let Plan {
            cfg,
            mut opts,
            resume,
            ..
        } = plan;
        let lock = match opts.record.as_ref().map(|r| r.lock()).transpose() {
            Ok(lock) => lock,
            Err(e) => {
                let e = format!("{e:#}");
                tracing::error!(run = %id, "cannot start the run: {e}");
                let mut s = entry.shared.status.lock().expect("status lock");
                s.state = RunState::Failed;
                s.error = Some(e.clone());
                drop(s);
                let _ = entry.done_tx.send(Some(Err(e)));
                return;
            }
        };
        if let Some(record) = &opts.record {
            if resume {
                if let Err(e) = record.resumed() {
                    tracing::error!(run = %id, "cannot mark the run resumed: {e:#}");
                }
                opts.resume = record.latest_checkpoint();
                tracing::info!(run = %id, checkpoint = ?opts.resume, "resuming the run from its latest checkpoint");
                self.registry.metrics.runs_resumed.inc();
            } else {
                record.set_state(RecordState::Active, None);
            }
        }
        opts.device = Some(self.device.seat(cfg.fleet.weight));
        entry.shared.status.lock().expect("status lock").state = RunState::Running;
        self.registry.metrics.runs_started.inc();
        self.registry.metrics.active_runs.inc();
        let hub = self.clone();
        let shared = entry.shared.clone();
        let cancel = entry.cancel.clone();
        let done_tx = entry.done_tx.clone();
        let rt = self.runtime();
        std::thread::Builder::new()
            .name(format!("run {id}"))
            .spawn(move || {
                // A panic fails this run alone.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    hub.run_thread(&id, &cfg, &opts, shared.clone(), &cancel, &rt)
                }))
                .unwrap_or_else(|panic| Err(format!("the run panicked: {}", panic_text(&*panic))));
                hub.registry.remove_run(&id);
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
                        tracing::info!(run = %id, "{summary}");
                    }
                    Err(e) => {
                        s.state = RunState::Failed;
                        s.error = Some(e.clone());
                        tracing::error!(run = %id, "run failed: {e}");
                    }
                }
                drop(s);
                let _ = done_tx.send(Some(result));
                hub.forget_metrics_later(&cfg.name, &id, &rt);
                let mut runs = hub.runs.lock().expect("runs lock");
                hub.forget_ended(&mut runs);
                hub.start_waiting(&mut runs);
            })
            .expect("spawn run thread");
    }

    /// The daemon's runtime, remembered from the first call made in it.
    fn runtime(&self) -> tokio::runtime::Handle {
        self.rt
            .lock()
            .expect("runtime lock")
            .clone()
            .or_else(|| tokio::runtime::Handle::try_current().ok())
            .expect("runs are accepted from within the daemon's runtime")
    }

    /// Drops run `id`'s series from `/metrics` once the retention has
    /// passed, unless it is running again by then (resumed).
    fn forget_metrics_later(self: &Arc<Self>, name: &str, id: &str, rt: &tokio::runtime::Handle) {
        let hub = Arc::downgrade(self);
        let (name, id) = (name.to_string(), id.to_string());
        let after = Duration::from_secs(self.limits.metrics_retention_secs);
        rt.spawn(async move {
            tokio::time::sleep(after).await;
            let Some(hub) = hub.upgrade() else {
                return;
            };
            if hub.with_run(&id, |r| r.ended()).unwrap_or(true) {
                hub.registry.metrics.forget_run(&name, &id);
            }
        });
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
            self.registry.metrics.run(&cfg.name, id),
            shared,
            self.registry.max_actors,
        )
        .map_err(|e| format!("{e:#}"))?;
        let inbox = run.inbox(rt);
        self.registry.add_run(ActiveRun {
            id: id.to_string(),
            name: cfg.name.clone(),
            share: cfg.fleet.clone(),
            events: inbox,
        });
        let result = run.run(cancel).map_err(|e| format!("{e:#}"));
        self.registry.remove_run(id);
        result
    }
}

/// What a panic said.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}
