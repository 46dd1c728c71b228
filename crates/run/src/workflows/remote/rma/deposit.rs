//! A deposit into the [`Pools`], in the depositing session's task: checked,
//! deduplicated by `(actor, session, seq)`, refused while a lossless pool is
//! full (and every later seq too, so that order holds), or put in its pool
//! — pushing the oldest out when it overflows; finished episodes recorded
//! and the next ids taken from the shared ledger right here; answered with
//! the newest published weights, or parked when the actor has nothing left
//! to play.

use super::super::checks::check_submission;
use super::super::core::issue_starts;
use super::super::core::{refusal, stop_message};
use super::super::ledger::Finish;
use super::pools::{Finished, Pool, Pools};
use crate::vocab::DropReason;
use crate::vocab::{ConnId, Reply};
use rlfleet_shared::config::{DataStructure, Overflow};
use rlfleet_shared::wire::{self, ErrorCode, Experience, Message, Submission, WeightsMsg};
use std::sync::Arc;
use tokio::sync::oneshot;

impl Pools {
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
        let check = check_submission(&s, &pool.actor_id, &self.rules.shapes, pool.n_envs);
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
                weights_apart: None,
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
        for f in s.faults() {
            if ledger.requeue(f.episode, (conn, f.env)) {
                g.faults.push((conn, f.clone()));
            }
        }
        // A resend's ends are judged when it is trained, as the steps
        // before them are known there.
        let resend = s.session_id() != pool.session_id;
        let ends = s
            .batch()
            .filter(|_| !resend)
            .map_or(&[][..], |e| &e.finished);
        for f in ends {
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
            if let Some(old) = self.put(pool, e, version) {
                g.lost
                    .extend(old.steps.runs.iter().map(|r| (r.episode, r.steps)));
            }
        }
        if nothing_to_do {
            pool.parked = Some((seq, idle, tx));
            return None;
        }
        let ack = self.ack(pool, g.weights.as_ref(), g.epsilon, seq, false, starts);
        Some((tx, ack))
    }

    /// Puts an accepted batch into its pool; counts what it pushes out
    /// unread, and returns it.
    fn put(&self, pool: &mut Pool, e: Experience, version: u64) -> Option<Arc<Experience>> {
        let e = Arc::new(e);
        let (old, reason) = match self.rules.structure {
            DataStructure::BuffUnchecked => (
                pool.batches
                    .pop_back()
                    .filter(|old| pool.last_read != Some(old.seq)),
                DropReason::Overwritten,
            ),
            DataStructure::BuffChecked => (pool.batches.pop_back(), DropReason::Overwritten),
            // With `reject`, a full pool never gets here.
            DataStructure::Queue | DataStructure::Stack => (
                (pool.batches.len() >= self.rules.length)
                    .then(|| pool.batches.pop_front())
                    .flatten(),
                DropReason::Overflow,
            ),
        };
        if let Some(old) = &old {
            self.accounts.dropped(old, version, reason);
        }
        pool.batches.push_back(e);
        old
    }

    pub(super) fn ack(
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
            weights_apart: None,
            epsilon,
            starts,
            full: false,
        })
    }
}
