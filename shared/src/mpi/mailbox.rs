//! Mailboxes: where actor ranks of the `rma` workflows deposit their
//! batches one-sidedly, in an RMA window on the lead learner. Each actor
//! owns a region of fixed-size slots, sized from the run's observation and
//! action specs, its environment count and the steps per batch (not from
//! a sample message):
//!
//! ```text
//! region: [tail: u64][head: u64][slot 0] .. [slot K-1]
//! slot:   [frame length: u64][frame bytes, padded to the slot size]
//! ```
//!
//! The actor (under an exclusive lock) reads `tail`/`head`, puts its frame
//! into slot `tail % K` when one is free and adds 1 to `tail`
//! (`MPI_Accumulate`); the learner's transport thread (under an exclusive
//! lock on itself) reads every slot from `head` to `tail` and moves `head`.

use super::layout::Layout;
use super::window::{Epoch, Window};

const HEADER: usize = 16;

/// Where every actor's region is: broadcast by the lead learner.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Geometry {
    /// Slots per actor; 0 when the run's workflow does not deposit.
    pub slots: u64,
    /// Per world rank: (offset, slot bytes); (0, 0) for learners.
    pub regions: Vec<(u64, u64)>,
}

/// The most bytes one `Experience` frame of an actor can take: `steps`
/// steps of `envs` environments with `obs_dim`-float observations and
/// `action_dim`-float actions, every step a run of its own (so two
/// observations a step: the most a batch can hold), every run ending an
/// episode, every env idle, and an actor id of up to [`MAX_ACTOR_ID`]
/// bytes.
pub fn slot_bytes(obs_dim: u32, action_dim: u32, steps: u32, envs: u32) -> u64 {
    let t = u64::from(steps) * u64::from(envs.max(1));
    // Two observations, the action and the reward, and a run header.
    let per_step = 4 * (2 * u64::from(obs_dim) + u64::from(action_dim) + 1) + 32;
    let finished = (t + u64::from(envs)) * 32;
    let idle = 4 * u64::from(envs);
    // Length words, fixed fields, the id, and padding of each vector.
    let fixed = 8 + 4 + 256 + MAX_ACTOR_ID as u64 + 16 * 8;
    (fixed + t * per_step + finished + idle).next_multiple_of(8)
}

/// Longest actor id a mailbox slot is sized for.
pub const MAX_ACTOR_ID: usize = 128;

impl Geometry {
    /// Lays out `slots` slots for every actor rank, each sized by `bytes`
    /// from its environment count.
    pub fn plan(layout: &Layout, slots: u64, bytes: impl Fn(u32) -> u64) -> Geometry {
        let mut next = 0u64;
        let regions = (0..layout.ranks.len() as i32)
            .map(|r| {
                if slots == 0 || !layout.actors().contains(&r) {
                    return (0, 0);
                }
                let size = bytes(layout.envs(r));
                let at = next;
                next += HEADER as u64 + slots * size;
                (at, size)
            })
            .collect();
        Geometry { slots, regions }
    }

    /// Bytes the lead learner's window needs.
    pub fn total_bytes(&self) -> usize {
        self.regions
            .iter()
            .filter(|r| r.1 > 0)
            .map(|&(at, size)| at + HEADER as u64 + self.slots * size)
            .max()
            .unwrap_or(0) as usize
    }

    /// As words, for `MPI_Bcast`: the slot count, then (offset, slot
    /// bytes) per world rank.
    pub fn to_words(&self) -> Vec<u64> {
        let regions = self.regions.iter().flat_map(|&(at, size)| [at, size]);
        std::iter::once(self.slots).chain(regions).collect()
    }

    pub fn from_words(w: &[u64]) -> Geometry {
        Geometry {
            slots: w[0],
            regions: w[1..].chunks(2).map(|c| (c[0], c[1])).collect(),
        }
    }

    /// `rank`'s mailbox on `owner`, if it has one.
    pub fn mailbox(&self, owner: i32, rank: i32) -> Option<Mailbox> {
        let &(offset, slot_bytes) = self.regions.get(rank as usize)?;
        (self.slots > 0 && slot_bytes > 0).then_some(Mailbox {
            owner,
            offset: offset as usize,
            slots: self.slots,
            slot_bytes: slot_bytes as usize,
        })
    }
}

/// One actor's region in the owner's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mailbox {
    pub owner: i32,
    offset: usize,
    slots: u64,
    slot_bytes: usize,
}

