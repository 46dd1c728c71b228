//! [`Selector`]: which actor pool each learner of the multi-learner `rma`
//! workflows takes its next batch from, and when a learner's actor group is
//! exhausted. `ml-rma` picks by `window_selector` (`random`: any pool that
//! holds a batch; `bin`: the learner's own contiguous range of actors, in
//! turn); `ml-rma-queue` drains the learner's own group and, once that
//! group is done, helps the others, taking from the active actors first;
//! `ml-rma-queue-short` never helps, and its run ends when one group is
//! exhausted. Pure bookkeeping: the pools say what they hold
//! ([`Seen`]), the selector says who takes what.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rlfleet_shared::config::{WindowSelector, WorkflowKind};

/// One actor's pool as the selector sees it in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    /// The actor's index in the run (join order).
    pub index: u32,
    /// Batches it could hand out this round.
    pub ready: usize,
    /// Its actor may still deposit: connected, and not waiting with
    /// nothing more to play.
    pub active: bool,
}

#[derive(Debug)]
enum Picking {
    Random(Pcg64),
    Bin,
    /// `ml-rma-queue` (`help`) and `ml-rma-queue-short`.
    Groups {
        help: bool,
    },
}

/// The multi-learner `rma` workflows' choice of pools, round by round.
#[derive(Debug)]
pub(super) struct Selector {
    picking: Picking,
    learners: usize,
    /// Actors with an index below this (the job's actor ranks) are split
    /// into contiguous ranges, one per learner; later ones (QUIC actors of a
    /// mixed fleet) go round-robin.
    actor_ranks: usize,
    /// Per learner: the actor index it took from last.
    last: Vec<Option<u32>>,
}

impl Selector {
    /// The selector of `workflow`, if it is one of the multi-learner `rma`
    /// workflows.
    pub fn for_workflow(
        workflow: WorkflowKind,
        window: WindowSelector,
        learners: usize,
        actor_ranks: usize,
        seed: u64,
    ) -> Option<Selector> {
        let picking = match (workflow, window) {
            (WorkflowKind::MlRma, WindowSelector::Random) => {
                Picking::Random(Pcg64::seed_from_u64(seed ^ 0x5e1e_c7ed))
            }
            (WorkflowKind::MlRma, WindowSelector::Bin) => Picking::Bin,
            (WorkflowKind::MlRmaQueue, _) => Picking::Groups { help: true },
            (WorkflowKind::MlRmaQueueShort, _) => Picking::Groups { help: false },
            _ => return None,
        };
        let learners = learners.max(1);
        Some(Selector {
            picking,
            learners,
            actor_ranks,
            last: vec![None; learners],
        })
    }

    /// The learner whose group actor `index` belongs to.
    pub fn group_of(&self, index: u32) -> usize {
        let (i, l) = (index as usize, self.learners);
        if i < self.actor_ranks {
            i * l / self.actor_ranks
        } else {
            i % l
        }
    }

    /// This round's picks: for each learner that takes a batch, its
    /// position in `pools` (which are in index order). A learner takes at
    /// most one batch; a pick lowers that pool's `ready`.
    pub fn choose(&mut self, pools: &mut [Seen]) -> Vec<(usize, usize)> {
        let mut picks = Vec::new();
        for k in 0..self.learners {
            if let Some(at) = self.pick(k, pools) {
                pools[at].ready -= 1;
                self.last[k] = Some(pools[at].index);
                picks.push((k, at));
            }
        }
        picks
    }

    fn pick(&mut self, k: usize, pools: &[Seen]) -> Option<usize> {
        let ready = (0..pools.len()).filter(|&i| pools[i].ready > 0);
        let (own, others): (Vec<usize>, Vec<usize>) =
            ready.partition(|&i| self.group_of(pools[i].index) == k);
        let help = match &mut self.picking {
            Picking::Random(rng) => {
                let all = [own, others].concat();
                return (!all.is_empty()).then(|| all[rng.random_range(0..all.len())]);
            }
            Picking::Bin => false,
            Picking::Groups { help } => *help,
        };
        let mine = self.next_after(k, pools, &own);
        if mine.is_some() || !help || !self.group_done(k, pools) {
            return mine;
        }
        // Helping: the active actors' pools first, then the rest.
        let active: Vec<usize> = others
            .iter()
            .copied()
            .filter(|&i| pools[i].active)
            .collect();
        self.next_after(k, pools, &active)
            .or_else(|| self.next_after(k, pools, &others))
    }

    /// Among `candidates` (positions, in index order), the first whose
    /// actor comes after the one learner `k` took from last, wrapping
    /// round.
    fn next_after(&self, k: usize, pools: &[Seen], candidates: &[usize]) -> Option<usize> {
        let after = self.last[k];
        candidates
            .iter()
            .copied()
            .find(|&i| after.is_none_or(|a| pools[i].index > a))
            .or_else(|| candidates.first().copied())
    }

