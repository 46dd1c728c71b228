//! A [`FrameChains`] in a checkpoint: its slots as they are (one frame
//! each), its links and the frames kept beside chain ends — so a resumed
//! replay keeps each frame once too. Open episodes are not saved: a resumed
//! run plays them again from their start, so every chain ends where it is.

use super::{FrameChains, NONE};
use rlfleet_checkpoint::{Blob, BlobType, ImageError, ReplayImage};
use std::collections::HashMap;

/// Slot numbers as f64 (exact below 2^53), `NONE` as -1.
fn links(v: &[u32]) -> Blob {
    Blob::f64(
        &v.iter()
            .map(|&x| if x == NONE { -1.0 } else { f64::from(x) })
            .collect::<Vec<_>>(),
    )
}

fn unlink(v: Vec<f64>, capacity: usize) -> Result<Vec<u32>, ImageError> {
    v.into_iter()
        .map(|x| {
            if x == -1.0 {
                Ok(NONE)
            } else if x >= 0.0 && x < capacity as f64 && x.fract() == 0.0 {
                Ok(x as u32)
            } else {
                Err(ImageError(format!("a chain link {x} outside the ring")))
            }
        })
        .collect()
}

/// A side map as its slots and its rows, concatenated.
fn side(m: &HashMap<u32, Vec<u8>>) -> (Blob, Blob) {
    let mut keys: Vec<u32> = m.keys().copied().collect();
    keys.sort_unstable();
    let rows: Vec<u8> = keys.iter().flat_map(|k| m[k].iter().copied()).collect();
    let keys: Vec<f64> = keys.into_iter().map(f64::from).collect();
    (Blob::f64(&keys), Blob::u8(&rows))
}

impl FrameChains {
    /// The ring and everything beside it, into `img`.
    pub fn image(&self, img: &mut ReplayImage) {
        let (n, f, ad) = (self.len, self.frame, self.act_dim);
        let (base_keys, bases) = side(&self.bases);
        let (tail_keys, tails) = side(&self.tails);
        let (whole_keys, whole) = side(&self.whole);
        let episodes: Vec<u8> = self.episodes[..n]
            .iter()
            .flat_map(|e| e.to_le_bytes())
            .collect();
        let blobs = [
            ("chain.frames", Blob::u8(&self.frames[..n * f])),
            ("actions", Blob::f32(&self.actions[..n * ad])),
            ("rewards", Blob::f32(&self.rewards[..n])),
            ("chain.ends", Blob::u8(&self.ends[..n])),
            ("chain.episodes", Blob::u8(&episodes)),
            ("chain.prev", links(&self.prev[..n])),
            ("chain.next", links(&self.next[..n])),
            ("chain.base_slots", base_keys),
            ("chain.bases", bases),
            ("chain.tail_slots", tail_keys),
            ("chain.tails", tails),
            ("chain.whole_slots", whole_keys),
            ("chain.whole", whole),
        ];
        for (name, b) in blobs {
            img.blobs.insert(name.to_string(), b);
        }
        for (name, v) in [
            ("capacity", self.capacity as u64),
            ("obs_dim", (self.k * f) as u64),
            ("frame", f as u64),
            ("act_dim", ad as u64),
            ("n_step", self.n as u64),
            ("head", self.head as u64),
            ("len", n as u64),
            ("pushed", self.pushed),
        ] {
            img.counters.insert(name.to_string(), v);
        }
    }

    /// Puts back what [`FrameChains::image`] saved; an image of another
    /// ring (size, shape, n, or a replay that kept rows) is refused and the
    /// replay left as it was.
    pub fn restore(&mut self, img: &ReplayImage) -> Result<(), ImageError> {
        if !img.blobs.contains_key("chain.frames") {
            return Err(ImageError(
                "its replay kept whole observations; this run's keeps each frame once \
                 (frame_stack): start the run afresh"
                    .into(),
            ));
        }
        let (n, head) = img.ring(&[
            ("capacity", self.capacity),
            ("obs_dim", self.k * self.frame),
            ("frame", self.frame),
            ("act_dim", self.act_dim),
            ("n_step", self.n),
        ])?;
        let (f, ad, cap) = (self.frame, self.act_dim, self.capacity);
        let frames = img.blob("chain.frames", BlobType::U8, n * f)?.to_vec();
        let actions = img.f32s("actions", n * ad)?;
        let rewards = img.f32s("rewards", n)?;
        let ends = img.blob("chain.ends", BlobType::U8, n)?.to_vec();
        let episodes: Vec<u64> = img
            .blob("chain.episodes", BlobType::U8, 8 * n)?
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        let prev = unlink(img.f64s("chain.prev", n)?, cap)?;
        let next = unlink(img.f64s("chain.next", n)?, cap)?;
        let mut sides = Vec::new();
        for (keys, rows, width) in [
            ("chain.base_slots", "chain.bases", (self.k - 1) * f),
            ("chain.tail_slots", "chain.tails", f),
            ("chain.whole_slots", "chain.whole", self.k * f),
        ] {
            let count = img.blobs.get(keys).map_or(0, |b| b.len());
            let slots = unlink(img.f64s(keys, count)?, cap)?;
            let data = img.blob(rows, BlobType::U8, count * width)?;
            sides.push(
                slots
                    .into_iter()
                    .zip(data.chunks_exact(width.max(1)))
                    .map(|(s, row)| (s, row.to_vec()))
                    .collect::<HashMap<u32, Vec<u8>>>(),
            );
        }
        let (bases, tails, whole) = (&sides[0], &sides[1], &sides[2]);
        for s in 0..n {
            let key = s as u32;
            let linked = |x: u32| x == NONE || (x as usize) < n;
            let bad = if !linked(prev[s]) || !linked(next[s]) {
                Some("links past the ring's length")
            } else if prev[s] == NONE && !bases.contains_key(&key) {
                Some("a chain's first step without its older frames")
            } else if next[s] == NONE && !tails.contains_key(&key) && !whole.contains_key(&key) {
                Some("a last step without its next frame")
            } else {
                None
            };
            if let Some(what) = bad {
                return Err(ImageError(format!("slot {s} of its replay has {what}")));
            }
        }
        self.frames[..n * f].copy_from_slice(&frames);
        self.actions[..n * ad].copy_from_slice(&actions);
        self.rewards[..n].copy_from_slice(&rewards);
        self.ends[..n].copy_from_slice(&ends);
        self.episodes[..n].copy_from_slice(&episodes);
        self.prev[..n].copy_from_slice(&prev);
        self.next[..n].copy_from_slice(&next);
        let whole = sides.pop().expect("three");
        self.tails = sides.pop().expect("three");
        self.bases = sides.pop().expect("three");
        self.whole = whole;
        self.open.clear();
        self.len = n;
        self.head = head;
        self.pushed = img.counter("pushed")?;
        self.complete = (0..n).filter(|&s| self.is_complete(s)).count();
        Ok(())
    }
}
