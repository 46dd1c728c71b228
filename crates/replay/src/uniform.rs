//! [`UniformReplay`]: a preallocated ring of transitions with uniform
//! sampling.

use crate::obs_store::{ObsStore, ObsValue};
use rand::Rng;
use rlfleet_checkpoint::{Blob, ImageError, ReplayImage};

/// One transition as pushed by a workflow. Discrete actions are stored as
/// their index in `action[0]` (exact in f32 below 2^24). Observations are
/// values, or (`Transition<'_, u8>`) a uint8 env's bytes.
#[derive(Debug, Clone, Copy)]
pub struct Transition<'a, T = f32> {
    pub obs: &'a [T],
    pub action: &'a [f32],
    pub reward: f32,
    pub next_obs: &'a [T],
    /// True only for a terminal MDP state: truncation still bootstraps.
    pub terminated: bool,
    /// The episode it belongs to (on-policy agents assemble trajectories).
    pub episode: u64,
    /// Its index within its episode's play (0: the first step). The run
    /// gives an agent each episode's steps in order, one after the other;
    /// where it cannot (a batch lost on the way), it ends the episode's
    /// trajectory at the agent first, so a step that does not follow the
    /// last one given starts a new trajectory.
    pub step: u32,
    /// The log-probability of `action` under the weights that chose it (a
    /// density for a continuous action), where the actor said: the
    /// behaviour policy PPO's ratio and IMPALA's V-trace weigh it by.
    pub logp: Option<f32>,
}

impl<'a, T> Transition<'a, T> {
    /// The same step with other observations (values for bytes, or the
    /// other way).
    pub fn with_obs<'b, U>(&self, obs: &'b [U], next_obs: &'b [U]) -> Transition<'b, U>
    where
        'a: 'b,
    {
        Transition {
            obs,
            next_obs,
            action: self.action,
            reward: self.reward,
            terminated: self.terminated,
            episode: self.episode,
            step: self.step,
            logp: self.logp,
        }
    }
}

impl Transition<'_, u8> {
    /// The observation and next observation as values.
    pub fn widened(&self) -> (Vec<f32>, Vec<f32>) {
        let widen = |b: &[u8]| b.iter().map(|&x| f32::from(x)).collect();
        (widen(self.obs), widen(self.next_obs))
    }
}

/// A ring buffer with all storage allocated up front.
#[derive(Debug)]
pub struct UniformReplay {
    capacity: usize,
    obs_dim: usize,
    act_dim: usize,
    obs: ObsStore,
    next_obs: ObsStore,
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
/// tensor with a single copy. A replay that keeps bytes hands its
/// observations over as bytes: `[obs | next_obs]` in `obs_bytes`, and
/// `data` without them (their parts empty), so they reach the device as
/// the env made them.
#[derive(Debug, Default)]
pub struct SampledBatch {
    pub data: Vec<f32>,
    /// The observations and next observations, when `bytes`.
    pub obs_bytes: Vec<u8>,
    pub bytes: bool,
    /// The replay slots the rows came from.
    pub indices: Vec<usize>,
    pub batch: usize,
    pub obs_dim: usize,
    pub act_dim: usize,
}

impl SampledBatch {
    /// Offsets of the five parts in `data` (the first two empty when
    /// `bytes`).
    pub fn offsets(&self) -> [usize; 5] {
        let b = self.batch;
        let o = if self.bytes { 0 } else { b * self.obs_dim };
        [
            0,
            o,
            2 * o,
            2 * o + b * self.act_dim,
            2 * o + b * self.act_dim + b,
        ]
    }

    /// Sizes the batch for `batch` rows: `data` for what it carries, and
    /// `obs_bytes` when the observations travel as bytes.
    pub fn shape(&mut self, batch: usize, obs_dim: usize, act_dim: usize, bytes: bool) {
        (self.batch, self.obs_dim, self.act_dim, self.bytes) = (batch, obs_dim, act_dim, bytes);
        let obs = 2 * batch * obs_dim;
        self.data
            .resize(if bytes { 0 } else { obs } + batch * (act_dim + 2), 0.0);
        self.obs_bytes.resize(if bytes { obs } else { 0 }, 0);
    }

    /// Row `k`'s observation (`next`: its next observation) as values,
    /// whichever way it is held.
    pub fn obs_row(&self, k: usize, next: bool) -> Vec<f32> {
        let od = self.obs_dim;
        let at = (usize::from(next) * self.batch + k) * od;
        if self.bytes {
            self.obs_bytes[at..at + od]
                .iter()
                .map(|&x| f32::from(x))
                .collect()
        } else {
            self.data[at..at + od].to_vec()
        }
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
            next_obs: ObsStore::new(capacity * obs_dim, u8_obs),
            actions: vec![0.0; capacity * act_dim],
            rewards: vec![0.0; capacity],
            discounts: vec![0.0; capacity],
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
    /// Observations are written as they come (bytes stay bytes).
    pub fn push<T: ObsValue>(&mut self, t: &Transition<'_, T>, discount: f32) -> usize {
        debug_assert_eq!(t.obs.len(), self.obs_dim);
        debug_assert_eq!(t.next_obs.len(), self.obs_dim);
        debug_assert_eq!(t.action.len(), self.act_dim);
        let i = self.head;
        let (od, ad) = (self.obs_dim, self.act_dim);
        self.obs.write(i * od, t.obs);
        self.next_obs.write(i * od, t.next_obs);
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
            ("next_obs", self.next_obs.image(n * od)),
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
        let (n, head) = img.ring(&[
            ("capacity", self.capacity),
            ("obs_dim", self.obs_dim),
            ("act_dim", self.act_dim),
        ])?;
        let (od, ad) = (self.obs_dim, self.act_dim);
        // Read everything before writing anything.
        let actions = img.f32s("actions", n * ad)?;
        let rewards = img.f32s("rewards", n)?;
        let discounts = img.f32s("discounts", n)?;
        let u8_obs = matches!(self.obs, ObsStore::U8(_));
        let mut obs = ObsStore::new(self.capacity * od, u8_obs);
        let mut next_obs = ObsStore::new(self.capacity * od, u8_obs);
        obs.restore(img, "obs", n * od)?;
        next_obs.restore(img, "next_obs", n * od)?;
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
        let bytes = self.obs.is_bytes();
        out.shape(batch, od, ad, bytes);
        let [_, _, o_act, o_rew, o_disc] = out.offsets();
        for k in 0..batch {
            let i = out.indices[k];
            let (row, next) = (k * od..(k + 1) * od, (batch + k) * od..(batch + k + 1) * od);
            if bytes {
                self.obs.read_bytes(i * od, &mut out.obs_bytes[row]);
                self.next_obs.read_bytes(i * od, &mut out.obs_bytes[next]);
            } else {
                self.obs.read(i * od, &mut out.data[row]);
                self.next_obs.read(i * od, &mut out.data[next]);
            }
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
                step: 0,
                obs: &[v, v],
                action: &[v],
                reward: v,
                next_obs: &[v + 0.5, v + 0.5],
                terminated: v >= 3.0,
                logp: None,
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
}
