//! [`SequenceReplay`]: R2D2's replay — a ring of fixed-size slots, each a
//! piece of one episode ([`Sequence`]: its observations, actions and
//! rewards, the recurrent state it starts from, how many of its first
//! steps only rebuild that state, and whether it ends in a termination),
//! padded to the longest a sequence can be; with its image for
//! checkpoints.

use crate::obs_store::ObsStore;
use rlfleet_checkpoint::{Blob, ImageError, ReplayImage};
use rlfleet_shared::nets::Rows;

/// One stored sequence of `actions.len()` steps.
#[derive(Debug, Clone, Copy)]
pub struct Sequence<'a> {
    /// `steps + 1` rows: each step's observation, then the observation
    /// after the last step (what its targets bootstrap from); a uint8
    /// env's as bytes.
    pub obs: Rows<'a>,
    pub actions: &'a [f32],
    pub rewards: &'a [f32],
    /// The recurrent state before the first step.
    pub state: &'a [f32],
    /// The first `burn` steps rebuild the state and take no loss.
    pub burn: u32,
    /// The last step ended the episode by termination (no bootstrap past
    /// it).
    pub terminated: bool,
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
    /// A uint8 env's observations stay bytes.
    obs: ObsStore,
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

    pub fn len(&self) -> usize {
        self.len
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
            + 4 * (self.actions.len() + self.rewards.len() + self.states.len() + 2 * self.capacity)
            + self.capacity
    }

    /// Stores `s` over the oldest slot once full; returns its slot.
    pub fn push(&mut self, s: &Sequence<'_>) -> usize {
        let (n, od, m) = (s.steps(), self.obs_dim, self.max_steps);
        assert!(
            (1..=m).contains(&n) && s.obs.len() == (n + 1) * od && s.rewards.len() == n,
            "a sequence of {n} steps for slots of {m}"
        );
        assert_eq!(s.state.len(), self.state_len, "a state of the core's size");
        let slot = self.head;
        let o = slot * (m + 1) * od;
        self.obs.write_rows(o, s.obs);
        self.actions[slot * m..slot * m + n].copy_from_slice(s.actions);
        self.rewards[slot * m..slot * m + n].copy_from_slice(s.rewards);
        let sl = self.state_len;
        self.states[slot * sl..(slot + 1) * sl].copy_from_slice(s.state);
        self.steps[slot] = n as u32;
        self.burns[slot] = s.burn;
        self.terminated[slot] = u8::from(s.terminated);
        self.head = (self.head + 1) % self.capacity;
        self.len = (self.len + 1).min(self.capacity);
        slot
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
            obs: self.obs.rows(o, (n + 1) * od),
            actions: &self.actions[slot * m..slot * m + n],
            rewards: &self.rewards[slot * m..slot * m + n],
            state: &self.states[slot * sl..(slot + 1) * sl],
            burn: self.burns[slot],
            terminated: self.terminated[slot] != 0,
        }
    }

    /// The filled slots, for a checkpoint.
    pub fn image(&self, img: &mut ReplayImage) {
        let n = self.len;
        let (od, m, sl) = (self.obs_dim, self.max_steps, self.state_len);
        let as_f32 = |v: &[u32]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let blobs = [
            ("obs", self.obs.image(n * (m + 1) * od)),
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
        self.obs = obs;
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

    fn seq(steps: usize, tag: f32) -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
        let obs = (0..(steps + 1) * 2).map(|i| tag + i as f32).collect();
        let actions = (0..steps).map(|i| (i % 3) as f32).collect();
        let rewards = (0..steps).map(|i| tag - i as f32).collect();
        (obs, actions, rewards, vec![tag; 4])
    }

    /// Sequences of any length up to the slot's come back as stored (a
    /// byte replay's as bytes, in a quarter of the memory); the oldest is
    /// overwritten once full; an image restores every slot and one of
    /// another shape is refused.
    #[test]
    fn sequences_round_trip_through_slots_and_images() {
        round_trip(false);
        round_trip(true);
        let (f, b) = (
            SequenceReplay::new(8, 100, 4, 5, false),
            SequenceReplay::new(8, 100, 4, 5, true),
        );
        assert!(b.is_bytes() && !f.is_bytes());
        assert_eq!(f.memory_bytes() - b.memory_bytes(), 3 * 8 * 6 * 100);
    }

    fn round_trip(bytes: bool) {
        let mut r = SequenceReplay::new(3, 2, 4, 5, bytes);
        let mut kept = Vec::new();
        for (k, n) in [5, 1, 3, 4].into_iter().enumerate() {
            let (o, a, rw, st) = seq(n, 10.0 * k as f32);
            let s = Sequence {
                obs: Rows::Values(&o),
                actions: &a,
                rewards: &rw,
                state: &st,
                burn: (k % 2) as u32,
                terminated: k == 2,
            };
            let (burn, term) = (s.burn, s.terminated);
            let slot = r.push(&s);
            assert_eq!(slot, k % 3);
            kept.push((slot, o, a, rw, st, burn, term));
        }
        assert_eq!(r.len(), 3);
        let check = |r: &SequenceReplay| {
            for (slot, o, a, rw, st, burn, term) in &kept[1..] {
                let s = r.get(*slot);
                assert_eq!(&s.obs.values()[..], &o[..]);
                assert_eq!(matches!(s.obs, Rows::Bytes(_)), bytes);
                assert_eq!((s.actions, s.rewards, s.state), (&a[..], &rw[..], &st[..]));
                assert_eq!((s.burn, s.terminated), (*burn, *term));
            }
        };
        check(&r);
        let mut img = ReplayImage::default();
        r.image(&mut img);
        let mut back = SequenceReplay::new(3, 2, 4, 5, bytes);
        back.restore(&img).unwrap();
        check(&back);
        assert_eq!(back.push(&r.get(0)), 1, "the head comes back too");
        let mut other = SequenceReplay::new(3, 2, 4, 6, bytes);
        let e = other.restore(&img).unwrap_err();
        assert!(e.0.contains("max_steps"), "{e}");
        assert!(other.is_empty());
    }
}
