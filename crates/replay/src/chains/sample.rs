//! Sampling from [`FrameChains`]: complete steps drawn uniformly, and any
//! given steps gathered into a batch with their stacks as bytes.

use super::FrameChains;
use crate::uniform::SampledBatch;
use rand::Rng;

impl FrameChains {
    /// Samples `batch` complete steps uniformly with replacement into
    /// `out` (a slot whose window is still open is drawn again).
    pub fn sample_into<R: Rng>(&self, batch: usize, rng: &mut R, out: &mut SampledBatch) {
        assert!(self.len > 0, "cannot sample from an empty replay");
        out.indices.clear();
        for _ in 0..batch {
            let mut i = rng.random_range(0..self.len);
            let mut tries = 0;
            while !self.is_complete(i) {
                tries += 1;
                i = if tries < 64 {
                    rng.random_range(0..self.len)
                } else {
                    (0..self.len)
                        .find(|&j| self.is_complete(j))
                        .expect("a complete step to sample")
                };
            }
            out.indices.push(i);
        }
        self.gather_into(out);
    }

    /// The steps at `out.indices` (complete slots) as transitions into
    /// `out`: stack and next stack n steps on (as bytes), action, return,
    /// discount.
    pub fn gather_into(&self, out: &mut SampledBatch) {
        let (od, ad) = (self.obs_dim(), self.act_dim);
        let batch = out.indices.len();
        out.shape(batch, od, ad, true);
        let [_, _, o_act, o_rew, o_disc] = out.offsets();
        for k in 0..batch {
            let i = out.indices[k];
            let (last, ret, discount) = self.window(i).expect("a complete step");
            self.obs_bytes(i, &mut out.obs_bytes[k * od..(k + 1) * od]);
            let next = (batch + k) * od;
            self.next_bytes(last, &mut out.obs_bytes[next..next + od]);
            out.data[o_act + k * ad..o_act + (k + 1) * ad]
                .copy_from_slice(&self.actions[i * ad..(i + 1) * ad]);
            out.data[o_rew + k] = ret;
            out.data[o_disc + k] = discount;
        }
    }
}
