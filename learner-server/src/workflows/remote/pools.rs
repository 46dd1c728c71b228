//! [`Pools`]: the one-sided side of the `rma` workflows. Each actor has a
//! pool on the learner (a latest-value buffer, a queue or a stack, as
//! `distributed.data_structure` says) that its transport task deposits
//! batches into without the learner loop taking part — the deposit is
//! checked, deduplicated and acknowledged right there, finished episodes
//! are recorded, the next episode ids are taken from the shared ledger
//! (the fetch-and-add counter) and the newest weights are read from the
//! published slot. The run thread pops the pools when it is ready to train.
//! Every overwrite or overflow is counted with its reason.

use super::accounts::Accounts;
use super::experience::check_experience;
use super::select::{Seen, Selector};
use super::{EpisodeLedger, Finish, issue_starts};
use crate::metrics::Metrics;
use crate::transport::{ConnId, Event, Reply};
use rlfleet_shared::config::{DataStructure, Overflow};
use rlfleet_shared::env::Space;
use rlfleet_shared::wire::{self, ErrorCode, Experience, Message, WeightsMsg};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Duration;
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
struct Pool {
    index: u32,
    actor_id: String,
    n_envs: u32,
    batches: VecDeque<Arc<Experience>>,
    /// `buff-unchecked`: the seq of the batch last read (it stays in place).
    last_read: Option<u64>,
    sent_version: Option<u64>,
    /// A request with nothing to hand out, answered when episodes come
    /// back or the run ends.
    parked: Option<(u64, Vec<u32>, Reply)>,
    /// Its last request said it has nothing more to play.
    sentinel: bool,
    /// The connection left; the pool is drained, then removed.
    gone: bool,
}

#[derive(Debug, Default)]
struct Inner {
    /// Set when the run ends: deposits are answered `Stop`.
    closed: Option<String>,
    pools: BTreeMap<ConnId, Pool>,
    seqs: HashMap<(String, u64), Seqs>,
    finished: Vec<Finished>,
    weights: Option<WeightsMsg>,
    epsilon: f32,
    /// Round-robin position of the run thread.
    cursor: ConnId,
}

/// The pools of one run.
#[derive(Debug)]
pub struct Pools {
    inner: Mutex<Inner>,
    rules: PoolRules,
    ledger: Arc<Mutex<EpisodeLedger>>,
    accounts: Arc<Accounts>,
    metrics: Arc<Metrics>,
    /// Wakes the run thread (at most one wake-up queued).
    wake: Mutex<Option<mpsc::Sender<Event>>>,
    wake_queued: AtomicBool,
    /// Signalled on every deposit and at close (the `rma-queue-pop-all`
    /// fetcher waits on it with `inner`).
    deposited: Condvar,
    /// `rma-queue-pop-all`: a fetched set waits for the run thread (the
    /// fetcher takes the next one only once the run thread has taken it).
    fetched_waiting: Mutex<bool>,
    fetched_taken: Condvar,
}

