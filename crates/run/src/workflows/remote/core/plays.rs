//! [`Plays`]: what the agent holds of each episode's play, so that every
//! step reaches it once and in order — or, where a step does not follow
//! the last one given (a batch dropped stale, pushed out of an `rma` pool,
//! or popped from a stack before an older one), the agent is told to end
//! the trajectory it holds first, and the step starts a new one. Which
//! play a batch belongs to (the one the ledger knows, or an earlier one
//! that was superseded) is judged before, by the run thread.

use std::collections::HashMap;

/// What becomes of one step of a play.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admit {
    /// The agent was given it already.
    Duplicate,
    /// Given now. `close`: the agent holds a trajectory of the episode
    /// that this step does not continue, to be ended (as truncated) first.
    /// `cut`: the step starts a trajectory other than at the play's start
    /// (step 0).
    Give { close: bool, cut: bool },
}

/// One episode's play at the agent.
#[derive(Debug, Default)]
struct Play {
    /// Steps given, as sorted, disjoint `[start, end)` ranges (one, but
    /// for holes).
    given: Vec<(u32, u32)>,
    /// Steps given or lost on the way (never to come).
    covered: u32,
    /// The step that continues the trajectory the agent holds, if it
    /// holds one.
    open_end: Option<u32>,
    /// The play's length, once its last step reached the agent.
    length: Option<u32>,
}

impl Play {
    fn has(&self, step: u32) -> bool {
        self.given.iter().any(|&(a, b)| a <= step && step < b)
    }

    /// Records `step` as given (it is not).
    fn insert(&mut self, step: u32) {
        let at = self.given.partition_point(|&(a, _)| a <= step);
        let joins_before = at > 0 && self.given[at - 1].1 == step;
        let joins_after = at < self.given.len() && self.given[at].0 == step + 1;
        match (joins_before, joins_after) {
            (true, true) => {
                self.given[at - 1].1 = self.given[at].1;
                self.given.remove(at);
            }
            (true, false) => self.given[at - 1].1 = step + 1,
            (false, true) => self.given[at].0 = step,
            (false, false) => self.given.insert(at, (step, step + 1)),
        }
    }

    fn complete(&self) -> bool {
        self.length.is_some_and(|l| self.covered >= l)
    }
}

/// The plays the agent holds steps of.
#[derive(Debug, Default)]
pub(super) struct Plays {
    open: HashMap<u64, Play>,
}

impl Plays {
    /// Step `step` of `episode`'s play is on its way to the agent.
    pub fn admit(&mut self, episode: u64, step: u32) -> Admit {
        let p = self.open.entry(episode).or_default();
        if p.has(step) {
            return Admit::Duplicate;
        }
        let follows = p.open_end == Some(step);
        let first = step == 0;
        let close = p.open_end.is_some() && !follows;
        p.insert(step);
        p.covered += 1;
        p.open_end = Some(step + 1);
        Admit::Give {
            close,
            cut: !follows && !first,
        }
    }

    /// The play's last step (`length` steps in all) reached the agent:
    /// true when the agent holds a trajectory of it, to be ended now.
    /// Kept while steps of it are still to come (an `rma` stack hands
    /// the newest batch out first).
    pub fn ended(&mut self, episode: u64, length: u32) -> bool {
        let Some(p) = self.open.get_mut(&episode) else {
            return false;
        };
        p.length = Some(length);
        let close = p.open_end.take().is_some();
        self.prune(episode);
        close
    }

    /// A run of `episode` was given: true when its play had already ended
    /// at the agent (the run came late, out of order), so that the
    /// trajectory it started is ended at once.
    pub fn after_run(&mut self, episode: u64) -> bool {
        let Some(p) = self.open.get_mut(&episode) else {
            return false;
        };
        let close = p.length.is_some() && p.open_end.take().is_some();
        self.prune(episode);
        close
    }

    /// `steps` steps of `episode` will never come (their batch was
    /// dropped).
    pub fn lost(&mut self, episode: u64, steps: u32) {
        self.open.entry(episode).or_default().covered += steps;
        self.prune(episode);
    }

    /// The agent let go of `episode` (ended, or played again).
    pub fn forget(&mut self, episode: u64) {
        self.open.remove(&episode);
    }

    /// Plays on record.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.open.len()
    }

    fn prune(&mut self, episode: u64) {
        if self.open.get(&episode).is_some_and(Play::complete) {
            self.open.remove(&episode);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GO: Admit = Admit::Give {
        close: false,
        cut: false,
    };

    #[test]
    fn steps_in_order_are_given_and_a_hole_cuts_the_trajectory() {
        let mut p = Plays::default();
        assert_eq!(p.admit(7, 0), GO);
        assert_eq!(p.admit(7, 1), GO);
        // Steps 2..5 were dropped: the agent ends what it holds first.
        assert_eq!(
            p.admit(7, 5),
            Admit::Give {
                close: true,
                cut: true
            }
        );
        assert_eq!(p.admit(7, 6), GO);
        assert_eq!(p.admit(7, 6), Admit::Duplicate);
        assert_eq!(p.admit(7, 1), Admit::Duplicate);
        // A play first seen mid-way starts a trajectory there.
        assert_eq!(
            p.admit(8, 3),
            Admit::Give {
                close: false,
                cut: true
            }
        );
        p.forget(7);
        p.forget(8);
        assert_eq!(p.len(), 0);
    }

    #[test]
    fn an_older_batch_after_the_end_starts_and_ends_its_own_trajectory() {
        let mut p = Plays::default();
        // A stack hands out steps 4..6 (the end) before 0..4.
        assert_eq!(
            p.admit(3, 4),
            Admit::Give {
                close: false,
                cut: true
            }
        );
        p.admit(3, 5);
        assert!(p.ended(3, 6));
        assert_eq!(p.len(), 1, "steps 0..4 are still to come");
        assert_eq!(p.admit(3, 0), GO);
        for s in 1..4 {
            assert_eq!(p.admit(3, s), GO);
        }
        assert!(p.after_run(3), "the late trajectory ends at once");
        assert_eq!(p.len(), 0, "every step came: nothing is kept");
    }

    #[test]
    fn a_lost_batch_completes_an_ended_play() {
        let mut p = Plays::default();
        p.lost(4, 3);
        p.admit(4, 3);
        assert_eq!(p.len(), 1);
        assert!(p.ended(4, 4));
        assert_eq!(p.len(), 0);
        // Lost after the end.
        p.admit(5, 2);
        assert!(p.ended(5, 3));
        p.lost(5, 2);
        assert_eq!(p.len(), 0);
    }
}
