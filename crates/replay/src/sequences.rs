//! [`SequenceReplay`]: R2D2's replay — a ring of fixed-size slots, each a
//! piece of one episode ([`Sequence`]: its observations, actions and
//! rewards, the recurrent state it starts from, how many of its first
//! steps only rebuild that state, and whether it ends in a termination),
//! padded to the longest a sequence can be; with its image for
//! checkpoints. Stacks of uint8 frames are kept one frame each, shared by
//! the sequences that overlap ([`SequenceReplay::with_frames`],
//! `sequence_frames.rs`).

use crate::obs_store::{ObsStore, ObsValue};
use crate::sequence_frames::{FrameRows, SequenceFrames};
use rlfleet_checkpoint::{Blob, ImageError, ReplayImage};
use rlfleet_shared::nets::Rows;

/// A sequence's observations: rows one after another (as a sequence is
/// stored), or a slot of frames (as one is read back from a replay that
/// keeps frames).
#[derive(Debug, Clone, Copy)]
pub enum SeqObs<'a> {
    Rows(Rows<'a>),
    Frames(FrameRows<'a>),
}

impl SeqObs<'_> {
    /// Whether the rows are a uint8 env's bytes.
    pub fn is_bytes(&self) -> bool {
        !matches!(self, SeqObs::Rows(Rows::Values(_)))
    }

    /// The first `rows` rows of `od` values, as values.
    pub fn values(&self, rows: usize, od: usize) -> Vec<f32> {
        let mut out = ObsStore::new(rows * od, self.is_bytes());
        for r in 0..rows {
            self.write_row(r, od, &mut out, r * od);
        }
        let mut v = vec![0.0; rows * od];
        out.read(0, &mut v);
        v
    }

    /// Row `r` (`od` values) into `dst` at value offset `at`.
    pub fn write_row(&self, r: usize, od: usize, dst: &mut ObsStore, at: usize) {
        match self {
            SeqObs::Rows(rows) => dst.write_rows(at, rows.slice(r * od, od)),
            SeqObs::Frames(f) => f.row_into(r, dst.bytes_mut(at, od)),
        }
    }
}

/// One stored sequence of `actions.len()` steps.
#[derive(Debug, Clone, Copy)]
pub struct Sequence<'a> {
    /// `steps + 1` rows: each step's observation, then the observation
    /// after the last step (what its targets bootstrap from); a uint8
    /// env's as bytes.
    pub obs: SeqObs<'a>,
    pub actions: &'a [f32],
    pub rewards: &'a [f32],
    /// The recurrent state before the first step.
    pub state: &'a [f32],
    /// The first `burn` steps rebuild the state and take no loss.
    pub burn: u32,
    /// The last step ended the episode by termination (no bootstrap past
    /// it).
    pub terminated: bool,
    /// The episode, and the index of the first row's step in its play:
    /// how a replay of frames finds the rows it already keeps.
    pub episode: u64,
    pub first: u32,
}

impl Sequence<'_> {
    pub fn steps(&self) -> usize {
        self.actions.len()
    }
}

/// The ring.
#[derive(Debug)]
pub struct SequenceReplay {
    capacity: usize,
    obs_dim: usize,
    state_len: usize,
    /// Steps a slot holds at most.
    max_steps: usize,
    /// A uint8 env's observations stay bytes (empty when `frames`).
    obs: ObsStore,
    /// Stacks of uint8 frames kept one frame each.
    frames: Option<SequenceFrames>,
    /// Per slot: its episode and its first row's step (for the image).
    episodes: Vec<u64>,
    firsts: Vec<u32>,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    states: Vec<f32>,
    steps: Vec<u32>,
    burns: Vec<u32>,
    terminated: Vec<u8>,
    head: usize,
    len: usize,
}

