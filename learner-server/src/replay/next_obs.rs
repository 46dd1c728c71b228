//! [`NextObs`]: a replay's next observations. Rows, as an [`ObsStore`]
//! keeps them; or, for a stack of uint8 frames whose next observation is
//! the same stack moved on by one frame (Gymnasium's `FrameStackObservation`
//! stacks along the first axis), only each slot's newest frame, the rest
//! read from the slot's own observation: a transition of a 4-frame stack
//! keeps 5 frames instead of 8. A next observation that is not such a shift
//! is kept whole beside them, so any stream of transitions comes back
//! exactly.

use super::ObsStore;
use super::image::{Blob, BlobType, ImageError, ReplayImage};
use std::collections::HashMap;

#[derive(Debug)]
pub enum NextObs {
    Rows(ObsStore),
    Shifted(Shifted),
}

#[derive(Debug)]
pub struct Shifted {
    /// Values in one frame, and in one observation (a whole number of
    /// frames).
    frame: usize,
    obs_dim: usize,
    /// Per slot, the newest frame of its next observation.
    newest: Vec<u8>,
    /// Slots whose next observation is not a shift of their observation.
    whole: HashMap<usize, Vec<u8>>,
}

impl NextObs {
    /// Room for `capacity` rows of `obs_dim` values. `frame`: the values in
    /// one frame of a uint8 stack of several (otherwise rows are kept).
    pub fn new(capacity: usize, obs_dim: usize, u8_obs: bool, frame: Option<usize>) -> NextObs {
        let stack = frame.filter(|&f| u8_obs && f > 0 && f < obs_dim && obs_dim.is_multiple_of(f));
        match stack {
            Some(frame) => NextObs::Shifted(Shifted {
                frame,
                obs_dim,
                newest: vec![0; capacity * frame],
                whole: HashMap::new(),
            }),
            None => NextObs::Rows(ObsStore::new(capacity * obs_dim, u8_obs)),
        }
    }

    /// The same kind of store, empty, for `capacity` rows.
    pub fn empty_like(&self, capacity: usize, obs_dim: usize) -> NextObs {
        match self {
            NextObs::Rows(s) => NextObs::Rows(ObsStore::new(
                capacity * obs_dim,
                matches!(s, ObsStore::U8(_)),
            )),
            NextObs::Shifted(s) => NextObs::new(capacity, obs_dim, true, Some(s.frame)),
        }
    }

    /// Stores `slot`'s next observation `next`, whose observation is `obs`.
    pub fn write(&mut self, slot: usize, obs: &[f32], next: &[f32]) {
        match self {
            NextObs::Rows(s) => s.write(slot * next.len(), next),
            NextObs::Shifted(s) => {
                let f = s.frame;
                let kept = s.obs_dim - f;
                if next[..kept] == obs[f..] {
                    let dst = &mut s.newest[slot * f..(slot + 1) * f];
                    for (d, &x) in dst.iter_mut().zip(&next[kept..]) {
                        *d = x as u8;
                    }
                    s.whole.remove(&slot);
                } else {
                    s.whole
                        .insert(slot, next.iter().map(|&x| x as u8).collect());
                }
            }
        }
    }

    /// `slot`'s next observation into `out`; `obs` holds the slot's
    /// observation.
    pub fn read(&self, slot: usize, obs: &ObsStore, out: &mut [f32]) {
        match self {
            NextObs::Rows(s) => s.read(slot * out.len(), out),
            NextObs::Shifted(s) => {
                let (f, od) = (s.frame, s.obs_dim);
                match s.whole.get(&slot) {
                    Some(row) => widen(row, out),
                    None => {
                        obs.read(slot * od + f, &mut out[..od - f]);
                        widen(&s.newest[slot * f..(slot + 1) * f], &mut out[od - f..]);
                    }
                }
            }
        }
    }

    /// Bytes held: the rows, or the newest frames and the whole rows kept.
    pub fn bytes(&self) -> usize {
        match self {
            NextObs::Rows(s) => s.bytes(),
            NextObs::Shifted(s) => s.newest.len() + s.whole.values().map(Vec::len).sum::<usize>(),
        }
    }

    /// The first `n` slots' next observations, whole (a checkpoint keeps
    /// rows whatever the store: `obs` holds the slots' observations).
    pub fn image(&self, n: usize, obs_dim: usize, obs: &ObsStore) -> Blob {
        match self {
            NextObs::Rows(s) => s.image(n * obs_dim),
            NextObs::Shifted(s) => {
                let mut row = vec![0f32; s.obs_dim];
                let mut bytes = Vec::with_capacity(n * s.obs_dim);
                for slot in 0..n {
                    self.read(slot, obs, &mut row);
                    bytes.extend(row.iter().map(|&x| x as u8));
                }
                Blob::u8(&bytes)
            }
        }
    }

    /// Puts back the first `n` slots from the image's `next_obs` rows;
    /// `obs` already holds the slots' observations.
    pub fn restore(
        &mut self,
        img: &ReplayImage,
        n: usize,
        obs_dim: usize,
        obs: &ObsStore,
    ) -> Result<(), ImageError> {
        match self {
            NextObs::Rows(s) => s.restore(img, "next_obs", n * obs_dim),
            NextObs::Shifted(_) => {
                let rows = img.blob("next_obs", BlobType::U8, n * obs_dim)?;
                let (mut o, mut next) = (vec![0f32; obs_dim], vec![0f32; obs_dim]);
                for (slot, row) in rows.chunks_exact(obs_dim).enumerate() {
                    obs.read(slot * obs_dim, &mut o);
                    widen(row, &mut next);
                    self.write(slot, &o, &next);
                }
                Ok(())
            }
        }
    }
}

fn widen(bytes: &[u8], out: &mut [f32]) {
    for (d, &x) in out.iter_mut().zip(bytes) {
        *d = f32::from(x);
    }
}
