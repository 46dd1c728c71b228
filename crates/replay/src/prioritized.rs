//! Prioritized replay (Schaul et al.): a [`SumTree`] over the replay's
//! slots holding `priority^alpha`, proportional sampling by stratified
//! segments, importance-sampling weights, and priorities updated from the
//! learner's TD errors after each gradient step. New transitions get the
//! highest priority seen so far, so each is sampled at least once soon.

use rand::Rng;
use rlfleet_checkpoint::{Blob, ImageError, ReplayImage};

/// A binary tree whose leaves are slot priorities and whose inner nodes
/// hold the sums of their children: set and prefix-sum search in O(log n).
#[derive(Debug, Clone)]
pub struct SumTree {
    /// Leaves (a power of two >= the capacity).
    leaves: usize,
    /// `tree[1]` is the root; leaf `i` is `tree[leaves + i]`.
    tree: Vec<f64>,
}

impl SumTree {
    pub fn new(capacity: usize) -> SumTree {
        let leaves = capacity.max(1).next_power_of_two();
        SumTree {
            leaves,
            tree: vec![0.0; 2 * leaves],
        }
    }

    pub fn total(&self) -> f64 {
        self.tree[1]
    }

    pub fn get(&self, i: usize) -> f64 {
        self.tree[self.leaves + i]
    }

    pub fn set(&mut self, i: usize, value: f64) {
        let mut node = self.leaves + i;
        self.tree[node] = value;
        while node > 1 {
            node /= 2;
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1];
        }
    }

    /// Sets the first leaves to `values` (the rest 0) and every sum, in
    /// one pass.
    pub fn rebuild(&mut self, values: &[f64]) {
        self.tree.iter_mut().for_each(|v| *v = 0.0);
        self.tree[self.leaves..self.leaves + values.len()].copy_from_slice(values);
        for node in (1..self.leaves).rev() {
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1];
        }
    }

    /// The leaf where the running sum of leaves passes `mass` (in
    /// `[0, total)`).
    pub fn find(&self, mut mass: f64) -> usize {
        let mut node = 1;
        while node < self.leaves {
            let left = self.tree[2 * node];
            if mass < left || self.tree[2 * node + 1] <= 0.0 {
                node *= 2;
            } else {
                mass -= left;
                node = 2 * node + 1;
            }
        }
        node - self.leaves
    }
}

/// The prioritized sampling state beside a replay ring.
#[derive(Debug, Clone)]
pub struct Prioritized {
    tree: SumTree,
    alpha: f64,
    /// Largest priority (before `alpha`) seen.
    max_priority: f64,
}

impl Prioritized {
    pub fn new(capacity: usize, alpha: f64) -> Prioritized {
        Prioritized {
            tree: SumTree::new(capacity),
            alpha,
            max_priority: 1.0,
        }
    }

    /// The priorities of the first `len` slots and the largest seen, into
    /// `img`.
    pub fn image(&self, len: usize, img: &mut ReplayImage) {
        let leaves: Vec<f64> = (0..len).map(|i| self.tree.get(i)).collect();
        img.blobs.insert("priorities".into(), Blob::f64(&leaves));
        img.counters
            .insert("max_priority_bits".into(), self.max_priority.to_bits());
    }

    /// Puts back what [`Prioritized::image`] saved for `len` slots.
    pub fn restore(&mut self, img: &ReplayImage, len: usize) -> Result<(), ImageError> {
        let leaves = img.f64s("priorities", len)?;
        if len > self.tree.leaves {
            return Err(ImageError(format!("{len} priorities for a smaller tree")));
        }
        self.max_priority = f64::from_bits(img.counter("max_priority_bits")?);
        self.tree.rebuild(&leaves);
        Ok(())
    }

    /// A transition was written to `slot`.
    pub fn pushed(&mut self, slot: usize) {
        self.tree.set(slot, self.max_priority.powf(self.alpha));
    }

    /// `slot` holds a transition that must not be drawn yet.
    pub fn withhold(&mut self, slot: usize) {
        self.tree.set(slot, 0.0);
    }

    /// Draws `batch` slots (one per equal segment of the total priority)
    /// into `indices`, and their importance weights `(N P(i))^-beta`
    /// scaled by the largest of them into `weights`.
    pub fn sample<R: Rng>(
        &self,
        batch: usize,
        len: usize,
        beta: f64,
        rng: &mut R,
        indices: &mut Vec<usize>,
        weights: &mut Vec<f32>,
    ) {
        indices.clear();
        weights.clear();
        let total = self.tree.total();
        let segment = total / batch as f64;
        for k in 0..batch {
            let mass = (k as f64 + rng.random::<f64>()) * segment;
            let i = self.tree.find(mass.min(total * (1.0 - 1e-12))).min(len - 1);
            indices.push(i);
        }
        let w: Vec<f64> = indices
            .iter()
            .map(|&i| (len as f64 * self.tree.get(i).max(1e-12) / total).powf(-beta))
            .collect();
        let max = w.iter().copied().fold(0.0, f64::max);
        weights.extend(w.iter().map(|&x| (x / max) as f32));
    }

    /// New priorities `|td| + eps` for the sampled slots.
    pub fn update(&mut self, indices: &[usize], td_abs: &[f32], eps: f64) {
        for (&i, &td) in indices.iter().zip(td_abs) {
            let p = f64::from(td) + eps;
            self.max_priority = self.max_priority.max(p);
            self.tree.set(i, p.powf(self.alpha));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn sums_and_search_follow_the_leaves() {
        let mut t = SumTree::new(5);
        for (i, v) in [1.0, 2.0, 3.0, 4.0, 0.0].into_iter().enumerate() {
            t.set(i, v);
        }
        assert_eq!(t.total(), 10.0);
        assert_eq!(t.find(0.5), 0);
        assert_eq!(t.find(1.0), 1);
        assert_eq!(t.find(2.99), 1);
        assert_eq!(t.find(3.0), 2);
        assert_eq!(t.find(9.99), 3);
        t.set(3, 0.0);
        assert_eq!(t.total(), 6.0);
        assert_eq!(t.find(5.99), 2);
    }

    /// Sampling frequencies follow the priorities; weights favour rare
    /// slots; updates move the mass.
    #[test]
    fn sampling_is_proportional_to_priority() {
        let mut p = Prioritized::new(4, 1.0);
        for i in 0..4 {
            p.pushed(i);
        }
        p.update(&[0, 1, 2, 3], &[1.0, 1.0, 2.0, 4.0], 0.0);
        let mut rng = rand_pcg::Pcg64::seed_from_u64(1);
        let (mut idx, mut w) = (Vec::new(), Vec::new());
        let mut counts = [0usize; 4];
        for _ in 0..2_000 {
            p.sample(8, 4, 1.0, &mut rng, &mut idx, &mut w);
            for &i in &idx {
                counts[i] += 1;
            }
        }
        // Expected shares 1/8, 1/8, 2/8, 4/8 of 16,000 draws.
        for (c, e) in counts.iter().zip([2000.0, 2000.0, 4000.0, 8000.0]) {
            assert!((*c as f64 - e).abs() < 0.05 * e, "{counts:?}");
        }
        p.sample(8, 4, 1.0, &mut rng, &mut idx, &mut w);
        for (&i, &wi) in idx.iter().zip(&w) {
            let expected = [1.0, 1.0, 0.5, 0.25][i];
            assert!((wi - expected).abs() < 1e-6, "{i} {wi}");
        }
    }
}
