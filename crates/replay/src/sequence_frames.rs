//! [`SequenceFrames`]: the observations of R2D2's sequence slots when they
//! are stacks of uint8 frames, each frame kept once. Frames live in one
//! ring; a slot holds, per row, where its stack's frames are in it. A row
//! whose stack moves on by one frame from the row before it adds one
//! frame; the rows a sequence shares with the one before it of the same
//! episode (its burn-in, and the observation that ended that one) add none
//! — they are that sequence's frames, found by the episode's step index
//! and checked byte for byte. When the ring comes round to a frame a slot
//! still reads, the slot dies (its priority is withheld by the caller).

use std::collections::HashMap;

/// Where a row's stack is: `k` absolute frame numbers.
type Stack = Vec<u64>;

/// The latest sequence of an open episode: the step index of its first
/// row, and each row's stack.
#[derive(Debug)]
struct Tail {
    first: u32,
    stacks: Vec<Stack>,
}

/// The frames of every slot (see the module's documentation).
#[derive(Debug)]
pub struct SequenceFrames {
    /// Bytes in a frame, frames in a stack, frames the ring holds.
    frame: usize,
    k: usize,
    capacity: usize,
    ring: Vec<u8>,
    /// Frames ever pushed: frame number `a` is alive while
    /// `pushed - a <= capacity`, at `a % capacity`.
    pushed: u64,
    /// Rows a slot holds at most.
    max_rows: usize,
    /// Per slot: its frame numbers (`max_rows * k` room), how many it
    /// uses, each row's first entry, and its oldest frame number.
    lists: Vec<u64>,
    used: Vec<u32>,
    starts: Vec<u32>,
    oldest: Vec<u64>,
    /// Slots whose frames are all alive.
    alive: Vec<bool>,
    tails: HashMap<u64, Tail>,
}

/// One slot's rows, read from the ring.
#[derive(Debug, Clone, Copy)]
pub struct FrameRows<'a> {
    frames: &'a SequenceFrames,
    slot: usize,
}

impl FrameRows<'_> {
    /// Row `r`'s stack into `out` (`k * frame` bytes), oldest frame first.
    pub fn row_into(&self, r: usize, out: &mut [u8]) {
        let f = self.frames;
        let m = f.max_rows * f.k;
        let at = self.slot * m + f.starts[self.slot * f.max_rows + r] as usize;
        for (j, dst) in out.chunks_exact_mut(f.frame).enumerate() {
            dst.copy_from_slice(f.frame_at(f.lists[at + j]));
        }
    }
}

impl SequenceFrames {
    /// `slots` slots of up to `max_rows` rows of `k` frames of `frame`
    /// bytes, over a ring of `capacity` frames.
    pub fn new(slots: usize, max_rows: usize, (frame, k): (usize, usize), capacity: usize) -> Self {
        assert!(
            frame > 0 && k > 0 && capacity >= max_rows * k,
            "room for a sequence"
        );
        SequenceFrames {
            frame,
            k,
            capacity,
            ring: vec![0; capacity * frame],
            pushed: 0,
            max_rows,
            lists: vec![0; slots * max_rows * k],
            used: vec![0; slots],
            starts: vec![0; slots * max_rows],
            oldest: vec![0; slots],
            alive: vec![false; slots],
            tails: HashMap::new(),
        }
    }

    fn frame_at(&self, a: u64) -> &[u8] {
        let i = (a % self.capacity as u64) as usize;
        &self.ring[i * self.frame..(i + 1) * self.frame]
    }

    fn is_alive(&self, a: u64) -> bool {
        self.pushed - a <= self.capacity as u64
    }

    fn push_frame(&mut self, bytes: &[u8]) -> u64 {
        let a = self.pushed;
        let i = (a % self.capacity as u64) as usize;
        self.ring[i * self.frame..(i + 1) * self.frame].copy_from_slice(bytes);
        self.pushed += 1;
        a
    }

    /// Frames ever put in the ring.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Bytes held: the ring and the slots' frame lists.
    pub fn bytes(&self) -> usize {
        self.ring.len()
            + 8 * (self.lists.len() + self.oldest.len())
            + 4 * (self.used.len() + self.starts.len())
    }

