//! [`UniformReplay`]: a preallocated ring of transitions with uniform
//! sampling.

use super::image::{Blob, ImageError, ReplayImage};
use super::{NextObs, ObsStore};
use rand::Rng;

/// One transition as pushed by a workflow. Discrete actions are stored as
/// their index in `action[0]` (exact in f32 below 2^24).
#[derive(Debug, Clone, Copy)]
pub struct Transition<'a> {
    pub obs: &'a [f32],
    pub action: &'a [f32],
    pub reward: f32,
    pub next_obs: &'a [f32],
    /// True only for a terminal MDP state: truncation still bootstraps.
    pub terminated: bool,
    /// The episode it belongs to (on-policy agents assemble trajectories).
    pub episode: u64,
}

/// A ring buffer with all storage allocated up front.
#[derive(Debug)]
pub struct UniformReplay {
    capacity: usize,
    obs_dim: usize,
    act_dim: usize,
    obs: ObsStore,
    next_obs: NextObs,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    /// Per transition, what multiplies the value of `next_obs` in its
    /// target: `gamma^k` for a k-step return, 0 at a terminal state.
    discounts: Vec<f32>,
    /// Next slot to write.
    head: usize,
    len: usize,
    /// Transitions ever pushed (counts overwritten ones too).
    pushed: u64,
}

/// A sampled batch laid out as one contiguous buffer
/// `[obs | next_obs | actions | rewards | discounts]`, so that it becomes a
/// tensor with a single copy.
#[derive(Debug, Default)]
pub struct SampledBatch {
    pub data: Vec<f32>,
    /// The replay slots the rows came from.
    pub indices: Vec<usize>,
    pub batch: usize,
    pub obs_dim: usize,
    pub act_dim: usize,
}

impl SampledBatch {
    /// Offsets of the five parts in `data`.
    pub fn offsets(&self) -> [usize; 5] {
        let b = self.batch;
        let o = b * self.obs_dim;
        [
            0,
            o,
            2 * o,
            2 * o + b * self.act_dim,
            2 * o + b * self.act_dim + b,
        ]
    }
}

impl UniformReplay {
    pub fn new(capacity: usize, obs_dim: usize, act_dim: usize) -> Self {
        Self::with_obs(capacity, obs_dim, act_dim, false)
    }

    /// A ring whose observations are stored as uint8 (`u8_obs`: the env's
    /// observations are uint8 images), else as f32.
    pub fn with_obs(capacity: usize, obs_dim: usize, act_dim: usize, u8_obs: bool) -> Self {
        assert!(capacity > 0, "replay capacity must be positive");
        UniformReplay {
            capacity,
            obs_dim,
            act_dim,
            obs: ObsStore::new(capacity * obs_dim, u8_obs),
            next_obs: NextObs::new(capacity, obs_dim, u8_obs, None),
            actions: vec![0.0; capacity * act_dim],
            rewards: vec![0.0; capacity],
            discounts: vec![0.0; capacity],
            head: 0,
            len: 0,
            pushed: 0,
        }
    }

