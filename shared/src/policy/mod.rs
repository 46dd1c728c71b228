//! [`QPolicy`]: epsilon-greedy actions from the learner's Q-network weights
//! — or, for a policy network (`sample`), actions drawn from the softmax of
//! its logits — computed in plain Rust: what actors act with (no libtorch there), and
//! what the learner's SEED inference front answers with. [`ContinuousPolicy`]
//! does the same for actions in a box.

mod actor;
mod continuous;

pub use actor::ActorPolicy;
pub use continuous::{
    ContinuousHead, ContinuousPolicy, LOG_STD_MAX, LOG_STD_MIN, continuous_head, standard_normal,
};

use crate::nets::{Forward, NetCopy, NetShape, Rows, argmax};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

#[derive(Debug)]
pub struct QPolicy {
    net: Box<dyn Forward>,
    pub version: u64,
    pub epsilon: f32,
    /// The network gives logits: sample from their softmax (`epsilon` is
    /// not used).
    pub sample: bool,
    /// The network's first output is a state value and the rest are
    /// advantages (a dueling head): the greedy action is the best
    /// advantage.
    dueling: bool,
    rng: Pcg64,
}

impl QPolicy {
    /// An MLP policy over `obs_dim` values.
    pub fn new(obs_dim: usize, hidden: &[u32], n_actions: usize, seed: u64) -> QPolicy {
        QPolicy::from_shape(NetShape::new(obs_dim, hidden, n_actions), seed)
    }

    /// A policy over the network `shape` (one output per action).
    pub fn from_shape(shape: NetShape, seed: u64) -> QPolicy {
        QPolicy {
            net: Box::new(NetCopy::new(shape)),
            version: 0,
            epsilon: 1.0,
            sample: false,
            dueling: false,
            rng: Pcg64::seed_from_u64(seed),
        }
    }

    /// The same policy over a dueling Q-network (one more output: the
    /// state value first).
    pub fn dueling(self, dueling: bool) -> QPolicy {
        if !dueling || self.dueling {
            return self;
        }
        let net = self.net.net();
        let shape = net.with_output(net.output_dim() + 1);
        QPolicy {
            net: Box::new(NetCopy::new(shape)),
            dueling: true,
            ..self
        }
    }

    /// The network this policy runs (to build another backend for it).
    pub fn net(&self) -> &NetShape {
        self.net.net()
    }

    /// Runs the network with `forward` instead (for example ONNX Runtime);
    /// refuses one for another network. Weights must be loaded again.
    pub fn with_forward(self, forward: Box<dyn Forward>) -> Result<QPolicy, String> {
        self.net.net().check_backend(forward.net())?;
        Ok(QPolicy {
            net: forward,
            ..self
        })
    }

    /// Parameters the network takes.
    pub fn numel(&self) -> usize {
        self.net.net().numel()
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

    /// Epsilon-greedy (or sampled) actions for `n` observations (one index
    /// each).
    pub fn act(&mut self, obs: &[f32], n: usize, actions: &mut Vec<f32>) {
        self.act_rows(Rows::Values(obs), n, actions);
    }

    /// [`QPolicy::act`] for rows held either way.
    pub fn act_rows(&mut self, obs: Rows<'_>, n: usize, actions: &mut Vec<f32>) {
        actions.clear();
        let width = self.net.net().output_dim();
        let skip = usize::from(self.dueling);
        let k = width - skip;
        let q: &[f32] = if self.net.loaded() {
            self.net.forward_rows(obs, n)
        } else {
            &[]
        };
        for i in 0..n {
            let a = if q.is_empty() {
                self.rng.random_range(0..k)
            } else if self.sample {
                sample_softmax(&q[i * width..(i + 1) * width], self.rng.random::<f32>())
            } else if self.rng.random::<f32>() < self.epsilon {
                self.rng.random_range(0..k)
            } else {
                // Q = V + A - mean(A): the best action has the best A.
                argmax(&q[i * width + skip..(i + 1) * width])
            };
            actions.push(a as f32);
        }
    }
}

/// The index whose cumulative softmax probability first exceeds `u` in
/// [0, 1).
pub fn sample_softmax(logits: &[f32], u: f32) -> usize {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let total: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    let mut acc = 0.0;
    for (i, &l) in logits.iter().enumerate() {
        acc += (l - max).exp() / total;
        if u < acc {
            return i;
        }
    }
    logits.len() - 1
}

#[cfg(test)]
mod tests {
    use super::sample_softmax;

    #[test]
    fn softmax_sampling_follows_the_probabilities() {
        // ln 3: probabilities 1/4 and 3/4.
        let logits = [0.0, 3f32.ln()];
        let n = 10_000;
        let ones = (0..n)
            .filter(|i| sample_softmax(&logits, (*i as f32 + 0.5) / n as f32) == 1)
            .count();
        assert_eq!(ones, 7_500);
        assert_eq!(sample_softmax(&[5.0, -50.0, 1.0], 0.999_999), 2);
        assert_eq!(sample_softmax(&[5.0, -50.0, 1.0], 0.0), 0);
    }
}