impl SequenceReplay {
    /// `bytes`: the observations are a uint8 env's, kept as bytes.
    pub fn new(
        capacity: usize,
        obs_dim: usize,
        state_len: usize,
        max_steps: usize,
        bytes: bool,
    ) -> SequenceReplay {
        SequenceReplay {
            capacity,
            obs_dim,
            state_len,
            max_steps,
            obs: ObsStore::new(capacity * (max_steps + 1) * obs_dim, bytes),
            frames: None,
            episodes: vec![0; capacity],
            firsts: vec![0; capacity],
            actions: vec![0.0; capacity * max_steps],
            rewards: vec![0.0; capacity * max_steps],
            states: vec![0.0; capacity * state_len],
            steps: vec![0; capacity],
            burns: vec![0; capacity],
            terminated: vec![0; capacity],
            head: 0,
            len: 0,
        }
    }

    /// The same ring keeping stacks of `k` uint8 frames of `frame` bytes
    /// one frame each, in a ring of `frames` frames: a slot whose frames
    /// the ring comes round to dies ([`SequenceReplay::push`] names it).
    pub fn with_frames(self, (frame, k): (usize, usize), frames: usize) -> SequenceReplay {
        assert!(
            self.obs.is_bytes() && frame * k == self.obs_dim,
            "stacks of bytes"
        );
        SequenceReplay {
            obs: ObsStore::empty(true),
            frames: Some(SequenceFrames::new(
                self.capacity,
                self.max_steps + 1,
                (frame, k),
                frames,
            )),
            ..self
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether slot `slot`'s observations can be read (always, but for a
    /// replay of frames whose ring came round to one of them).
    pub fn alive(&self, slot: usize) -> bool {
        self.frames.as_ref().is_none_or(|f| f.alive(slot))
    }

    /// `episode` sends no more sequences: a replay of frames lets go of
    /// its latest rows.
    pub fn forget(&mut self, episode: u64) {
        if let Some(f) = &mut self.frames {
            f.forget(episode);
        }
    }

    /// [`SequenceReplay::forget`] for every episode.
    pub fn forget_all(&mut self) {
        if let Some(f) = &mut self.frames {
            f.forget_all();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether observations are kept as bytes.
    pub fn is_bytes(&self) -> bool {
        self.obs.is_bytes()
    }

    pub fn memory_bytes(&self) -> usize {
        self.obs.bytes()
            + self.frames.as_ref().map_or(0, SequenceFrames::bytes)
            + 12 * self.capacity
            + 4 * (self.actions.len() + self.rewards.len() + self.states.len() + 2 * self.capacity)
            + self.capacity
    }

    /// Stores `s` (its observations as rows) over the oldest slot once
    /// full; returns its slot, and the other slots that died (a replay of
    /// frames whose ring came round to theirs: never to be drawn).
    pub fn push(&mut self, s: &Sequence<'_>) -> (usize, Vec<usize>) {
        let slot = self.head;
        let dead = self.store(slot, s);
        self.head = (self.head + 1) % self.capacity;
        self.len = (self.len + 1).min(self.capacity);
        (slot, dead)
    }

    fn store(&mut self, slot: usize, s: &Sequence<'_>) -> Vec<usize> {
        let (n, od, m) = (s.steps(), self.obs_dim, self.max_steps);
        let SeqObs::Rows(rows) = s.obs else {
            panic!("a sequence is stored from its rows");
        };
        assert!(
            (1..=m).contains(&n) && rows.len() == (n + 1) * od && s.rewards.len() == n,
            "a sequence of {n} steps for slots of {m}"
        );
        assert_eq!(s.state.len(), self.state_len, "a state of the core's size");
        let dead = match (&mut self.frames, rows) {
            (Some(f), Rows::Bytes(b)) => f.store(slot, b, (s.episode, s.first)),
            // A uint8 env's values (as `single` hands them over): exact.
            (Some(f), Rows::Values(v)) => {
                let b: Vec<u8> = v.iter().map(|&x| x.byte()).collect();
                f.store(slot, &b, (s.episode, s.first))
            }
            (None, _) => {
                self.obs.write_rows(slot * (m + 1) * od, rows);
                Vec::new()
            }
        };
        (self.episodes[slot], self.firsts[slot]) = (s.episode, s.first);
        self.actions[slot * m..slot * m + n].copy_from_slice(s.actions);
        self.rewards[slot * m..slot * m + n].copy_from_slice(s.rewards);
        let sl = self.state_len;
        self.states[slot * sl..(slot + 1) * sl].copy_from_slice(s.state);
        self.steps[slot] = n as u32;
        self.burns[slot] = s.burn;
        self.terminated[slot] = u8::from(s.terminated);
        dead
    }

    /// The sequence in `slot`.
    pub fn get(&self, slot: usize) -> Sequence<'_> {
        let (n, od, m, sl) = (
            self.steps[slot] as usize,
            self.obs_dim,
            self.max_steps,
            self.state_len,
        );
        let o = slot * (m + 1) * od;
        Sequence {
            obs: match &self.frames {
                Some(f) => SeqObs::Frames(f.rows(slot)),
                None => SeqObs::Rows(self.obs.rows(o, (n + 1) * od)),
            },
            actions: &self.actions[slot * m..slot * m + n],
            rewards: &self.rewards[slot * m..slot * m + n],
            state: &self.states[slot * sl..(slot + 1) * sl],
            burn: self.burns[slot],
            terminated: self.terminated[slot] != 0,
            episode: self.episodes[slot],
            first: self.firsts[slot],
        }
    }

    /// The filled slots, for a checkpoint.
    pub fn image(&self, img: &mut ReplayImage) {
        let n = self.len;
        let (od, m, sl) = (self.obs_dim, self.max_steps, self.state_len);
        let as_f32 = |v: &[u32]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        // A replay of frames images its rows whole (a dead slot's zeros).
        let obs = match &self.frames {
            Some(f) => {
                let mut rows = vec![0u8; n * (m + 1) * od];
                for slot in (0..n).filter(|&s| f.alive(s)) {
                    for r in 0..=self.steps[slot] as usize {
                        let at = (slot * (m + 1) + r) * od;
                        f.rows(slot).row_into(r, &mut rows[at..at + od]);
                    }
                }
                Blob::u8(&rows)
            }
            None => self.obs.image(n * (m + 1) * od),
        };
        let episodes: Vec<u8> = self.episodes[..n]
            .iter()
            .flat_map(|e| e.to_le_bytes())
            .collect();
        let firsts: Vec<u8> = self.firsts[..n]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect();
        let blobs = [
            ("obs", obs),
            ("episodes", Blob::u8(&episodes)),
            ("firsts", Blob::u8(&firsts)),
            ("actions", Blob::f32(&self.actions[..n * m])),
            ("rewards", Blob::f32(&self.rewards[..n * m])),
            ("states", Blob::f32(&self.states[..n * sl])),
            ("steps", Blob::f32(&as_f32(&self.steps[..n]))),
            ("burns", Blob::f32(&as_f32(&self.burns[..n]))),
            ("terminated", Blob::u8(&self.terminated[..n])),
        ];
        for (name, b) in blobs {
            img.blobs.insert(name.to_string(), b);
        }
        for (name, v) in [
            ("capacity", self.capacity),
            ("obs_dim", od),
            ("state_len", sl),
            ("max_steps", m),
            ("head", self.head),
            ("len", n),
        ] {
            img.counters.insert(name.to_string(), v as u64);
        }
    }

    /// Puts back what [`SequenceReplay::image`] saved; an image of another
    /// shape is refused and the ring left as it was.
    pub fn restore(&mut self, img: &ReplayImage) -> Result<(), ImageError> {
        let (n, head) = img.ring(&[
            ("capacity", self.capacity),
            ("obs_dim", self.obs_dim),
            ("state_len", self.state_len),
            ("max_steps", self.max_steps),
        ])?;
        let (od, m, sl) = (self.obs_dim, self.max_steps, self.state_len);
        let mut obs = ObsStore::new(self.capacity * (m + 1) * od, self.obs.is_bytes());
        obs.restore(img, "obs", n * (m + 1) * od)?;
        let actions = img.f32s("actions", n * m)?;
        let rewards = img.f32s("rewards", n * m)?;
        let states = img.f32s("states", n * sl)?;
        let counts = |name: &str| -> Result<Vec<u32>, ImageError> {
            let v = img.f32s(name, n)?;
            v.iter()
                .map(|&x| {
                    (x >= 0.0 && x <= m as f32 && x.fract() == 0.0)
                        .then_some(x as u32)
                        .ok_or_else(|| ImageError(format!("`{name}` holds {x}")))
                })
                .collect()
        };
        let (steps, burns) = (counts("steps")?, counts("burns")?);
        if let Some(bad) = steps.iter().position(|&s| s == 0) {
            return Err(ImageError(format!("sequence {bad} has no steps")));
        }
        let terminated = img
            .blob("terminated", rlfleet_checkpoint::BlobType::U8, n)?
            .to_vec();
        // Each slot's episode and first step (an image from before them:
        // every slot an episode of its own, sharing no frames).
        let words = |name: &str, width: usize| -> Result<Option<Vec<u64>>, ImageError> {
            if !img.blobs.contains_key(name) {
                return Ok(None);
            }
            let b = img.blob(name, rlfleet_checkpoint::BlobType::U8, n * width)?;
            Ok(Some(
                b.chunks_exact(width)
                    .map(|c| {
                        c.iter()
                            .rev()
                            .fold(0u64, |x, &byte| x << 8 | u64::from(byte))
                    })
                    .collect(),
            ))
        };
        let episodes =
            words("episodes", 8)?.unwrap_or_else(|| (0..n as u64).map(|s| u64::MAX - s).collect());
        let firsts = words("firsts", 4)?.unwrap_or_else(|| vec![0; n]);
        for s in 0..n {
            (self.episodes[s], self.firsts[s]) = (episodes[s], firsts[s] as u32);
        }
        if let Some(f) = &mut self.frames {
            // Oldest first, so that each shares the frames of the one before.
            let oldest = if n == self.capacity { head } else { 0 };
            for s in (0..n).map(|i| (oldest + i) % self.capacity) {
                let rows = (steps[s] as usize + 1) * od;
                let at = s * (m + 1) * od;
                let bytes = match obs.rows(at, rows) {
                    Rows::Bytes(b) => b,
                    Rows::Values(_) => unreachable!("a replay of frames keeps bytes"),
                };
                f.store(s, bytes, (episodes[s], firsts[s] as u32));
            }
            f.forget_all();
        } else {
            self.obs = obs;
        }
        self.actions[..n * m].copy_from_slice(&actions);
        self.rewards[..n * m].copy_from_slice(&rewards);
        self.states[..n * sl].copy_from_slice(&states);
        self.steps[..n].copy_from_slice(&steps);
        self.burns[..n].copy_from_slice(&burns);
        self.terminated[..n].copy_from_slice(&terminated);
        self.len = n;
        self.head = head;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(steps: usize, tag: f32) -> (Vec<u8>, Vec<f32>, Vec<f32>, Vec<f32>) {
        let obs = (0..(steps + 1) * 2)
            .map(|i| (tag as usize + i) as u8)
            .collect();
        let actions = (0..steps).map(|i| (i % 3) as f32).collect();
        let rewards = (0..steps).map(|i| tag - i as f32).collect();
        (obs, actions, rewards, vec![tag; 4])
    }

    /// Sequences of any length up to the slot's come back as stored (a
    /// byte replay's as bytes, in a quarter of the memory; a replay of
    /// frames's from its ring); the oldest is overwritten once full; an
    /// image restores every slot and one of another shape is refused.
    #[test]
    fn sequences_round_trip_through_slots_and_images() {
        for (bytes, frames) in [(false, false), (true, false), (true, true)] {
            round_trip(bytes, frames);
        }
        let (f, b) = (
            SequenceReplay::new(8, 100, 4, 5, false),
            SequenceReplay::new(8, 100, 4, 5, true),
        );
        assert!(b.is_bytes() && !f.is_bytes());
        assert_eq!(f.memory_bytes() - b.memory_bytes(), 3 * 8 * 6 * 100);
    }

    /// An episode of stacks of 2 one-byte frames cut as R2D2 cuts it
    /// (unrolls of 4 burned in over 2: each sequence shares 3 rows with
    /// the one before): a replay of frames reads back every row a replay
    /// of rows does, and keeps about one frame per step.
    #[test]
    fn overlapping_sequences_read_back_as_rows_from_a_frame_apiece() {
        let mut rows = SequenceReplay::new(8, 2, 1, 6, true);
        let mut frames = SequenceReplay::new(8, 2, 1, 6, true).with_frames((1, 2), 64);
        let stack = |t: usize| [t.saturating_sub(1) as u8, t as u8];
        let (a, r) = ([0.0; 6], [1.0; 6]);
        for k in 0..6usize {
            let start = (4 * k).saturating_sub(2);
            let end = 4 * (k + 1);
            let obs: Vec<u8> = (start..=end).flat_map(stack).collect();
            let n = end - start;
            let s = Sequence {
                obs: SeqObs::Rows(Rows::Bytes(&obs)),
                actions: &a[..n],
                rewards: &r[..n],
                state: &[0.0],
                burn: (4 * k - start) as u32,
                terminated: false,
                episode: 7,
                first: start as u32,
            };
            assert!(rows.push(&s).1.is_empty());
            assert!(frames.push(&s).1.is_empty());
        }
        for slot in 0..6 {
            let (x, y) = (rows.get(slot), frames.get(slot));
            let n = x.steps() + 1;
            assert_eq!(x.obs.values(n, 2), y.obs.values(n, 2), "slot {slot}");
        }
        // 24 steps and their last observation: 25 frames, and 1 before.
        assert_eq!(frames.frames.as_ref().unwrap().pushed(), 26);
    }

    fn replay(bytes: bool, frames: bool, max_steps: usize) -> SequenceReplay {
        let r = SequenceReplay::new(3, 2, 4, max_steps, bytes);
        // Stacks of 2 one-byte frames, a ring of 40.
        if frames { r.with_frames((1, 2), 40) } else { r }
    }

    fn round_trip(bytes: bool, frames: bool) {
        let mut r = replay(bytes, frames, 5);
        let mut kept = Vec::new();
        for (k, n) in [5, 1, 3, 4].into_iter().enumerate() {
            let (o, a, rw, st) = seq(n, 10.0 * k as f32);
            let values: Vec<f32> = o.iter().map(|&x| f32::from(x)).collect();
            let s = Sequence {
                obs: SeqObs::Rows(if bytes {
                    Rows::Bytes(&o)
                } else {
                    Rows::Values(&values)
                }),
                actions: &a,
                rewards: &rw,
                state: &st,
                burn: (k % 2) as u32,
                terminated: k == 2,
                episode: k as u64,
                first: 0,
            };
            let (burn, term) = (s.burn, s.terminated);
            let (slot, dead) = r.push(&s);
            assert_eq!((slot, dead.len()), (k % 3, 0));
            kept.push((slot, values, a, rw, st, burn, term));
        }
        assert_eq!(r.len(), 3);
        let check = |r: &SequenceReplay| {
            for (slot, o, a, rw, st, burn, term) in &kept[1..] {
                let s = r.get(*slot);
                assert_eq!(s.obs.values(a.len() + 1, 2), *o);
                assert_eq!(s.obs.is_bytes(), bytes);
                assert_eq!((s.actions, s.rewards, s.state), (&a[..], &rw[..], &st[..]));
                assert_eq!((s.burn, s.terminated), (*burn, *term));
            }
        };
        check(&r);
        let mut img = ReplayImage::default();
        r.image(&mut img);
        let mut back = replay(bytes, frames, 5);
        back.restore(&img).unwrap();
        check(&back);
        let (_, o, a, rw, st, ..) = &kept[3];
        let raw: Vec<u8> = o.iter().map(|&x| x as u8).collect();
        let s = Sequence {
            obs: SeqObs::Rows(if bytes {
                Rows::Bytes(&raw)
            } else {
                Rows::Values(o)
            }),
            actions: a,
            rewards: rw,
            state: st,
            burn: 0,
            terminated: false,
            episode: 9,
            first: 0,
        };
        assert_eq!(back.push(&s).0, 1, "the head comes back too");
        let mut other = replay(bytes, frames, 6);
        let e = other.restore(&img).unwrap_err();
        assert!(e.0.contains("max_steps"), "{e}");
        assert!(other.is_empty());
    }
}
