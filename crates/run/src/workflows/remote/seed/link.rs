//! [`SeedLink`]: what a `seed` run's thread and its inference front share —
//! the connections with their pending episode starts, the latest policy,
//! how far training has got, what the front did, and the stop signal.

use crate::vocab::ConnId;
use crate::workflows::FrontFigures;
use rlfleet_shared::wire::EpisodeStart;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// One admitted actor connection, as the front needs it.
#[derive(Debug, Default)]
pub struct ConnBox {
    pub n_envs: u32,
    /// Episodes handed out by the run, not yet delivered in a reply.
    pub starts: Vec<EpisodeStart>,
}

/// The policy the front acts with.
#[derive(Debug, Clone)]
pub struct PolicySnapshot {
    pub version: u64,
    /// Flat parameters (shared: the front copies them once per version).
    pub params: std::sync::Arc<[f32]>,
    pub epsilon: f32,
}

#[derive(Debug)]
pub struct SeedLink {
    pub conns: Mutex<HashMap<ConnId, ConnBox>>,
    pub policy: Mutex<PolicySnapshot>,
    /// Inference batches the run has ingested and trained on.
    pub batches_done: AtomicU64,
    /// The front holds requests until training catches up.
    pub front_waits: AtomicBool,
    /// Actors in the run (the front serves at once when all are waiting).
    pub actors: AtomicUsize,
    /// Wakes the front: new starts, new policy, training progress.
    pub wake: Notify,
    /// Cancelled when the run ends; the front then answers `Stop`.
    pub stop: CancellationToken,
    pub stop_reason: Mutex<String>,
    /// What the front did, for the run's summary.
    pub tally: FrontTally,
}

/// The front's counts, kept where the run's thread can read them when the
/// run ends (microseconds, so that they can be atomics).
#[derive(Debug, Default)]
pub struct FrontTally {
    batches: AtomicU64,
    rows: AtomicU64,
    answered: AtomicU64,
    latency_us: AtomicU64,
    stall_us: AtomicU64,
    /// Times the front's loop woke (a request, a wake, a batch's deadline).
    turns: AtomicU64,
}

impl FrontTally {
    /// One forward pass for `rows` envs, answering requests that waited
    /// `waits` in all.
    pub fn served(&self, rows: usize, answered: usize, waits: std::time::Duration) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        self.answered.fetch_add(answered as u64, Ordering::Relaxed);
        self.latency_us
            .fetch_add(waits.as_micros() as u64, Ordering::Relaxed);
    }

    /// The front's loop woke once more.
    pub fn turn(&self) {
        self.turns.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times the front's loop woke (checked by the tests: a
    /// front held behind training sleeps).
    #[cfg(test)]
    pub fn turns(&self) -> u64 {
        self.turns.load(Ordering::Relaxed)
    }

    /// A ready batch was held this long behind training.
    pub fn stalled(&self, held: std::time::Duration) {
        self.stall_us
            .fetch_add(held.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn figures(&self) -> FrontFigures {
        let secs = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-6;
        FrontFigures {
            batches: self.batches.load(Ordering::Relaxed),
            rows: self.rows.load(Ordering::Relaxed),
            answered: self.answered.load(Ordering::Relaxed),
            latency_secs: secs(&self.latency_us),
            stall_secs: secs(&self.stall_us),
        }
    }
}

impl SeedLink {
    pub fn new(policy: PolicySnapshot) -> SeedLink {
        SeedLink {
            conns: Mutex::default(),
            policy: Mutex::new(policy),
            batches_done: AtomicU64::new(0),
            front_waits: AtomicBool::new(false),
            actors: AtomicUsize::new(0),
            wake: Notify::new(),
            stop: CancellationToken::new(),
            stop_reason: Mutex::new(String::new()),
            tally: FrontTally::default(),
        }
    }

    pub fn admit(&self, conn: ConnId, n_envs: u32) {
        let mut conns = self.conns.lock().expect("conns lock");
        conns.insert(
            conn,
            ConnBox {
                n_envs,
                starts: Vec::new(),
            },
        );
        self.actors.store(conns.len(), Ordering::Release);
    }

    pub fn forget(&self, conn: ConnId) {
        let mut conns = self.conns.lock().expect("conns lock");
        conns.remove(&conn);
        self.actors.store(conns.len(), Ordering::Release);
        drop(conns);
        self.wake.notify_one();
    }

    /// Queues episode starts for the next reply to `conn`.
    pub fn deliver(&self, conn: ConnId, starts: Vec<EpisodeStart>) {
        if starts.is_empty() {
            return;
        }
        if let Some(b) = self.conns.lock().expect("conns lock").get_mut(&conn) {
            b.starts.extend(starts);
        }
        self.wake.notify_one();
    }

    /// Publishes a new policy version (and the current epsilon).
    pub fn publish(&self, version: u64, params: std::sync::Arc<[f32]>, epsilon: f32) {
        let mut p = self.policy.lock().expect("policy lock");
        if p.version != version {
            p.params = params;
            p.version = version;
        }
        p.epsilon = epsilon;
    }

    /// The run took one more batch (ingested and trained); wakes the
    /// front only when it waits for that.
    pub fn batch_done(&self) {
        self.batches_done.fetch_add(1, Ordering::AcqRel);
        if self.front_waits.swap(false, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    pub fn end(&self, reason: &str) {
        *self.stop_reason.lock().expect("reason lock") = reason.to_string();
        self.stop.cancel();
    }
}
