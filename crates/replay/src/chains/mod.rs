//! [`FrameChains`]: a replay of frame-stacked byte observations that keeps
//! each frame once. Every slot is one env step: the newest frame of its
//! observation, its action, reward and how it ended its episode, and links
//! to the episode's previous and next steps (per-env frame chains in one
//! ring). A step's stack is rebuilt at sample time from the newest frames
//! of the steps before it (a chain's first slot keeps the older frames of
//! its stack beside it); its n-step return, discount and next stack from
//! the steps after it (a step with no successor yet keeps its next frame
//! beside it). A window of n steps that has not come in yet is not
//! sampled. Nothing crosses an episode or an env: a chain is one play of
//! one episode. When the ring overwrites a chain's oldest step, the next
//! step becomes the chain's first and keeps its older frames.
//!
//! `sample.rs` draws and gathers batches; `image.rs` saves and restores it
//! for checkpoints.

mod image;
mod sample;

use crate::uniform::Transition;
use std::collections::HashMap;

const NONE: u32 = u32::MAX;

/// [`FrameChains::ends`]: the step ended its episode in a terminal state.
const TERMINAL: u8 = 1;
/// The step ended its episode without one (a time limit): it bootstraps.
const CUT: u8 = 2;

/// The replay (see the module's documentation).
#[derive(Debug)]
pub struct FrameChains {
    capacity: usize,
    /// Bytes in one frame, frames in one stack.
    frame: usize,
    k: usize,
    act_dim: usize,
    /// Steps per return, and its discount.
    n: usize,
    gamma: f32,
    frames: Vec<u8>,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    ends: Vec<u8>,
    episodes: Vec<u64>,
    prev: Vec<u32>,
    next: Vec<u32>,
    /// A slot whose stack does not follow from the step before it (a
    /// chain's first): the `k - 1` frames before its newest.
    bases: HashMap<u32, Vec<u8>>,
    /// A slot whose next stack is not its successor's stack (or that has
    /// none yet): that next stack's newest frame.
    tails: HashMap<u32, Vec<u8>>,
    /// A slot whose next observation is not its stack moved on by a frame:
    /// that observation, whole.
    whole: HashMap<u32, Vec<u8>>,
    /// Each episode still going on: its newest slot.
    open: HashMap<u64, u32>,
    /// Slots whose window is complete (they can be sampled).
    complete: usize,
    head: usize,
    len: usize,
    pushed: u64,
}