    /// Observations that are stacks of uint8 frames of `frame` values each,
    /// whose next observation moves the stack on by one frame: each slot
    /// keeps only its next observation's newest frame (`NextObs`).
    pub fn stacked(mut self, frame: Option<usize>) -> Self {
        let u8_obs = matches!(self.obs, ObsStore::U8(_));
        self.next_obs = NextObs::new(self.capacity, self.obs_dim, u8_obs, frame);
        self
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes the ring holds (allocated up front): observations at their
    /// stored width, actions, rewards and discounts as f32.
    pub fn memory_bytes(&self) -> usize {
        self.obs.bytes() + self.next_obs.bytes() + 4 * (self.actions.len() + 2 * self.capacity)
    }

    /// Transitions ever pushed, including those since overwritten.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Stores a transition whose target bootstraps from `next_obs` with
    /// weight `discount` (`gamma` for a one-step transition, 0 when it
    /// ends in a terminal state), overwriting the oldest when full; returns
    /// the slot it went to.
    pub fn push(&mut self, t: &Transition<'_>, discount: f32) -> usize {
        debug_assert_eq!(t.obs.len(), self.obs_dim);
        debug_assert_eq!(t.next_obs.len(), self.obs_dim);
        debug_assert_eq!(t.action.len(), self.act_dim);
        let i = self.head;
        let (od, ad) = (self.obs_dim, self.act_dim);
        self.obs.write(i * od, t.obs);
        self.next_obs.write(i, t.obs, t.next_obs);
        self.actions[i * ad..(i + 1) * ad].copy_from_slice(t.action);
        self.rewards[i] = t.reward;
        self.discounts[i] = if t.terminated { 0.0 } else { discount };
        self.head = (self.head + 1) % self.capacity;
        self.len = (self.len + 1).min(self.capacity);
        self.pushed += 1;
        i
    }

    /// The live transitions (slots below `len()`) and the ring's position,
    /// into `img`.
    pub fn image(&self, img: &mut ReplayImage) {
        let (n, od, ad) = (self.len, self.obs_dim, self.act_dim);
        let blobs = [
            ("obs", self.obs.image(n * od)),
            ("next_obs", self.next_obs.image(n, od, &self.obs)),
            ("actions", Blob::f32(&self.actions[..n * ad])),
            ("rewards", Blob::f32(&self.rewards[..n])),
            ("discounts", Blob::f32(&self.discounts[..n])),
        ];
        for (name, b) in blobs {
            img.blobs.insert(name.to_string(), b);
        }
        for (name, v) in [
            ("capacity", self.capacity as u64),
            ("obs_dim", od as u64),
            ("act_dim", ad as u64),
            ("head", self.head as u64),
            ("len", n as u64),
            ("pushed", self.pushed),
        ] {
            img.counters.insert(name.to_string(), v);
        }
    }

    /// Puts back what [`UniformReplay::image`] saved; a ring of another
    /// size or shape is refused and left as it was.
    pub fn restore(&mut self, img: &ReplayImage) -> Result<(), ImageError> {
        for (name, want) in [
            ("capacity", self.capacity),
            ("obs_dim", self.obs_dim),
            ("act_dim", self.act_dim),
        ] {
            let got = img.counter(name)?;
            if got != want as u64 {
                return Err(ImageError(format!(
                    "its replay's {name} is {got}, this run's is {want}"
                )));
            }
        }
        let (n, head) = (img.counter("len")? as usize, img.counter("head")? as usize);
        if n > self.capacity || head >= self.capacity || (n < self.capacity && head != n) {
            return Err(ImageError(format!(
                "len {n} and head {head} do not fit a ring of {}",
                self.capacity
            )));
        }
        let (od, ad) = (self.obs_dim, self.act_dim);
        // Read everything before writing anything.
        let actions = img.f32s("actions", n * ad)?;
        let rewards = img.f32s("rewards", n)?;
        let discounts = img.f32s("discounts", n)?;
        let mut obs = ObsStore::new(self.capacity * od, matches!(self.obs, ObsStore::U8(_)));
        let mut next_obs = self.next_obs.empty_like(self.capacity, od);
        obs.restore(img, "obs", n * od)?;
        next_obs.restore(img, n, od, &obs)?;
        self.obs = obs;
        self.next_obs = next_obs;
        self.actions[..n * ad].copy_from_slice(&actions);
        self.rewards[..n].copy_from_slice(&rewards);
        self.discounts[..n].copy_from_slice(&discounts);
        self.len = n;
        self.head = head;
        self.pushed = img.counter("pushed")?;
        Ok(())
    }

    /// Samples `batch` transitions uniformly with replacement into `out`.
    pub fn sample_into<R: Rng>(&self, batch: usize, rng: &mut R, out: &mut SampledBatch) {
        assert!(self.len > 0, "cannot sample from an empty replay");
        out.indices.clear();
        out.indices
            .extend((0..batch).map(|_| rng.random_range(0..self.len)));
        self.gather_into(out);
    }

    /// Copies the transitions at `out.indices` (slots below `len()`) into
    /// `out`.
    pub fn gather_into(&self, out: &mut SampledBatch) {
        let (od, ad) = (self.obs_dim, self.act_dim);
        let batch = out.indices.len();
        out.batch = batch;
        out.obs_dim = od;
        out.act_dim = ad;
        out.data.resize(batch * (2 * od + ad + 2), 0.0);
        let [o_obs, o_next, o_act, o_rew, o_disc] = out.offsets();
        for k in 0..batch {
            let i = out.indices[k];
            self.obs
                .read(i * od, &mut out.data[o_obs + k * od..o_obs + (k + 1) * od]);
            self.next_obs.read(
                i,
                &self.obs,
                &mut out.data[o_next + k * od..o_next + (k + 1) * od],
            );
            out.data[o_act + k * ad..o_act + (k + 1) * ad]
                .copy_from_slice(&self.actions[i * ad..(i + 1) * ad]);
            out.data[o_rew + k] = self.rewards[i];
            out.data[o_disc + k] = self.discounts[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn push(r: &mut UniformReplay, v: f32) {
        r.push(
            &Transition {
                episode: 0,
                obs: &[v, v],
                action: &[v],
                reward: v,
                next_obs: &[v + 0.5, v + 0.5],
                terminated: v >= 3.0,
            },
            0.5,
        );
    }

    #[test]
    fn ring_overwrites_oldest_and_samples_only_live_transitions() {
        let mut r = UniformReplay::new(3, 2, 1);
        for v in 0..5 {
            push(&mut r, v as f32);
        }
        assert_eq!((r.len(), r.pushed()), (3, 5));
        let mut rng = rand_pcg::Pcg64::seed_from_u64(1);
        let mut b = SampledBatch::default();
        r.sample_into(200, &mut rng, &mut b);
        let [o_obs, o_next, o_act, o_rew, o_term] = b.offsets();
        let mut seen = std::collections::BTreeSet::new();
        for k in 0..200 {
            let v = b.data[o_rew + k];
            assert!(
                (2.0..=4.0).contains(&v),
                "sampled overwritten transition {v}"
            );
            assert_eq!(b.data[o_obs + 2 * k], v);
            assert_eq!(b.data[o_next + 2 * k + 1], v + 0.5);
            assert_eq!(b.data[o_act + k], v);
            assert_eq!(b.data[o_term + k], if v >= 3.0 { 0.0 } else { 0.5 });
            seen.insert(v as i32);
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![2, 3, 4]);
    }

    /// Pushes the same transitions into a ring of rows and a stacked ring
    /// (frames of 3 bytes, 4 to a stack); returns both.
    fn stacked_pair(capacity: usize) -> (UniformReplay, UniformReplay) {
        let mut rows = UniformReplay::with_obs(capacity, 12, 1, true);
        let mut stacked = UniformReplay::with_obs(capacity, 12, 1, true).stacked(Some(3));
        let frame =
            |t: usize| -> Vec<f32> { (0..3).map(|j| ((t * 7 + j * 3) % 256) as f32).collect() };
        let stack = |t: usize| -> Vec<f32> { (0..4).flat_map(|k| frame(t + k)).collect() };
        for t in 0..capacity + 4 {
            // Every third next observation is not a shift (an env that
            // rebuilt its stack): it is kept whole.
            let next = if t % 3 == 2 {
                stack(t + 50)
            } else {
                stack(t + 1)
            };
            let tr = Transition {
                episode: 0,
                obs: &stack(t),
                action: &[t as f32],
                reward: t as f32,
                next_obs: &next,
                terminated: false,
            };
            rows.push(&tr, 0.9);
            stacked.push(&tr, 0.9);
        }
        (rows, stacked)
    }

    fn everything(r: &UniformReplay) -> Vec<f32> {
        let mut b = SampledBatch {
            indices: (0..r.len()).collect(),
            ..SampledBatch::default()
        };
        r.gather_into(&mut b);
        b.data
    }

    #[test]
    fn a_stacked_ring_keeps_one_new_frame_per_next_observation_and_gives_back_every_value() {
        let (rows, stacked) = stacked_pair(5);
        assert_eq!(everything(&stacked), everything(&rows));
        // Per slot 12 bytes of observation and 3 of newest frame; 2 of the 5
        // live slots (t = 5, 8) keep their 12-byte next observation whole
        // (t = 2's whole row went with its slot, to t = 7).
        let scalars = 4 * (5 + 2 * 5);
        assert_eq!(rows.memory_bytes(), 5 * 24 + scalars);
        assert_eq!(stacked.memory_bytes(), 5 * (12 + 3) + 2 * 12 + scalars);

        // A checkpoint keeps whole rows: it restores into either kind.
        let mut img = ReplayImage::default();
        stacked.image(&mut img);
        let mut back = UniformReplay::with_obs(5, 12, 1, true).stacked(Some(3));
        back.restore(&img).unwrap();
        assert_eq!(everything(&back), everything(&rows));
        assert_eq!(back.memory_bytes(), stacked.memory_bytes());
        let mut as_rows = UniformReplay::with_obs(5, 12, 1, true);
        as_rows.restore(&img).unwrap();
        assert_eq!(everything(&as_rows), everything(&rows));
    }
}