impl Mailbox {
    fn slot(&self, n: u64) -> usize {
        self.offset + HEADER + (n % self.slots) as usize * self.slot_bytes
    }

    /// Actor side: puts `frame` into the next free slot. `Ok(false)` when
    /// every slot is taken (the learner has not drained them yet).
    pub fn deposit(&self, win: &Window, frame: &[u8]) -> Result<bool, String> {
        if frame.len() + 8 > self.slot_bytes {
            return Err(format!(
                "a batch of {} bytes does not fit the mailbox slot of {} bytes (is the actor id \
                 longer than {MAX_ACTOR_ID} bytes?)",
                frame.len(),
                self.slot_bytes - 8
            ));
        }
        let epoch = win.lock(self.owner, true);
        let mut ends = [0u64; 2];
        epoch.get_u64s(self.offset, &mut ends);
        let [tail, head] = ends;
        if tail - head >= self.slots {
            return Ok(false);
        }
        let mut slot = Vec::with_capacity(8 + frame.len());
        slot.extend_from_slice(&(frame.len() as u64).to_le_bytes());
        slot.extend_from_slice(frame);
        epoch.put(self.slot(tail), &slot);
        epoch.accumulate_u64s(self.offset, &[1]);
        Ok(true)
    }

    /// Owner side, within an epoch on itself: appends every deposited
    /// frame, oldest first, to `out` and frees their slots.
    pub fn drain(&self, epoch: &Epoch, out: &mut Vec<Vec<u8>>) -> Result<(), String> {
        let mut ends = [0u64; 2];
        epoch.get_u64s(self.offset, &mut ends);
        let [tail, head] = ends;
        if tail == head {
            return Ok(());
        }
        for n in head..tail {
            let mut len = [0u8; 8];
            epoch.get(self.slot(n), &mut len);
            let len = u64::from_le_bytes(len) as usize;
            if len + 8 > self.slot_bytes {
                return Err(format!("mailbox slot {n} claims {len} bytes"));
            }
            let mut frame = vec![0u8; len];
            epoch.get(self.slot(n) + 8, &mut frame);
            out.push(frame);
        }
        epoch.accumulate_u64s(self.offset + 8, &[tail - head]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpi::Role;
    use crate::wire::{EpisodeResult, Experience, Message, Steps, encode};

    #[test]
    fn a_full_batch_fits_its_slot() {
        let (od, ad, steps, envs) = (6u32, 1u32, 16u32, 3u32);
        let t = (steps * envs) as usize;
        let e = Experience {
            actor_id: "x".repeat(MAX_ACTOR_ID),
            session_id: u64::MAX,
            seq: u64::MAX,
            policy_version: u64::MAX,
            steps: {
                let mut s = Steps::default();
                for i in 0..t {
                    s.begin(
                        i as u32 % envs,
                        u64::MAX,
                        u32::MAX,
                        &vec![1.0; od as usize],
                        false,
                    );
                    s.step(&vec![1.0; ad as usize], 1.0, &vec![1.0; od as usize], false);
                    s.end(true);
                }
                s.into()
            },
            finished: vec![
                EpisodeResult {
                    episode: 1,
                    env: 0,
                    ret: 1.0,
                    length: 1
                };
                t + envs as usize
            ],
            faults: vec![],
            idle_envs: vec![0; envs as usize],
            last: true,
        };
        let frame = encode(&Message::Experience(e));
        let bound = slot_bytes(od, ad, steps, envs) as usize;
        assert!(frame.len() + 8 <= bound, "{} + 8 > {bound}", frame.len());
        assert!(bound < 2 * frame.len(), "the bound is loose: {bound}");
    }

    #[test]
    fn regions_do_not_overlap_and_round_trip() {
        let layout = Layout {
            rank: 0,
            ranks: vec![(Role::Learner, 0), (Role::Actor, 2), (Role::Actor, 1)],
            announced: vec![0, 1, 1],
            groups: Vec::new(),
        };
        let g = Geometry::plan(&layout, 4, |envs| 100 * u64::from(envs));
        assert_eq!(g.regions, vec![(0, 0), (0, 200), (816, 100)]);
        assert_eq!(g.total_bytes(), 816 + 16 + 400);
        assert_eq!(Geometry::from_words(&g.to_words()), g);
        assert!(g.mailbox(0, 0).is_none());
        assert!(Geometry::plan(&layout, 0, |_| 8).mailbox(0, 1).is_none());
    }
}
