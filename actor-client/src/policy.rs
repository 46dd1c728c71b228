//! [`QPolicy`]: epsilon-greedy actions from the learner's Q-network weights,
//! computed in plain Rust (no libtorch on actors).

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rlfleet_shared::nets::{CpuMlp, argmax};
use rlfleet_shared::wire::WeightsMsg;

#[derive(Debug)]
pub struct QPolicy {
    net: CpuMlp,
    params: Vec<f32>,
    pub version: u64,
    pub epsilon: f32,
    rng: Pcg64,
    out: Vec<f32>,
    scratch: Vec<f32>,
}

impl QPolicy {
    pub fn new(obs_dim: usize, hidden: &[u32], n_actions: usize, seed: u64) -> QPolicy {
        QPolicy {
            net: CpuMlp::new(obs_dim, hidden, n_actions),
            params: Vec::new(),
            version: 0,
            epsilon: 1.0,
            rng: Pcg64::seed_from_u64(seed),
            out: Vec::new(),
            scratch: Vec::new(),
        }
    }

    pub fn load(&mut self, w: &WeightsMsg) -> anyhow::Result<()> {
        anyhow::ensure!(
            w.data.len() == self.net.numel(),
            "weights have {} values, the network has {}",
            w.data.len(),
            self.net.numel()
        );
        self.params.clone_from(&w.data);
        self.version = w.version;
        Ok(())
    }

    /// Epsilon-greedy actions for `n` observations (one index each).
    pub fn act(&mut self, obs: &[f32], n: usize, actions: &mut Vec<f32>) {
        actions.clear();
        let k = self.net.output_dim();
        let have_weights = !self.params.is_empty();
        if have_weights {
            self.net
                .forward(&self.params, obs, n, &mut self.out, &mut self.scratch);
        }
        for i in 0..n {
            let a = if !have_weights || self.rng.random::<f32>() < self.epsilon {
                self.rng.random_range(0..k)
            } else {
                argmax(&self.out[i * k..(i + 1) * k])
            };
            actions.push(a as f32);
        }
    }
}