    /// Learner `k`'s group has actors and every one of them is inactive
    /// with nothing left in its pool.
    fn group_done(&self, k: usize, pools: &[Seen]) -> bool {
        let mut members = pools.iter().filter(|p| self.group_of(p.index) == k);
        let first = members.next();
        first.is_some()
            && first
                .into_iter()
                .chain(members)
                .all(|p| !p.active && p.ready == 0)
    }

    /// `ml-rma-queue-short`: the first learner whose group is exhausted
    /// (the run ends there).
    pub fn exhausted(&self, pools: &[Seen]) -> Option<usize> {
        match self.picking {
            Picking::Groups { help: false } => {
                (0..self.learners).find(|&k| self.group_done(k, pools))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(ready: &[usize], active: &[bool]) -> Vec<Seen> {
        ready
            .iter()
            .zip(active)
            .enumerate()
            .map(|(i, (&ready, &active))| Seen {
                index: i as u32,
                ready,
                active,
            })
            .collect()
    }

    fn selector(workflow: WorkflowKind, window: WindowSelector) -> Selector {
        Selector::for_workflow(workflow, window, 2, 4, 7).unwrap()
    }

    #[test]
    fn actor_ranks_split_into_contiguous_ranges_and_later_actors_go_round_robin() {
        let s = selector(WorkflowKind::MlRma, WindowSelector::Bin);
        let groups: Vec<usize> = (0..7).map(|i| s.group_of(i)).collect();
        assert_eq!(groups, [0, 0, 1, 1, 0, 1, 0]);
        let s = Selector::for_workflow(WorkflowKind::MlRmaQueue, WindowSelector::Random, 3, 7, 0)
            .unwrap();
        let groups: Vec<usize> = (0..7).map(|i| s.group_of(i)).collect();
        assert_eq!(groups, [0, 0, 0, 1, 1, 2, 2]);
        assert!(Selector::for_workflow(WorkflowKind::Rma, WindowSelector::Bin, 2, 4, 0).is_none());
    }

    #[test]
    fn bin_learners_take_their_own_range_in_turn() {
        let mut s = selector(WorkflowKind::MlRma, WindowSelector::Bin);
        let mut pools = seen(&[2, 2, 1, 0], &[true; 4]);
        assert_eq!(s.choose(&mut pools), [(0, 0), (1, 2)]);
        assert_eq!(s.choose(&mut pools), [(0, 1)], "learner 1's range is empty");
        assert_eq!(s.choose(&mut pools), [(0, 0)]);
        assert_eq!(s.choose(&mut pools), [(0, 1)]);
        assert!(s.choose(&mut pools).is_empty());
        assert!(pools.iter().all(|p| p.ready == 0));
    }

    #[test]
    fn random_learners_take_only_what_is_there_and_reach_every_pool() {
        let mut s = selector(WorkflowKind::MlRma, WindowSelector::Random);
        let mut pools = seen(&[1, 0, 0, 0], &[true; 4]);
        assert_eq!(s.choose(&mut pools), [(0, 0)], "one batch, one learner");
        let mut hits = [[0u32; 4]; 2];
        for _ in 0..400 {
            let mut pools = seen(&[1, 1, 1, 1], &[true; 4]);
            for (k, at) in s.choose(&mut pools) {
                hits[k][at] += 1;
            }
        }
        for h in hits {
            assert!(h.iter().all(|&n| n > 50), "{hits:?}");
        }
    }

    #[test]
    fn queue_learners_help_only_once_their_group_is_done() {
        let mut s = selector(WorkflowKind::MlRmaQueue, WindowSelector::Random);
        // Learner 1's group (actors 2, 3) still has an active actor: it
        // waits for it rather than help.
        let mut pools = seen(&[3, 1, 0, 0], &[true, true, false, true]);
        assert_eq!(s.choose(&mut pools), [(0, 0)]);
        // Done (inactive, empty): it helps, the active actor's pool first.
        let mut pools = seen(&[3, 2, 0, 0], &[false, true, false, false]);
        assert_eq!(s.choose(&mut pools), [(0, 1), (1, 1)]);
        assert_eq!(s.choose(&mut pools), [(0, 0), (1, 0)]);
        assert_eq!(pools[0].ready, 1);
        assert_eq!(s.exhausted(&pools), None, "only `short` ends on a group");
    }

    #[test]
    fn short_learners_never_help_and_the_first_exhausted_group_ends_it() {
        let mut s = selector(WorkflowKind::MlRmaQueueShort, WindowSelector::Random);
        let mut pools = seen(&[3, 1, 0, 0], &[false, true, false, false]);
        assert_eq!(s.choose(&mut pools), [(0, 0)]);
        assert_eq!(s.exhausted(&pools), Some(1));
        let pools = seen(&[0, 0, 0, 1], &[false, false, false, false]);
        assert_eq!(s.exhausted(&pools), Some(0));
        let pools = seen(&[0, 0, 0, 1], &[true, false, false, true]);
        assert_eq!(s.exhausted(&pools), None);
        assert_eq!(
            s.exhausted(&[]),
            None,
            "no actors yet: nothing is exhausted"
        );
    }
}