impl FrameChains {
    /// Room for `capacity` steps of `k`-frame stacks of `frame` bytes,
    /// `act_dim` action values, `n`-step returns discounted by `gamma`.
    pub fn new(
        capacity: usize,
        frame: usize,
        k: usize,
        act_dim: usize,
        n: u32,
        gamma: f64,
    ) -> Self {
        assert!(capacity > 0 && capacity < NONE as usize && k > 1 && frame > 0);
        FrameChains {
            capacity,
            frame,
            k,
            act_dim,
            n: n.max(1) as usize,
            gamma: gamma as f32,
            frames: vec![0; capacity * frame],
            actions: vec![0.0; capacity * act_dim],
            rewards: vec![0.0; capacity],
            ends: vec![0; capacity],
            episodes: vec![0; capacity],
            prev: vec![NONE; capacity],
            next: vec![NONE; capacity],
            bases: HashMap::new(),
            tails: HashMap::new(),
            whole: HashMap::new(),
            open: HashMap::new(),
            complete: 0,
            head: 0,
            len: 0,
            pushed: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots that can be sampled: those whose n steps have all come in.
    pub fn sampleable(&self) -> usize {
        self.complete
    }

    fn obs_dim(&self) -> usize {
        self.k * self.frame
    }

    /// Bytes held: a frame and the scalars per slot, and the frames kept
    /// beside chain ends.
    pub fn memory_bytes(&self) -> usize {
        let per_slot = self.frame + 4 * self.act_dim + 4 + 1 + 8 + 2 * 4;
        let side = |m: &HashMap<u32, Vec<u8>>| m.values().map(|v| v.len() + 4).sum::<usize>();
        self.capacity * per_slot + side(&self.bases) + side(&self.tails) + side(&self.whole)
    }

    /// Stores one step of `t.episode` (its stack, action, reward, next
    /// stack); returns its slot and the slots whose n-step window this
    /// step completed (they can be sampled from now on).
    pub fn push(&mut self, t: &Transition<'_>) -> (usize, Vec<usize>) {
        let narrow = |v: &[f32]| v.iter().map(|&x| x as u8).collect::<Vec<u8>>();
        let (obs, next) = (narrow(t.obs), narrow(t.next_obs));
        self.push_bytes(&t.with_obs(&obs, &next))
    }

    /// [`FrameChains::push`] of a step whose stacks are bytes, as they
    /// arrived.
    pub fn push_bytes(&mut self, t: &Transition<'_, u8>) -> (usize, Vec<usize>) {
        let (f, od) = (self.frame, self.obs_dim());
        assert_eq!((t.obs.len(), t.next_obs.len()), (od, od), "stack sizes");
        let (obs, next) = (t.obs, t.next_obs);
        if self.len == self.capacity {
            self.evict(self.head);
        }
        let s = self.head as u32;
        let i = self.head;
        // The episode's previous step links to this one; this step's stack
        // follows from it when it is that step's next stack (otherwise, as
        // at a chain's start, its older frames are kept beside it).
        let before = self.open.get(&t.episode).copied();
        let follows = before.is_some_and(|p| {
            self.next_frames_of(p as usize)
                .is_some_and(|next| next.iter().zip(obs.chunks_exact(f)).all(|(a, b)| *a == b))
        });
        self.prev[i] = before.unwrap_or(NONE);
        if let Some(p) = before {
            self.next[p as usize] = s;
        }
        if follows {
            self.tails.remove(&before.expect("follows a step"));
        } else {
            self.bases.insert(s, obs[..od - f].to_vec());
        }
        self.next[i] = NONE;
        self.frames[i * f..(i + 1) * f].copy_from_slice(&obs[od - f..]);
        let ad = self.act_dim;
        self.actions[i * ad..(i + 1) * ad].copy_from_slice(t.action);
        self.rewards[i] = t.reward;
        self.ends[i] = if t.terminated { TERMINAL } else { 0 };
        self.episodes[i] = t.episode;
        if next[..od - f] == obs[f..] {
            self.tails.insert(s, next[od - f..].to_vec());
        } else {
            self.whole.insert(s, next.to_vec());
        }
        self.head = (self.head + 1) % self.capacity;
        self.len = (self.len + 1).min(self.capacity);
        self.pushed += 1;
        // The step n - 1 back now has its whole window (with n = 1, this
        // one); an end completes the rest.
        let mut done: Vec<usize> = self
            .walk(i, self.n - 1, |c, j| c.prev[j])
            .into_iter()
            .collect();
        if t.terminated {
            self.open.remove(&t.episode);
            self.completed_by_end(i, &mut done);
        } else {
            self.open.insert(t.episode, s);
        }
        self.complete += done.len();
        (i, done)
    }

    /// `episode` ended without a terminal state: its last step bootstraps
    /// from its final observation, and its open windows are complete.
    pub fn end_episode(&mut self, episode: u64) -> Vec<usize> {
        let mut done = Vec::new();
        if let Some(s) = self.open.remove(&episode) {
            self.ends[s as usize] = CUT;
            self.completed_by_end(s as usize, &mut done);
        }
        self.complete += done.len();
        done
    }

    /// `episode` is played again from its start: its chain ends here
    /// (windows it left open are never sampled; a new play is a new chain).
    pub fn abandon(&mut self, episode: u64) {
        self.open.remove(&episode);
    }

    /// Episodes whose chain is still open.
    pub fn open_episodes(&self) -> usize {
        self.open.len()
    }

    /// Every episode's play ends where it is (a resumed run plays the
    /// episodes open at its checkpoint again from their start).
    pub fn abandon_all(&mut self) {
        self.open.clear();
    }

    /// Slots whose window an end at slot `last` completed: `last` and the
    /// up to `n - 2` before it (the one `n - 1` back completed with `last`'s
    /// push; with `n` = 1 every slot did).
    fn completed_by_end(&self, last: usize, done: &mut Vec<usize>) {
        let mut j = last;
        for _ in 0..self.n - 1 {
            done.push(j);
            match self.prev[j] {
                NONE => return,
                p => j = p as usize,
            }
        }
    }

    /// Follows `link` from slot `from` `steps` times; `None` when a link
    /// is missing.
    fn walk(&self, from: usize, steps: usize, link: impl Fn(&Self, usize) -> u32) -> Option<usize> {
        let mut j = from;
        for _ in 0..steps {
            match link(self, j) {
                NONE => return None,
                x => j = x as usize,
            }
        }
        Some(j)
    }

    /// Slot `s`'s oldest step before eviction: its successor becomes its
    /// chain's first slot and keeps its older frames.
    fn evict(&mut self, s: usize) {
        if self.is_complete(s) {
            self.complete -= 1;
        }
        let succ = self.next[s];
        if succ != NONE {
            if !self.bases.contains_key(&succ) {
                let older = self.frames_of(succ as usize)[..self.k - 1].concat();
                self.bases.insert(succ, older);
            }
            self.prev[succ as usize] = NONE;
        }
        let p = self.prev[s];
        if p != NONE {
            self.next[p as usize] = NONE;
        }
        let key = s as u32;
        self.bases.remove(&key);
        self.tails.remove(&key);
        self.whole.remove(&key);
        if self.open.get(&self.episodes[s]) == Some(&key) {
            self.open.remove(&self.episodes[s]);
        }
    }

    /// Slot `s`'s stack as its `k` frames, oldest first, borrowed from the
    /// ring (walking back along the chain) and the chain's first slot's
    /// older frames.
    fn frames_of(&self, s: usize) -> Vec<&[u8]> {
        let (f, k) = (self.frame, self.k);
        // Newest first, turned round at the end.
        let mut out: Vec<&[u8]> = Vec::with_capacity(k);
        let mut slot = s;
        loop {
            out.push(&self.frames[slot * f..(slot + 1) * f]);
            if out.len() == k {
                break;
            }
            if let Some(base) = self.bases.get(&(slot as u32)) {
                let missing = k - out.len();
                out.extend(base.chunks_exact(f).rev().take(missing));
                break;
            }
            slot = self.prev[slot] as usize;
        }
        out.reverse();
        out
    }

    /// Slot `s`'s next observation as frames (its stack moved on by one),
    /// or `None` when it is kept whole.
    fn next_frames_of(&self, s: usize) -> Option<Vec<&[u8]>> {
        if self.whole.contains_key(&(s as u32)) {
            return None;
        }
        let f = self.frame;
        let mut frames = self.frames_of(s);
        frames.remove(0);
        frames.push(match self.tails.get(&(s as u32)) {
            Some(tail) => tail,
            None => {
                let x = self.next[s] as usize;
                &self.frames[x * f..(x + 1) * f]
            }
        });
        Some(frames)
    }

    /// Slot `s`'s observation: its stack, oldest frame first.
    fn obs_bytes(&self, s: usize, out: &mut [u8]) {
        copy_frames(&self.frames_of(s), out);
    }

    /// Slot `s`'s next observation (one step on).
    fn next_bytes(&self, s: usize, out: &mut [u8]) {
        match self.next_frames_of(s) {
            Some(frames) => copy_frames(&frames, out),
            None => out.copy_from_slice(&self.whole[&(s as u32)]),
        }
    }

    /// Slot `s`'s n-step window: its last slot, the discounted reward sum
    /// and the bootstrap's discount; `None` while steps are still to come.
    fn window(&self, s: usize) -> Option<(usize, f32, f32)> {
        let (mut j, mut sum, mut scale) = (s, 0.0f32, 1.0f32);
        for m in 0..self.n {
            sum += scale * self.rewards[j];
            scale *= self.gamma;
            match self.ends[j] {
                TERMINAL => return Some((j, sum, 0.0)),
                CUT => return Some((j, sum, scale)),
                _ => {}
            }
            if m + 1 == self.n {
                break;
            }
            match self.next[j] {
                NONE => return None,
                x => j = x as usize,
            }
        }
        Some((j, sum, scale))
    }

    /// Whether slot `s` (below `len()`) can be sampled.
    pub fn is_complete(&self, s: usize) -> bool {
        self.window(s).is_some()
    }
}

/// Frames laid end to end into `out`.
fn copy_frames(frames: &[&[u8]], out: &mut [u8]) {
    for (dst, src) in out.chunks_exact_mut(frames[0].len()).zip(frames) {
        dst.copy_from_slice(src);
    }
}

#[cfg(test)]
mod tests;
