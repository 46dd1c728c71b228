//! [`EpisodeLedger`]: episode ids handed out exactly once, tracked until
//! they finish. An episode whose holder leaves unfinished goes back to the
//! front of the queue and is handed out again with the same id (and hence
//! the same seed), so nothing is lost and nothing is counted twice.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Who holds an episode: a connection and one of its environments.
pub type Holder = (u64, u32);

/// What [`EpisodeLedger::finish`] made of a reported end of episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Counted: it was held by the reporter (or waiting to be re-issued).
    Counted,
    /// Already counted once.
    Duplicate,
    /// Held by someone else now (re-issued after the reporter left).
    NotHolder,
    /// Never handed out.
    Unknown,
}

/// An [`EpisodeLedger`] in a checkpoint: finished ids as ranges, every
/// unfinished one (held or waiting) in the order it is to be re-issued.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerImage {
    pub next: u64,
    /// Finished ids as `[first, last]` ranges.
    pub finished: Vec<[u64; 2]>,
    pub unfinished: Vec<u64>,
    pub issued: u64,
    pub reissued: u64,
}

/// Where an episode id stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Held(Holder),
    /// Waiting to be re-issued (its holder left, or a restore).
    Waiting,
    Finished,
    /// Never handed out.
    Unknown,
}

#[derive(Debug, Clone, Default)]
pub struct EpisodeLedger {
    /// At most this many distinct ids (None: unbounded).
    limit: Option<u64>,
    next: u64,
    held: BTreeMap<u64, Holder>,
    requeued: VecDeque<u64>,
    finished: BTreeSet<u64>,
    pub issued: u64,
    pub reissued: u64,
    /// Ids re-issued since [`EpisodeLedger::take_reissued`] was last
    /// called (the run thread abandons what was ingested of their earlier
    /// plays).
    reissued_ids: Vec<u64>,
}

impl EpisodeLedger {
    /// Ids start at `first` (a resumed run continues its numbering).
    pub fn new(limit: Option<u64>, first: u64) -> Self {
        EpisodeLedger {
            limit,
            next: first,
            ..Default::default()
        }
    }

    /// The next episode for `holder`: a re-queued one first, then a fresh
    /// id while the limit allows. Returns (id, was re-issued).
    pub fn issue(&mut self, holder: Holder) -> Option<(u64, bool)> {
        if let Some(id) = self.requeued.pop_front() {
            self.held.insert(id, holder);
            self.reissued += 1;
            self.reissued_ids.push(id);
            return Some((id, true));
        }
        if self.limit.is_some_and(|l| self.next >= l) {
            return None;
        }
        let id = self.next;
        self.next += 1;
        self.issued += 1;
        self.held.insert(id, holder);
        Some((id, false))
    }

