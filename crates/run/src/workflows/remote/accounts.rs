//! [`Accounts`]: what became of every experience batch — received, trained,
//! or dropped with a reason — counted once for the API, the metrics and the
//! optional `batches.csv` audit log. Shared by the run thread and, in the
//! `rma` workflows, the transport tasks that take deposits.

use crate::metrics::RunMetrics;
use crate::state::Journal;
use crate::vocab::DropReason;
use rlfleet_output::CsvFile;
use rlfleet_shared::wire::Experience;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Counts for the API (the same numbers go to the metrics).
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub received: u64,
    pub trained: u64,
    pub dropped: BTreeMap<DropReason, u64>,
    pub transitions: u64,
    pub inference_requests: u64,
    /// `received`, mirrored into the run's record while the run lasts.
    pub journal: Option<Journal>,
}

/// A [`Tally`]'s counts in a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct TallyImage {
    pub received: u64,
    pub trained: u64,
    pub dropped: BTreeMap<String, u64>,
    pub transitions: u64,
    pub inference_requests: u64,
}

impl Tally {
    pub fn image(&self) -> TallyImage {
        TallyImage {
            received: self.received,
            trained: self.trained,
            dropped: self.dropped_by_label(),
            transitions: self.transitions,
            inference_requests: self.inference_requests,
        }
    }

    /// Puts back the counts of `img` (unknown reasons are refused).
    pub fn restore(&mut self, img: &TallyImage) -> anyhow::Result<()> {
        let mut dropped = BTreeMap::new();
        for (label, &n) in &img.dropped {
            let reason = DropReason::ALL
                .into_iter()
                .find(|r| r.label() == label)
                .ok_or_else(|| anyhow::anyhow!("unknown drop reason `{label}` in the books"))?;
            dropped.insert(reason, n);
        }
        self.received = img.received;
        self.trained = img.trained;
        self.dropped = dropped;
        self.transitions = img.transitions;
        self.inference_requests = img.inference_requests;
        Ok(())
    }

    /// Drops by reason label, for the status and the summary.
    pub fn dropped_by_label(&self) -> BTreeMap<String, u64> {
        self.dropped
            .iter()
            .map(|(k, v)| (k.label().to_string(), *v))
            .collect()
    }
}

/// The header of `batches.csv`.
pub const BATCH_LOG_HEADER: &str =
    "actor,session,seq,policy_version,learner_version,transitions,outcome";

/// One row of `batches.csv`: a batch and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchLine {
    pub actor: String,
    pub session: u64,
    pub seq: u64,
    /// The policy version that produced it.
    pub policy_version: u64,
    /// The learner's version when it was trained or dropped.
    pub learner_version: u64,
    pub transitions: u64,
    /// `trained`, or the drop reason's label.
    pub outcome: String,
}

/// The audit log and the first error writing it (reported when the log is
/// flushed for a checkpoint or the end, never dropped).
#[derive(Debug)]
struct BatchLog {
    file: CsvFile<BatchLine>,
    failed: Option<std::io::Error>,
}

#[derive(Debug)]
pub(super) struct Accounts {
    pub tally: Mutex<Tally>,
    metrics: Arc<RunMetrics>,
    log: Option<Mutex<BatchLog>>,
    /// The run has ended: a line written now (a late deposit) is flushed
    /// at once, as nothing flushes the log later.
    ended: AtomicBool,
    /// The learner's version at the last line (what a late batch is
    /// logged with).
    version: AtomicU64,
}

impl Accounts {
    /// With `batch_log`, writes `batches.csv` into `dir` (appending to one
    /// a resumed run left).
    pub fn new(metrics: Arc<RunMetrics>, batch_log: bool, dir: &Path) -> anyhow::Result<Accounts> {
        let log = if batch_log {
            let file = CsvFile::open(&dir.join("batches.csv"), false)?;
            Some(Mutex::new(BatchLog { file, failed: None }))
        } else {
            None
        };
        Ok(Accounts {
            tally: Mutex::default(),
            metrics,
            log,
            ended: AtomicBool::new(false),
            version: AtomicU64::new(0),
        })
    }

    fn record(&self, e: &Experience, learner_version: u64, outcome: &str) {
        self.version.store(learner_version, Ordering::Relaxed);
        if let Some(log) = &self.log {
            let mut log = log.lock().expect("batch log lock");
            let line = BatchLine {
                actor: e.actor_id.clone(),
                session: e.session_id,
                seq: e.seq,
                policy_version: e.policy_version,
                learner_version,
                transitions: e.steps.len() as u64,
                outcome: outcome.to_string(),
            };
            // In memory: only a line that cannot be serialised is lost.
            if let Err(e) = log.file.write(&line)
                && log.failed.is_none()
            {
                tracing::error!("batches.csv: {e} (the audit log misses lines from here)");
                log.failed = Some(e);
            }
            if self.ended.load(Ordering::Acquire)
                && let Err(e) = log.file.flush()
            {
                // The lines wait in memory for the next flush.
                tracing::warn!("batches.csv not written yet: {e}");
            }
        }
    }

    /// A batch arrived (a work request is not a batch).
    pub fn received(&self, e: &Experience) {
        let mut t = self.tally.lock().expect("tally lock");
        t.received += 1;
        let received = t.received;
        if let Some(j) = &mut t.journal
            && !self.ended.load(Ordering::Acquire)
        {
            j.set(received);
        }
        drop(t);
        self.metrics.batches_received.inc();
        self.metrics.batch_transitions.observe(e.steps.len() as f64);
    }

    /// Its transitions went to the agent.
    pub fn trained(&self, e: &Experience, learner_version: u64) {
        let n = e.steps.len() as u64;
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
    pub fn dropped(&self, e: &Experience, learner_version: u64, reason: DropReason) {
        *self
            .tally
            .lock()
            .expect("tally lock")
            .dropped
            .entry(reason)
            .or_default() += 1;
        self.metrics
            .batches_dropped
            .with_label_values(&[reason.label()])
            .inc();
        self.record(e, learner_version, reason.label());
    }

    /// A received batch that came after its run ended.
    pub fn late(&self, e: &Experience) {
        let version = self.version.load(Ordering::Relaxed);
        self.dropped(e, version, DropReason::RunEnded);
    }

    /// The run ended: writes out what the log holds, and every later line
    /// as it comes. (The journal stays at the count the final checkpoint
    /// holds: batches that come later are dropped `run_ended`, not lost.)
    pub fn flush(&self) {
        self.ended.store(true, Ordering::Release);
        if let Some(log) = &self.log {
            let mut log = log.lock().expect("batch log lock");
            if let Err(e) = log.file.flush() {
                // The lines wait in memory: the final checkpoint's flush
                // tries again, and fails the run if it cannot.
                tracing::error!("batches.csv not written yet: {e}");
            }
        }
    }

    /// Writes out what the batch log holds; its length in bytes, if there
    /// is a log. A line that could not be serialised, or lines that cannot
    /// reach the disk now, are an error here (the checkpoint that asks
    /// fails rather than record an incomplete log; unwritten lines wait).
    pub fn flush_log(&self) -> std::io::Result<Option<u64>> {
        match &self.log {
            Some(log) => {
                let mut log = log.lock().expect("batch log lock");
                if let Some(e) = &log.failed {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("batches.csv lost a line: {e}"),
                    ));
                }
                Ok(Some(log.file.file_len()?))
            }
            None => Ok(None),
        }
    }
}
