//! [`Pools`]: the one-sided side of the `rma` workflows. Each actor has a
//! pool on the learner (a latest-value buffer, a queue or a stack, as
//! `distributed.data_structure` says) that its transport task deposits
//! batches into without the learner loop taking part — the deposit is
//! checked, deduplicated and acknowledged right there, finished episodes
//! are recorded, the next episode ids are taken from the shared ledger
//! (the fetch-and-add counter) and the newest weights are read from the
//! published slot. The run thread pops the pools when it is ready to train.
//! Every overwrite or overflow is counted with its reason.

use super::super::accounts::Accounts;
use super::super::checks::Shapes;
use super::super::core::issue_starts;
use super::super::core::stop_message;
use super::super::input::{Bypass, Input, Internal};
use super::super::ledger::EpisodeLedger;
use crate::metrics::RunMetrics;
use crate::vocab::{Answer, ConnId, Reply};
use rlfleet_shared::config::{DataStructure, Overflow};
use rlfleet_shared::wire::{EnvFaultReport, Experience, Message, Submission, WeightsMsg};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};

/// The fixed facts a deposit is checked against.
#[derive(Debug, Clone)]
pub(super) struct PoolRules {
    pub structure: DataStructure,
    pub length: usize,
    pub overflow: Overflow,
    pub shapes: Shapes,
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
pub(super) struct Seqs {
    /// Highest accepted.
    pub accepted: u64,
    /// The first refused (full) that has not been accepted since: later
    /// deposits are refused too, so that order is kept.
    pub refused_from: Option<u64>,
}

#[derive(Debug)]
pub(super) struct Pool {
    pub index: u32,
    pub(super) actor_id: String,
    /// The session of the connection: a batch of another session is a
    /// resend, whose episode ends the run thread judges when it trains it.
    pub(super) session_id: u64,
    pub(super) n_envs: u32,
    pub batches: VecDeque<Arc<Experience>>,
    /// `buff-unchecked`: the seq of the batch last read (it stays in place).
    pub last_read: Option<u64>,
    pub(super) sent_version: Option<u64>,
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
    pub(super) seqs: HashMap<(String, u64), Seqs>,
    pub(super) finished: Vec<Finished>,
    /// Env faults the deposits re-queued, for the run thread to count.
    pub(super) faults: Vec<(ConnId, EnvFaultReport)>,
    /// Runs `(episode, steps)` of batches a pool pushed out or overwrote:
    /// the agent will never be given them.
    pub(super) lost: Vec<(u64, u32)>,
    pub(super) weights: Option<WeightsMsg>,
    pub(super) epsilon: f32,
    /// Round-robin position of the fetcher.
    pub cursor: ConnId,
    /// A checkpoint waits for the set the fetcher handed out: until it
    /// is taken, the fetcher takes no other.
    pub(super) hold_fetch: bool,
}

/// What the deposits recorded for the run thread.
#[derive(Debug, Default)]
pub(super) struct Recorded {
    pub faults: Vec<(ConnId, EnvFaultReport)>,
    pub finished: Vec<Finished>,
    pub lost: Vec<(u64, u32)>,
}

impl Inner {
    pub(super) fn take_recorded(&mut self) -> Recorded {
        Recorded {
            faults: std::mem::take(&mut self.faults),
            finished: std::mem::take(&mut self.finished),
            lost: std::mem::take(&mut self.lost),
        }
    }
}

/// The pools of one run.
#[derive(Debug)]
pub struct Pools {
    pub(super) inner: Mutex<Inner>,
    pub(super) rules: PoolRules,
    pub(super) ledger: Arc<Mutex<EpisodeLedger>>,
    pub(super) accounts: Arc<Accounts>,
    pub(super) metrics: Arc<RunMetrics>,
    /// Wakes the run thread (at most one wake-up queued).
    wake: Mutex<Option<mpsc::SyncSender<Input>>>,
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
        metrics: Arc<RunMetrics>,
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

    pub(super) fn set_wake(&self, events: mpsc::SyncSender<Input>) {
        *self.wake.lock().expect("wake lock") = Some(events);
    }

    /// Tells the run thread there is something to look at.
    pub(super) fn wake(&self) {
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
        (actor_id, session_id): (&str, u64),
        n_envs: u32,
        version: u64,
    ) {
        self.inner.lock().expect("pools lock").pools.insert(
            conn,
            Pool {
                index,
                actor_id: actor_id.to_string(),
                session_id,
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

    /// Episode ends, env faults and lost runs recorded since the last
    /// call.
    pub(super) fn take_recorded(&self) -> Recorded {
        self.inner.lock().expect("pools lock").take_recorded()
    }

    /// The highest seq accepted per `(actor, session)`: the dedup keys a
    /// checkpoint keeps.
    pub(super) fn accepted_seqs(g: &Inner) -> HashMap<(String, u64), u64> {
        g.seqs
            .iter()
            .map(|(key, s)| (key.clone(), s.accepted))
            .collect()
    }

    /// A resumed run's pools refuse what its checkpoint had accepted.
    pub(super) fn restore_seqs(&self, accepted: &HashMap<(String, u64), u64>) {
        let mut g = self.inner.lock().expect("pools lock");
        g.seqs = accepted
            .iter()
            .map(|(key, &accepted)| {
                let s = Seqs {
                    accepted,
                    refused_from: None,
                };
                (key.clone(), s)
            })
            .collect();
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
