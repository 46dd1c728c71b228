//! [`Pools`]: the one-sided side of the `rma` workflows. Each actor has a
//! pool on the learner (a latest-value buffer, a queue or a stack, as
//! `distributed.data_structure` says) that its transport task deposits
//! batches into without the learner loop taking part — the deposit is
//! checked, deduplicated and acknowledged right there, finished episodes
//! are recorded, the next episode ids are taken from the shared ledger
//! (the fetch-and-add counter) and the newest weights are read from the
//! published slot. The run thread pops the pools when it is ready to train.
//! Every overwrite or overflow is counted with its reason.

use super::super::accounts::{Accounts, DropReason};
use super::super::core::{issue_starts, refusal, stop_message};
use super::super::ingest::check_submission;
use super::super::ledger::{EpisodeLedger, Finish};
use super::super::workflow::{Bypass, Input, Internal};
use crate::metrics::Metrics;
use crate::transport::{Answer, ConnId, Reply};
use rlfleet_shared::config::{DataStructure, Overflow};
use rlfleet_shared::env::Space;
use rlfleet_shared::wire::{self, ErrorCode, Experience, Message, Submission, WeightsMsg};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use tokio::sync::oneshot;

/// The fixed facts a deposit is checked against.
#[derive(Debug, Clone)]
pub(super) struct PoolRules {
    pub structure: DataStructure,
    pub length: usize,
    pub overflow: Overflow,
    pub obs_dim: usize,
    pub action_space: Space,
    pub seed: u64,
}

/// An episode end recorded at deposit, for the run thread to write out.
#[derive(Debug, Clone, Copy)]
pub(super) struct Finished {
    pub conn: ConnId,
    pub actor: u32,
    pub episode: u64,
    pub ret: f64,
    pub length: u32,
}

/// Sequence numbers seen from one (actor, session).
#[derive(Debug, Default, Clone, Copy)]
struct Seqs {
    /// Highest accepted.
    accepted: u64,
    /// The first refused (full) that has not been accepted since: later
    /// deposits are refused too, so that order is kept.
    refused_from: Option<u64>,
}

#[derive(Debug)]
pub(super) struct Pool {
    pub index: u32,
    actor_id: String,
    n_envs: u32,
    pub batches: VecDeque<Arc<Experience>>,
    /// `buff-unchecked`: the seq of the batch last read (it stays in place).
    pub last_read: Option<u64>,
    sent_version: Option<u64>,
    /// A request with nothing to hand out, answered when episodes come
    /// back or the run ends.
    pub parked: Option<(u64, Vec<u32>, Reply)>,
    /// Its last request said it has nothing more to play.
    pub sentinel: bool,
    /// The connection left; the pool is drained, then removed.
    pub gone: bool,
}

#[derive(Debug, Default)]
pub(super) struct Inner {
    /// Set when the run ends: deposits are answered `Stop`.
    pub closed: Option<String>,
    pub pools: BTreeMap<ConnId, Pool>,
    seqs: HashMap<(String, u64), Seqs>,
    finished: Vec<Finished>,
    weights: Option<WeightsMsg>,
    epsilon: f32,
    /// Round-robin position of the fetcher.
    pub cursor: ConnId,
}

/// The pools of one run.
#[derive(Debug)]
pub struct Pools {
    pub(super) inner: Mutex<Inner>,
    pub(super) rules: PoolRules,
    ledger: Arc<Mutex<EpisodeLedger>>,
    accounts: Arc<Accounts>,
    metrics: Arc<Metrics>,
    /// Wakes the run thread (at most one wake-up queued).
    wake: Mutex<Option<mpsc::Sender<Input>>>,
    wake_queued: AtomicBool,
    /// Signalled on every deposit and at close (the `rma-queue-pop-all`
    /// fetcher waits on it with `inner`).
    pub(super) deposited: Condvar,
    /// `rma-queue-pop-all`: a fetched set waits for the run thread (the
    /// fetcher takes the next one only once the run thread has taken it).
    pub(super) fetched_waiting: Mutex<bool>,
    pub(super) fetched_taken: Condvar,
}

impl Bypass for Pools {
    fn serves(&self, msg: &Message) -> bool {
        Submission::is_submission(msg)
    }

    fn take(&self, conn: ConnId, msg: Message) -> Answer {
        let Ok(s) = Submission::from_message(msg) else {
            unreachable!("serves submissions only")
        };
        self.deposit(conn, s)
    }

    fn late(&self, conn: ConnId, e: Experience) -> Option<Experience> {
        // Closed pools count it `run_ended` and log it.
        drop(self.deposit(conn, Submission::Batch(e)));
        None
    }
}

