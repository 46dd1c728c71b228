//! [`Accounts`]: what became of every experience batch — received, trained,
//! or dropped with a reason — counted once for the API, the metrics and the
//! optional `batches.csv` audit log. Shared by the run thread and, in the
//! `rma` workflows, the transport tasks that take deposits.

use super::Tally;
use crate::metrics::Metrics;
use rlfleet_shared::wire::Experience;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The header of `batches.csv`.
pub const BATCH_LOG_HEADER: &str =
    "actor,session,seq,policy_version,learner_version,transitions,outcome";

#[derive(Debug)]
pub(super) struct Accounts {
    pub tally: Mutex<Tally>,
    metrics: Arc<Metrics>,
    log: Option<Mutex<BufWriter<File>>>,
    /// The run has ended: a line written now (a late deposit) is flushed
    /// at once, as nothing flushes the log later.
    ended: AtomicBool,
}

impl Accounts {
    /// With `batch_log`, writes `batches.csv` into `dir` (appending to one
    /// a resumed run left).
    pub fn new(metrics: Arc<Metrics>, batch_log: bool, dir: &Path) -> anyhow::Result<Accounts> {
        let log = if batch_log {
            let w = crate::output::append_csv(&dir.join("batches.csv"), BATCH_LOG_HEADER)?;
            Some(Mutex::new(w))
        } else {
            None
        };
        Ok(Accounts {
            tally: Mutex::default(),
            metrics,
            log,
            ended: AtomicBool::new(false),
        })
    }

    fn record(&self, e: &Experience, learner_version: u64, outcome: &str) {
        if let Some(log) = &self.log {
            let mut w = log.lock().expect("batch log lock");
            let _ = writeln!(
                w,
                "{},{},{},{},{},{},{}",
                e.actor_id,
                e.session_id,
                e.seq,
                e.policy_version,
                learner_version,
                e.transitions.len(),
                outcome
            );
            if self.ended.load(Ordering::Acquire) {
                let _ = w.flush();
            }
        }
    }

    /// A batch with transitions arrived (a request without any is not a
    /// batch).
    pub fn received(&self, e: &Experience) {
        self.tally.lock().expect("tally lock").received += 1;
        self.metrics.batches_received.inc();
        self.metrics
            .batch_transitions
            .observe(e.transitions.len() as f64);
    }

    /// Its transitions went to the agent.
    pub fn trained(&self, e: &Experience, learner_version: u64) {
        let n = e.transitions.len() as u64;
        let mut t = self.tally.lock().expect("tally lock");
        t.trained += 1;
        t.transitions += n;
        drop(t);
        self.metrics.env_steps.inc_by(n);
        self.metrics.transitions_ingested.inc_by(n);
        self.metrics.batches_trained.inc();
        self.metrics
            .policy_lag
            .observe(learner_version.saturating_sub(e.policy_version) as f64);
        self.record(e, learner_version, "trained");
    }

    /// It was not (and will not be) trained on.
    pub fn dropped(&self, e: &Experience, learner_version: u64, reason: &'static str) {
        *self
            .tally
            .lock()
            .expect("tally lock")
            .dropped
            .entry(reason)
            .or_default() += 1;
        self.metrics
            .batches_dropped
            .with_label_values(&[reason])
            .inc();
        self.record(e, learner_version, reason);
    }

    /// The run ended: writes out what the log holds, and every later line
    /// as it comes.
    pub fn flush(&self) {
        self.ended.store(true, Ordering::Release);
        if let Some(log) = &self.log {
            let _ = log.lock().expect("batch log lock").flush();
        }
    }
}