/// What the run thread popped.
pub(super) type Popped = Vec<(ConnId, Arc<Experience>)>;

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

    pub(super) fn set_wake(&self, events: mpsc::Sender<Event>) {
        *self.wake.lock().expect("wake lock") = Some(events);
    }

    /// Tells the run thread there is something to look at.
    fn wake(&self) {
        if !self.wake_queued.swap(true, Ordering::AcqRel)
            && let Some(tx) = &*self.wake.lock().expect("wake lock")
        {
            let _ = tx.send(Event::Wake);
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

    /// Takes one `Experience` from `conn`'s transport task and returns
    /// where its answer will come from (at once, unless the actor has to
    /// wait for an episode).
    pub fn deposit(&self, conn: ConnId, e: Experience) -> oneshot::Receiver<Message> {
        let (tx, rx) = oneshot::channel();
        let answer = self.take(conn, e, tx);
        if let Some((tx, m)) = answer {
            let _ = tx.send(m);
        }
        self.deposited.notify_all();
        self.wake();
        rx
    }

    fn refuse(&self, e: &Experience, version: u64, code: ErrorCode, text: String) -> Message {
        if !e.transitions.is_empty() {
            self.accounts.received(e);
            self.accounts.dropped(e, version, "invalid");
        }
        super::refusal(&self.metrics, code, text)
    }

    /// The deposit itself; `Some` with the answer, `None` when parked.
    fn take(&self, conn: ConnId, e: Experience, tx: Reply) -> Option<(Reply, Message)> {
        let mut g = self.inner.lock().expect("pools lock");
        let g = &mut *g;
        let version = g.weights.as_ref().map_or(0, |w| w.version);
        if let Some(reason) = &g.closed {
            if !e.transitions.is_empty() {
                self.accounts.received(&e);
                self.accounts.dropped(&e, version, "run_ended");
            }
            let stop = Message::Stop(wire::Stop {
                reason: reason.clone(),
                shutdown: false,
            });
            return Some((tx, stop));
        }
        let Some(pool) = g.pools.get_mut(&conn) else {
            let m = self.refuse(
                &e,
                version,
                ErrorCode::Unexpected,
                "experience before a welcome".into(),
            );
            return Some((tx, m));
        };
        let check = if e.actor_id != pool.actor_id {
            Err((
                ErrorCode::Unexpected,
                format!(
                    "experience from actor `{}` on the connection of `{}`",
                    e.actor_id, pool.actor_id
                ),
            ))
        } else {
            check_experience(
                &e,
                self.rules.obs_dim,
                &self.rules.action_space,
                pool.n_envs,
            )
        };
        if let Err((code, text)) = check {
            return Some((tx, self.refuse(&e, version, code, text)));
        }
        let seqs = g
            .seqs
            .entry((e.actor_id.clone(), e.session_id))
            .or_default();
        let full = |pool: &Pool| {
            matches!(
                self.rules.structure,
                DataStructure::Queue | DataStructure::Stack
            ) && self.rules.overflow == Overflow::Reject
                && !e.transitions.is_empty()
                && pool.batches.len() >= self.rules.length
        };
        let duplicate = e.seq <= seqs.accepted;
        if !duplicate && (seqs.refused_from.is_some_and(|r| e.seq > r) || full(pool)) {
            // Refused, nothing counted: the actor sends it again.
            seqs.refused_from = Some(seqs.refused_from.map_or(e.seq, |r| r.min(e.seq)));
            let full = Message::Ack(wire::Ack {
                seq: e.seq,
                duplicate: false,
                weights: None,
                epsilon: g.epsilon,
                starts: vec![],
                full: true,
            });
            return Some((tx, full));
        }
        if duplicate {
            if !e.transitions.is_empty() {
                self.accounts.received(&e);
                self.accounts.dropped(&e, version, "duplicate");
            }
            let ack = self.ack(pool, g.weights.as_ref(), g.epsilon, e.seq, true, vec![]);
            return Some((tx, ack));
        }
        seqs.accepted = e.seq;
        seqs.refused_from = None;
        let mut ledger = self.ledger.lock().expect("ledger lock");
        for f in &e.finished {
            if ledger.finish(f.episode, (conn, f.env)) == Finish::Counted {
                g.finished.push(Finished {
                    actor: pool.index,
                    episode: f.episode,
                    ret: f.ret,
                    length: f.length,
                });
            }
        }
        let starts = issue_starts(
            &mut ledger,
            &self.metrics,
            self.rules.seed,
            conn,
            &e.idle_envs,
        );
        let nothing_to_do = starts.is_empty() && ledger.held_by(conn) == 0;
        drop(ledger);
        pool.sentinel = e.last && nothing_to_do;
        let (seq, idle) = (e.seq, e.idle_envs.clone());
        if !e.transitions.is_empty() {
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
                    self.accounts.dropped(&old, version, "overwritten");
                }
                pool.batches.push_back(e);
            }
            DataStructure::BuffChecked => {
                if let Some(old) = pool.batches.pop_back() {
                    self.accounts.dropped(&old, version, "overwritten");
                }
                pool.batches.push_back(e);
            }
            DataStructure::Queue | DataStructure::Stack => {
                // With `reject`, a full pool never gets here.
                if pool.batches.len() >= self.rules.length
                    && let Some(old) = pool.batches.pop_front()
                {
                    self.accounts.dropped(&old, version, "overflow");
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

    /// `rma`: one batch from each pool that has one, in round-robin order
    /// (queue: the oldest; stack: the newest; buffers: the latest value).
    pub(super) fn pop_round(&self) -> Popped {
        let mut g = self.inner.lock().expect("pools lock");
        let structure = self.rules.structure;
        let mut out = Vec::new();
        for (&conn, pool) in g.pools.iter_mut() {
            if let Some(b) = pop_one(pool, structure) {
                out.push((conn, b));
            }
        }
        g.pools.retain(|_, p| !(p.gone && unread(p, structure)));
        out
    }

    /// Every pool as the multi-learner selector sees it, in actor order.
    fn seen(g: &Inner, structure: DataStructure) -> Vec<(ConnId, Seen)> {
        let mut v: Vec<(ConnId, Seen)> = g
            .pools
            .iter()
            .map(|(&conn, p)| {
                let ready = match structure {
                    DataStructure::BuffUnchecked => usize::from(!unread(p, structure)),
                    _ => p.batches.len(),
                };
                let waiting = p.sentinel && p.parked.is_some();
                let active = !p.gone && !waiting;
                (
                    conn,
                    Seen {
                        index: p.index,
                        ready,
                        active,
                    },
                )
            })
            .collect();
        v.sort_by_key(|(_, s)| s.index);
        v
    }

    /// The multi-learner `rma` workflows: the batches the learners take
    /// this round, each with the learner `select` picked it for.
    pub(super) fn pop_for_learners(
        &self,
        select: &mut Selector,
    ) -> Vec<(usize, ConnId, Arc<Experience>)> {
        let mut g = self.inner.lock().expect("pools lock");
        let structure = self.rules.structure;
        let seen = Self::seen(&g, structure);
        let (conns, mut view): (Vec<ConnId>, Vec<Seen>) = seen.into_iter().unzip();
        let mut out = Vec::new();
        for (learner, at) in select.choose(&mut view) {
            let pool = g.pools.get_mut(&conns[at]).expect("seen");
            if let Some(b) = pop_one(pool, structure) {
                out.push((learner, conns[at], b));
            }
        }
        g.pools.retain(|_, p| !(p.gone && unread(p, structure)));
        out
    }

    /// `ml-rma-queue-short`: the learner whose actor group is exhausted,
    /// if one is.
    pub(super) fn exhausted_group(&self, select: &Selector) -> Option<usize> {
        let g = self.inner.lock().expect("pools lock");
        let view: Vec<Seen> = Self::seen(&g, self.rules.structure)
            .into_iter()
            .map(|(_, s)| s)
            .collect();
        select.exhausted(&view)
    }

    /// The actor index of `conn`'s pool.
    pub(super) fn index_of(&self, conn: ConnId) -> Option<u32> {
        let g = self.inner.lock().expect("pools lock");
        g.pools.get(&conn).map(|p| p.index)
    }

    /// `rma-queue-pop-all`'s fetcher, on its own thread: takes every
    /// pending batch of the next actor and hands them to the run thread as
    /// `Event::Fetched`, then — while the run thread trains on them — the
    /// next actor's, which waits in the channel until the run thread has
    /// taken the previous set. Ends when the pools close.
    pub(super) fn fetch_loop(&self, run: mpsc::Sender<Event>) {
        loop {
            {
                let mut waiting = self.fetched_waiting.lock().expect("fetch lock");
                while *waiting {
                    if self.is_closed() {
                        return;
                    }
                    waiting = self
                        .fetched_taken
                        .wait_timeout(waiting, Duration::from_millis(50))
                        .expect("fetch lock")
                        .0;
                }
            }
            let set = {
                let mut g = self.inner.lock().expect("pools lock");
                loop {
                    if g.closed.is_some() {
                        return;
                    }
                    let set = Self::pop_all_next(&mut g);
                    if !set.is_empty() {
                        break set;
                    }
                    g = self
                        .deposited
                        .wait_timeout(g, Duration::from_millis(50))
                        .expect("pools lock")
                        .0;
                }
            };
            *self.fetched_waiting.lock().expect("fetch lock") = true;
            if run.send(Event::Fetched(set)).is_err() {
                return;
            }
        }
    }

    /// The run thread took a fetched set: the fetcher may take the next.
    pub(super) fn fetched_taken(&self) {
        *self.fetched_waiting.lock().expect("fetch lock") = false;
        self.fetched_taken.notify_all();
    }

    fn is_closed(&self) -> bool {
        self.inner.lock().expect("pools lock").closed.is_some()
    }

    /// Every pending batch of the next actor (after the one served last)
    /// that has any, oldest first.
    fn pop_all_next(g: &mut Inner) -> Popped {
        let after = g.cursor;
        let next = g
            .pools
            .range(after + 1..)
            .chain(g.pools.range(..=after))
            .find(|(_, p)| !p.batches.is_empty())
            .map(|(&c, _)| c);
        let mut out = Vec::new();
        if let Some(conn) = next {
            g.cursor = conn;
            let pool = g.pools.get_mut(&conn).expect("found");
            out.extend(pool.batches.drain(..).map(|b| (conn, b)));
        }
        g.pools.retain(|_, p| !(p.gone && p.batches.is_empty()));
        out
    }

    /// Pools empty (what `rma-queue-pop-all` fetched may still be on its
    /// way to, or in, training).
    fn all_empty(g: &Inner) -> bool {
        g.pools.values().all(|p| p.batches.is_empty())
    }

    /// Everything still in the pools (the run is ending); unread
    /// `buff-unchecked` values only.
    pub(super) fn drain(&self) -> Popped {
        let mut g = self.inner.lock().expect("pools lock");
        let structure = self.rules.structure;
        let mut out = Vec::new();
        for (&conn, pool) in g.pools.iter_mut() {
            for b in pool.batches.drain(..) {
                if structure != DataStructure::BuffUnchecked || pool.last_read != Some(b.seq) {
                    out.push((conn, b));
                }
            }
        }
        out
    }

    /// `rma-queue-pop-all`'s end: at least one actor, every live actor has
    /// sent its end sentinel and is waiting, and every pool is empty.
    pub(super) fn all_ended(&self) -> bool {
        let g = self.inner.lock().expect("pools lock");
        let live: Vec<&Pool> = g.pools.values().filter(|p| !p.gone).collect();
        !live.is_empty()
            && live.iter().all(|p| p.sentinel && p.parked.is_some())
            && Self::all_empty(&g)
            && !*self.fetched_waiting.lock().expect("fetch lock")
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
                let _ = reply.send(Message::Stop(wire::Stop {
                    reason: reason.to_string(),
                    shutdown: false,
                }));
            }
        }
    }
}

/// The batch the run thread reads next from `pool` (queue: the oldest;
/// stack: the newest; buffers: the latest value, `buff-unchecked` only once).
fn pop_one(pool: &mut Pool, structure: DataStructure) -> Option<Arc<Experience>> {
    match structure {
        DataStructure::Queue | DataStructure::BuffChecked => pool.batches.pop_front(),
        DataStructure::Stack => pool.batches.pop_back(),
        DataStructure::BuffUnchecked => {
            let latest = pool.batches.back().cloned();
            match latest {
                Some(b) if pool.last_read != Some(b.seq) => {
                    pool.last_read = Some(b.seq);
                    Some(b)
                }
                _ => None,
            }
        }
    }
}

/// Nothing left in the pool that the run thread would still read.
fn unread(p: &Pool, structure: DataStructure) -> bool {
    match structure {
        DataStructure::BuffUnchecked => p.batches.back().is_none_or(|b| p.last_read == Some(b.seq)),
        _ => p.batches.is_empty(),
    }
}