impl Pools {
    pub(super) fn new(
        rules: PoolRules,
        ledger: Arc<Mutex<EpisodeLedger>>,
        accounts: Arc<Accounts>,
        metrics: Arc<Metrics>,
    ) -> Pools {
        Pools {
            inner: Mutex::default(),
            rules,
            ledger,
            accounts,
            metrics,
            wake: Mutex::new(None),
            wake_queued: AtomicBool::new(false),
            deposited: Condvar::new(),
            fetched_waiting: Mutex::new(false),
            fetched_taken: Condvar::new(),
        }
    }

    pub(super) fn set_wake(&self, events: mpsc::Sender<Input>) {
        *self.wake.lock().expect("wake lock") = Some(events);
    }

    /// Tells the run thread there is something to look at.
    fn wake(&self) {
        if !self.wake_queued.swap(true, Ordering::AcqRel)
            && let Some(tx) = &*self.wake.lock().expect("wake lock")
        {
            let _ = tx.send(Input::Internal(Internal::Wake));
        }
    }

    /// The run thread took the wake-up.
    pub(super) fn woken(&self) {
        self.wake_queued.store(false, Ordering::Release);
    }

    pub(super) fn admit(
        &self,
        conn: ConnId,
        index: u32,
        actor_id: &str,
        n_envs: u32,
        version: u64,
    ) {
        self.inner.lock().expect("pools lock").pools.insert(
            conn,
            Pool {
                index,
                actor_id: actor_id.to_string(),
                n_envs,
                batches: VecDeque::new(),
                last_read: None,
                sent_version: Some(version),
                parked: None,
                sentinel: false,
                gone: false,
            },
        );
    }

    /// The connection left: its pool is drained by the run thread, then
    /// removed.
    pub(super) fn forget(&self, conn: ConnId) {
        let mut g = self.inner.lock().expect("pools lock");
        if let Some(p) = g.pools.get_mut(&conn) {
            p.gone = true;
            p.parked = None;
        }
    }

    /// Publishes weights into the slot deposits read from.
    pub(super) fn publish(&self, weights: WeightsMsg, epsilon: f32) {
        let mut g = self.inner.lock().expect("pools lock");
        g.weights = Some(weights);
        g.epsilon = epsilon;
    }

    pub(super) fn epsilon(&self, epsilon: f32) {
        self.inner.lock().expect("pools lock").epsilon = epsilon;
    }

    /// Takes one submission from `conn`'s transport task and returns
    /// where its answer will come from (at once, unless the actor has to
    /// wait for an episode).
    pub fn deposit(&self, conn: ConnId, s: Submission) -> oneshot::Receiver<Message> {
        let (tx, rx) = oneshot::channel();
        let answer = self.take(conn, s, tx);
        if let Some((tx, m)) = answer {
            let _ = tx.send(m);
        }
        self.deposited.notify_all();
        self.wake();
        rx
    }

    /// A submission's batch, if it is one, received and dropped.
    fn drop_received(&self, s: &Submission, version: u64, reason: DropReason) {
        if let Some(e) = s.batch() {
            self.accounts.received(e);
            self.accounts.dropped(e, version, reason);
        }
    }

    fn refuse(&self, s: &Submission, version: u64, code: ErrorCode, text: String) -> Message {
        self.drop_received(s, version, DropReason::Invalid);
        refusal(&self.metrics, code, text)
    }