    /// The ids re-issued since the last call.
    pub fn take_reissued(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.reissued_ids)
    }

    pub fn finish(&mut self, id: u64, holder: Holder) -> Finish {
        if self.finished.contains(&id) {
            return Finish::Duplicate;
        }
        match self.held.get(&id) {
            Some(h) if *h == holder => {
                self.held.remove(&id);
            }
            Some(_) => return Finish::NotHolder,
            None => match self.requeued.iter().position(|&q| q == id) {
                // The reporter left before its report arrived (a resend).
                Some(i) => {
                    self.requeued.remove(i);
                }
                None => return Finish::Unknown,
            },
        }
        self.finished.insert(id);
        Finish::Counted
    }

    /// Re-queues every unfinished episode of connection `conn`; returns
    /// how many.
    pub fn release(&mut self, conn: u64) -> usize {
        let ids: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, h)| h.0 == conn)
            .map(|(&id, _)| id)
            .collect();
        for id in &ids {
            self.held.remove(id);
            self.requeued.push_back(*id);
        }
        ids.len()
    }

    /// Puts episode `id` back at the front of the queue if `holder` holds
    /// it (its env raised); returns whether it did.
    pub fn requeue(&mut self, id: u64, holder: Holder) -> bool {
        if self.held.get(&id) != Some(&holder) {
            return false;
        }
        self.held.remove(&id);
        self.requeued.push_front(id);
        true
    }

    pub fn standing(&self, id: u64) -> Standing {
        if let Some(&h) = self.held.get(&id) {
            Standing::Held(h)
        } else if self.finished.contains(&id) {
            Standing::Finished
        } else if self.requeued.contains(&id) {
            Standing::Waiting
        } else {
            Standing::Unknown
        }
    }

    /// Episodes `conn` is playing.
    pub fn held_by(&self, conn: u64) -> usize {
        self.held.values().filter(|h| h.0 == conn).count()
    }

    /// An episode could be handed out now.
    pub fn available(&self) -> bool {
        !self.requeued.is_empty() || self.limit.is_none_or(|l| self.next < l)
    }

    pub fn finished_count(&self) -> u64 {
        self.finished.len() as u64
    }

    pub fn image(&self) -> LedgerImage {
        let mut finished: Vec<[u64; 2]> = Vec::new();
        for &id in &self.finished {
            match finished.last_mut() {
                Some(r) if r[1] + 1 == id => r[1] = id,
                _ => finished.push([id, id]),
            }
        }
        // Waiting ones first, as they would have been handed out.
        let mut unfinished: Vec<u64> = self.requeued.iter().copied().collect();
        unfinished.extend(self.held.keys());
        LedgerImage {
            next: self.next,
            finished,
            unfinished,
            issued: self.issued,
            reissued: self.reissued,
        }
    }

    /// The ledger of a checkpoint, as a restarted run takes it up: nobody
    /// holds anything (every connection is new), so every unfinished
    /// episode waits to be re-issued, from its start.
    pub fn restore(limit: Option<u64>, img: &LedgerImage) -> EpisodeLedger {
        EpisodeLedger {
            limit,
            next: img.next,
            held: BTreeMap::new(),
            requeued: img.unfinished.iter().copied().collect(),
            finished: img.finished.iter().flat_map(|r| r[0]..=r[1]).collect(),
            issued: img.issued,
            reissued: img.reissued,
            reissued_ids: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_handed_out_once_and_reissued_after_a_holder_leaves() {
        let mut l = EpisodeLedger::new(Some(4), 0);
        assert_eq!(l.issue((1, 0)), Some((0, false)));
        assert_eq!(l.issue((1, 1)), Some((1, false)));
        assert_eq!(l.issue((2, 0)), Some((2, false)));
        assert_eq!(l.finish(0, (1, 0)), Finish::Counted);
        assert_eq!(l.finish(0, (1, 0)), Finish::Duplicate);
        assert_eq!(l.release(1), 1); // episode 1 was unfinished
        assert_eq!(l.issue((3, 0)), Some((1, true)));
        assert_eq!(l.issue((3, 1)), Some((3, false)));
        assert_eq!(l.issue((3, 2)), None);
        assert!(!l.available());
        // The old holder's late report does not count: 1 is held by 3 now.
        assert_eq!(l.finish(1, (1, 1)), Finish::NotHolder);
        assert_eq!(l.finish(9, (1, 1)), Finish::Unknown);
        for (id, h) in [(1, (3, 0)), (2, (2, 0)), (3, (3, 1))] {
            assert_eq!(l.finish(id, h), Finish::Counted);
        }
        assert_eq!((l.issued, l.reissued, l.finished_count()), (4, 1, 4));
    }

    #[test]
    fn a_restored_ledger_reissues_every_unfinished_episode_once() {
        let mut l = EpisodeLedger::new(Some(10), 0);
        for env in 0..6 {
            l.issue((1, env));
        }
        for id in [0, 1, 2, 4] {
            assert_eq!(l.finish(id, (1, id as u32)), Finish::Counted);
        }
        l.release(1); // 3 and 5 wait
        l.issue((2, 0)); // 3 again
        l.issue((2, 1)); // 5 again
        l.issue((2, 2)); // 6
        let img = l.image();
        assert_eq!(img.finished, vec![[0, 2], [4, 4]]);
        let mut r = EpisodeLedger::restore(Some(10), &img);
        assert_eq!(r.finished_count(), 4);
        let mut again: Vec<u64> = (0..3).map(|e| r.issue((9, e)).unwrap().0).collect();
        again.sort();
        assert_eq!(again, vec![3, 5, 6]);
        assert_eq!(r.issue((9, 3)), Some((7, false)));
        assert_eq!(r.finish(4, (9, 0)), Finish::Duplicate);
        assert_eq!((r.issued, r.reissued), (8, 2 + 3));
    }

    #[test]
    fn a_resent_report_reclaims_a_requeued_episode() {
        let mut l = EpisodeLedger::new(None, 10);
        assert_eq!(l.issue((1, 0)), Some((10, false)));
        l.release(1);
        assert_eq!(l.finish(10, (1, 0)), Finish::Counted);
        // It is not handed out again.
        assert_eq!(l.issue((2, 0)), Some((11, false)));
    }
}
