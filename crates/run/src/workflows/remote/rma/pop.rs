//! What the run thread takes out of the [`Pools`]: one batch per pool per
//! round (`rma`), one per learner as the selector says (`ml-*`), what is
//! left at the end; and the end conditions read from the pools.

use super::super::input::Popped;
use super::pools::{Inner, Pool, Pools};
use super::select::{Seen, Selector};
use crate::vocab::ConnId;
use rlfleet_shared::config::DataStructure;
use rlfleet_shared::wire::Experience;
use std::sync::Arc;

impl Pools {
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

    /// Pools empty (what `rma-queue-pop-all` fetched may still be on its
    /// way to, or in, training).
    fn all_empty(g: &Inner) -> bool {
        g.pools.values().all(|p| p.batches.is_empty())
    }

    /// Everything still in the pools, under their lock (the run is ending,
    /// or a checkpoint is taken); unread `buff-unchecked` values only.
    pub(super) fn drain(&self, g: &mut Inner) -> Popped {
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