    /// Slot `slot`'s rows (alive: checked by the caller).
    pub fn rows(&self, slot: usize) -> FrameRows<'_> {
        debug_assert!(self.alive[slot], "slot {slot}'s frames were overwritten");
        FrameRows { frames: self, slot }
    }

    /// Whether every frame slot `slot` reads is still in the ring.
    pub fn alive(&self, slot: usize) -> bool {
        self.alive[slot]
    }

    /// The stack of step `step` of `episode`'s latest sequence, when its
    /// frames are alive and are `row`.
    fn shared(&self, episode: u64, step: u32, row: &[u8]) -> Option<Stack> {
        let tail = self.tails.get(&episode)?;
        let stack = tail.stacks.get(step.checked_sub(tail.first)? as usize)?;
        let same = stack
            .iter()
            .zip(row.chunks_exact(self.frame))
            .all(|(&a, bytes)| self.is_alive(a) && self.frame_at(a) == bytes);
        same.then(|| stack.clone())
    }

    /// Stores `rows` (stacks of bytes, one after another) in `slot`: rows
    /// `first..` of `episode`'s play. Returns the other slots whose frames
    /// the ring overwrote.
    pub fn store(&mut self, slot: usize, rows: &[u8], (episode, first): (u64, u32)) -> Vec<usize> {
        let (f, k) = (self.frame, self.k);
        let n = rows.len() / (f * k);
        assert!(
            n <= self.max_rows && n * f * k == rows.len(),
            "{n} rows of stacks"
        );
        let m = self.max_rows * k;
        self.alive[slot] = false;
        let mut stacks: Vec<Stack> = Vec::with_capacity(n);
        let (mut list, mut starts) = (Vec::with_capacity(n + k), Vec::with_capacity(n));
        for (r, row) in rows.chunks_exact(f * k).enumerate() {
            let follows = r > 0 && row[..(k - 1) * f] == rows[(r - 1) * f * k + f..r * f * k];
            let stack = match self.shared(episode, first + r as u32, row) {
                Some(stack) => stack,
                None if follows => {
                    let mut s = stacks[r - 1][1..].to_vec();
                    s.push(self.push_frame(&row[(k - 1) * f..]));
                    s
                }
                None => row.chunks_exact(f).map(|b| self.push_frame(b)).collect(),
            };
            if r > 0 && stack[..k - 1] == stacks[r - 1][1..] {
                list.push(stack[k - 1]);
                starts.push(starts[r - 1] + 1);
            } else {
                starts.push(list.len() as u32);
                list.extend_from_slice(&stack);
            }
            stacks.push(stack);
        }
        assert!(list.len() <= m, "{} frames for {m} places", list.len());
        self.lists[slot * m..slot * m + list.len()].copy_from_slice(&list);
        self.used[slot] = list.len() as u32;
        self.starts[slot * self.max_rows..slot * self.max_rows + n].copy_from_slice(&starts);
        self.oldest[slot] = list.iter().copied().min().unwrap_or(self.pushed);
        self.alive[slot] = true;
        self.tails.insert(episode, Tail { first, stacks });
        // Slots that read a frame the ring has come round to.
        let floor = self.pushed.saturating_sub(self.capacity as u64);
        let dead: Vec<usize> = (0..self.alive.len())
            .filter(|&s| self.alive[s] && self.oldest[s] < floor)
            .collect();
        for &s in &dead {
            self.alive[s] = false;
        }
        dead
    }

    /// `episode` sends no more sequences (it ended, or is played again).
    pub fn forget(&mut self, episode: u64) {
        self.tails.remove(&episode);
    }

    /// No episode sends more (a checkpoint was restored).
    pub fn forget_all(&mut self) {
        self.tails.clear();
    }

    /// Episodes whose latest sequence is kept for the next to share.
    pub fn open(&self) -> usize {
        self.tails.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frame `t` of an episode: 3 bytes from its number.
    fn frame(e: u8, t: u32) -> [u8; 3] {
        [e, t as u8, (t >> 8) as u8]
    }

    /// Rows `from..to` of episode `e`, stacks of 2 frames (the first
    /// stack repeats frame 0).
    fn rows(e: u8, from: u32, to: u32) -> Vec<u8> {
        (from..to)
            .flat_map(|t| [frame(e, t.saturating_sub(1)), frame(e, t)].concat())
            .collect()
    }

    /// Overlapping sequences of an episode share their common rows'
    /// frames; each row reads back as stored; the ring coming round
    /// kills the slots that read what it overwrote.
    #[test]
    fn overlapping_sequences_share_their_frames() {
        let mut f = SequenceFrames::new(4, 6, (3, 2), 14);
        // Rows 0..6, then 4..10 (2 shared): 2 + 5 frames, then 4 more.
        assert!(f.store(0, &rows(1, 0, 6), (1, 0)).is_empty());
        assert_eq!(f.pushed, 7);
        assert!(f.store(1, &rows(1, 4, 10), (1, 4)).is_empty());
        assert_eq!(f.pushed, 11);
        // Another episode shares nothing with it; the ring (14 frames)
        // comes round to slot 0's first frame.
        assert_eq!(f.store(2, &rows(2, 0, 3), (2, 0)), vec![0]);
        assert_eq!(f.pushed, 15);
        let mut out = [0u8; 6];
        for (slot, e, from, to) in [(1, 1, 4, 10), (2, 2, 0, 3)] {
            let want = rows(e, from, to);
            for r in 0..(to - from) as usize {
                f.rows(slot).row_into(r, &mut out);
                assert_eq!(out[..], want[r * 6..(r + 1) * 6], "slot {slot} row {r}");
            }
        }
        assert!(!f.alive(0) && f.alive(1) && f.alive(2));
        // Rows of other bytes at the same steps (a play of the episode
        // again) share nothing; a row of the same bytes is shared.
        let mut other = rows(1, 8, 10);
        other[0] ^= 0xff;
        assert!(f.store(3, &other, (1, 8)).is_empty());
        assert_eq!(f.pushed, 15 + 2);
        for r in 0..2 {
            f.rows(3).row_into(r, &mut out);
            assert_eq!(out[..], other[r * 6..(r + 1) * 6], "row {r}");
        }
        f.forget(1);
        f.forget(2);
        assert_eq!(f.open(), 0);
    }
}
