//! [`QPolicy`]: epsilon-greedy actions from the learner's Q-network weights,
//! computed in plain Rust: what actors act with (no libtorch there), and
//! what the learner's SEED inference front answers with.

use crate::nets::{CpuMlp, MlpCopy, argmax};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

#[derive(Debug)]
pub struct QPolicy {
    net: MlpCopy,
    pub version: u64,
    pub epsilon: f32,
    rng: Pcg64,
}

impl QPolicy {
    pub fn new(obs_dim: usize, hidden: &[u32], n_actions: usize, seed: u64) -> QPolicy {
        QPolicy {
            net: MlpCopy::new(CpuMlp::new(obs_dim, hidden, n_actions)),
            version: 0,
            epsilon: 1.0,
            rng: Pcg64::seed_from_u64(seed),
        }
    }

    /// Takes weights of `version`; refuses a wrong parameter count.
    pub fn load(&mut self, version: u64, data: &[f32]) -> Result<(), String> {
        self.net.load(data)?;
        self.version = version;
        Ok(())
    }

    pub fn has_weights(&self) -> bool {
        self.net.loaded()
    }

    /// Epsilon-greedy actions for `n` observations (one index each).
    pub fn act(&mut self, obs: &[f32], n: usize, actions: &mut Vec<f32>) {
        actions.clear();
        let k = self.net.net().output_dim();
        let q: &[f32] = if self.net.loaded() {
            self.net.forward(obs, n)
        } else {
            &[]
        };
        for i in 0..n {
            let a = if q.is_empty() || self.rng.random::<f32>() < self.epsilon {
                self.rng.random_range(0..k)
            } else {
                argmax(&q[i * k..(i + 1) * k])
            };
            actions.push(a as f32);
        }
    }
}