    /// The deposit itself; `Some` with the answer, `None` when parked.
    fn take(&self, conn: ConnId, s: Submission, tx: Reply) -> Option<(Reply, Message)> {
        let mut g = self.inner.lock().expect("pools lock");
        let g = &mut *g;
        let version = g.weights.as_ref().map_or(0, |w| w.version);
        if let Some(reason) = &g.closed {
            self.drop_received(&s, version, DropReason::RunEnded);
            return Some((tx, stop_message(reason)));
        }
        let Some(pool) = g.pools.get_mut(&conn) else {
            let m = self.refuse(
                &s,
                version,
                ErrorCode::Unexpected,
                "experience before a welcome".into(),
            );
            return Some((tx, m));
        };
        let check = check_submission(
            &s,
            &pool.actor_id,
            self.rules.obs_dim,
            &self.rules.action_space,
            pool.n_envs,
        );
        if let Err((code, text)) = check {
            return Some((tx, self.refuse(&s, version, code, text)));
        }
        let seq = s.seq();
        let seqs = g
            .seqs
            .entry((s.actor_id().to_string(), s.session_id()))
            .or_default();
        let full = |pool: &Pool| {
            matches!(
                self.rules.structure,
                DataStructure::Queue | DataStructure::Stack
            ) && self.rules.overflow == Overflow::Reject
                && s.batch().is_some()
                && pool.batches.len() >= self.rules.length
        };
        let duplicate = seq <= seqs.accepted;
        if !duplicate && (seqs.refused_from.is_some_and(|r| seq > r) || full(pool)) {
            // Refused, nothing counted: the actor sends it again.
            seqs.refused_from = Some(seqs.refused_from.map_or(seq, |r| r.min(seq)));
            let full = Message::Ack(wire::Ack {
                seq,
                duplicate: false,
                weights: None,
                epsilon: g.epsilon,
                starts: vec![],
                full: true,
            });
            return Some((tx, full));
        }
        if duplicate {
            self.drop_received(&s, version, DropReason::Duplicate);
            let ack = self.ack(pool, g.weights.as_ref(), g.epsilon, seq, true, vec![]);
            return Some((tx, ack));
        }
        seqs.accepted = seq;
        seqs.refused_from = None;
        let mut ledger = self.ledger.lock().expect("ledger lock");
        for f in s.batch().map_or(&[][..], |e| &e.finished) {
            if ledger.finish(f.episode, (conn, f.env)) == Finish::Counted {
                g.finished.push(Finished {
                    conn,
                    actor: pool.index,
                    episode: f.episode,
                    ret: f.ret,
                    length: f.length,
                });
            }
        }
        let idle = s.idle_envs().to_vec();
        let starts = issue_starts(&mut ledger, &self.metrics, self.rules.seed, conn, &idle);
        let nothing_to_do = starts.is_empty() && ledger.held_by(conn) == 0;
        drop(ledger);
        pool.sentinel = s.last() && nothing_to_do;
        if let Submission::Batch(e) = s {
            self.accounts.received(&e);
            self.put(pool, e, version);
        }
        if nothing_to_do {
            pool.parked = Some((seq, idle, tx));
            return None;
        }
        let ack = self.ack(pool, g.weights.as_ref(), g.epsilon, seq, false, starts);
        Some((tx, ack))
    }

    /// Puts an accepted batch into its pool; counts what it pushes out.
    fn put(&self, pool: &mut Pool, e: Experience, version: u64) {
        let e = Arc::new(e);
        match self.rules.structure {
            DataStructure::BuffUnchecked => {
                if let Some(old) = pool.batches.pop_back()
                    && pool.last_read != Some(old.seq)
                {
                    self.accounts
                        .dropped(&old, version, DropReason::Overwritten);
                }
                pool.batches.push_back(e);
            }
            DataStructure::BuffChecked => {
                if let Some(old) = pool.batches.pop_back() {
                    self.accounts
                        .dropped(&old, version, DropReason::Overwritten);
                }
                pool.batches.push_back(e);
            }
            DataStructure::Queue | DataStructure::Stack => {
                // With `reject`, a full pool never gets here.
                if pool.batches.len() >= self.rules.length
                    && let Some(old) = pool.batches.pop_front()
                {
                    self.accounts.dropped(&old, version, DropReason::Overflow);
                }
                pool.batches.push_back(e);
            }
        }
    }

    fn ack(
        &self,
        pool: &mut Pool,
        weights: Option<&WeightsMsg>,
        epsilon: f32,
        seq: u64,
        duplicate: bool,
        starts: Vec<wire::EpisodeStart>,
    ) -> Message {
        let weights = weights
            .filter(|w| pool.sent_version.is_none_or(|v| v < w.version))
            .cloned();
        if let Some(w) = &weights {
            pool.sent_version = Some(w.version);
        }
        Message::Ack(wire::Ack {
            seq,
            duplicate,
            weights,
            epsilon,
            starts,
            full: false,
        })
    }

    /// Episode ends recorded since the last call.
    pub(super) fn take_finished(&self) -> Vec<Finished> {
        std::mem::take(&mut self.inner.lock().expect("pools lock").finished)
    }

    /// Hands episodes that came back (an actor left) to waiting actors.
    pub(super) fn serve_parked(&self) {
        let mut g = self.inner.lock().expect("pools lock");
        let g = &mut *g;
        for (&conn, pool) in g.pools.iter_mut() {
            let Some((seq, idle, reply)) = pool.parked.take() else {
                continue;
            };
            let starts = issue_starts(
                &mut self.ledger.lock().expect("ledger lock"),
                &self.metrics,
                self.rules.seed,
                conn,
                &idle,
            );
            if starts.is_empty() {
                pool.parked = Some((seq, idle, reply));
                continue;
            }
            pool.sentinel = false;
            let ack = self.ack(pool, g.weights.as_ref(), g.epsilon, seq, false, starts);
            let _ = reply.send(ack);
        }
    }

    /// The run ended: later deposits are answered `Stop`, and so are the
    /// waiting ones.
    pub(super) fn close(&self, reason: &str) {
        let mut g = self.inner.lock().expect("pools lock");
        g.closed = Some(reason.to_string());
        self.deposited.notify_all();
        self.fetched_taken.notify_all();
        for pool in g.pools.values_mut() {
            if let Some((_, _, reply)) = pool.parked.take() {
                let _ = reply.send(stop_message(reason));
            }
        }
    }
}
