//! [`ContinuousPolicy`]: actions in a box from a policy network's outputs,
//! in plain Rust, for the three heads rlfleet's continuous agents publish
//! (deterministic tanh for DDPG/TD3, squashed Gaussian for SAC, Gaussian
//! with a learned state-independent log std for PPO).

use crate::config::AgentKind;
use crate::nets::{Forward, NetCopy, NetShape, Rows};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// Bounds of a squashed Gaussian head's log standard deviation (the
/// learner clamps to the same).
pub const LOG_STD_MIN: f32 = -20.0;
pub const LOG_STD_MAX: f32 = 2.0;

/// How the network's outputs become an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContinuousHead {
    /// `dim` outputs; the action is `tanh(out)` scaled to the bounds.
    /// Exploring adds Gaussian noise of std `noise` (in units of half the
    /// range) before scaling, clipped to the box.
    Tanh,
    /// `2 * dim` outputs, mean then log std (clamped to
    /// [`LOG_STD_MIN`]..[`LOG_STD_MAX`]); the action is `tanh(mean + std·ε)`
    /// scaled to the bounds, or `tanh(mean)` when greedy.
    SquashedGaussian,
    /// `dim` outputs, the mean; the weights end with `dim` log stds. The
    /// action is `mean + std·ε` (not clipped: the environment clips, and
    /// the learner needs the sampled value), or the mean clipped to the
    /// bounds when greedy.
    Gaussian,
}

/// The head a continuous agent publishes.
pub fn continuous_head(agent: AgentKind) -> ContinuousHead {
    match agent {
        AgentKind::Sac => ContinuousHead::SquashedGaussian,
        AgentKind::Ppo => ContinuousHead::Gaussian,
        _ => ContinuousHead::Tanh,
    }
}

/// A continuous policy with its own copy of the weights.
#[derive(Debug)]
pub struct ContinuousPolicy {
    net: Box<dyn Forward>,
    head: ContinuousHead,
    dim: usize,
    low: Vec<f32>,
    high: Vec<f32>,
    /// The Gaussian head's log stds (from the weights' tail).
    log_std: Vec<f32>,
    /// Exploration noise of the tanh head.
    pub noise: f32,
    /// [`super::ActorPolicy::act`] explores (false: greedy actions, for
    /// evaluation).
    pub explore: bool,
    pub version: u64,
    rng: Pcg64,
}

impl ContinuousPolicy {
    /// A policy for actions in `[low, high]` (finite bounds).
    pub fn new(
        obs_dim: usize,
        hidden: &[u32],
        head: ContinuousHead,
        low: &[f32],
        high: &[f32],
        seed: u64,
    ) -> ContinuousPolicy {
        let dim = low.len();
        let outputs = match head {
            ContinuousHead::SquashedGaussian => 2 * dim,
            ContinuousHead::Tanh | ContinuousHead::Gaussian => dim,
        };
        ContinuousPolicy {
            net: Box::new(NetCopy::new(NetShape::new(obs_dim, hidden, outputs))),
            head,
            dim,
            low: low.to_vec(),
            high: high.to_vec(),
            log_std: Vec::new(),
            noise: 0.0,
            explore: true,
            version: 0,
            rng: Pcg64::seed_from_u64(seed),
        }
    }

    /// The same policy with the convolutional `torso` in front of its MLP.
    pub fn with_torso(self, torso: Option<crate::nets::ConvTorso>) -> ContinuousPolicy {
        let net = self.net.net();
        let hidden: Vec<u32> = net.sizes()[1..net.sizes().len() - 1]
            .iter()
            .map(|&h| h as u32)
            .collect();
        let shape = NetShape::with_torso(torso, net.obs_dim(), &hidden, net.output_dim());
        ContinuousPolicy {
            net: Box::new(NetCopy::new(shape)),
            ..self
        }
    }

    /// The network this policy runs (to build another backend for it).
    pub fn net(&self) -> &NetShape {
        self.net.net()
    }

    /// Runs the network with `forward` instead; refuses one for another
    /// network. Weights must be loaded again.
    pub fn with_forward(self, forward: Box<dyn Forward>) -> Result<ContinuousPolicy, String> {
        self.net.net().check_backend(forward.net())?;
        Ok(ContinuousPolicy {
            net: forward,
            ..self
        })
    }

    /// Parameters the weights hold (the network's, then the Gaussian
    /// head's log stds).
    pub fn numel(&self) -> usize {
        self.net.net().numel()
            + match self.head {
                ContinuousHead::Gaussian => self.dim,
                _ => 0,
            }
    }

    pub fn has_weights(&self) -> bool {
        self.net.loaded()
    }

    /// Takes weights of `version`; refuses a wrong parameter count.
    pub fn load(&mut self, version: u64, data: &[f32]) -> Result<(), String> {
        if data.len() != self.numel() {
            return Err(format!(
                "weights have {} values, the policy has {}",
                data.len(),
                self.numel()
            ));
        }
        let n = self.net.net().numel();
        self.net.load(&data[..n])?;
        self.log_std = data[n..].to_vec();
        self.version = version;
        Ok(())
    }

    /// Actions for `n` observations (`dim` values each): sampled or noisy
    /// when `explore`, greedy otherwise; uniform in the box before any
    /// weights were loaded.
    pub fn act(&mut self, obs: &[f32], n: usize, explore: bool, actions: &mut Vec<f32>) {
        self.act_rows(Rows::Values(obs), n, explore, actions);
    }

    /// [`ContinuousPolicy::act`] for rows held either way.
    pub fn act_rows(&mut self, obs: Rows<'_>, n: usize, explore: bool, actions: &mut Vec<f32>) {
        actions.clear();
        let d = self.dim;
        if !self.net.loaded() {
            for _ in 0..n {
                for j in 0..d {
                    let u: f32 = self.rng.random();
                    actions.push(self.low[j] + u * (self.high[j] - self.low[j]));
                }
            }
            return;
        }
        let out = self.net.forward_rows(obs, n);
        let width = out.len() / n.max(1);
        for i in 0..n {
            let row = &out[i * width..(i + 1) * width];
            for j in 0..d {
                let (lo, hi) = (self.low[j], self.high[j]);
                let scale = |t: f32| lo + (t + 1.0) * 0.5 * (hi - lo);
                let a = match self.head {
                    ContinuousHead::Tanh => {
                        let mut t = row[j].tanh();
                        if explore {
                            t = (t + self.noise * standard_normal(&mut self.rng)).clamp(-1.0, 1.0);
                        }
                        scale(t)
                    }
                    ContinuousHead::SquashedGaussian => {
                        let mut u = row[j];
                        if explore {
                            let log_std = row[d + j].clamp(LOG_STD_MIN, LOG_STD_MAX);
                            u += log_std.exp() * standard_normal(&mut self.rng);
                        }
                        scale(u.tanh())
                    }
                    ContinuousHead::Gaussian => {
                        if explore {
                            row[j] + self.log_std[j].exp() * standard_normal(&mut self.rng)
                        } else {
                            row[j].clamp(lo, hi)
                        }
                    }
                };
                actions.push(a);
            }
        }
    }
}

/// A standard normal draw (Box–Muller).
pub fn standard_normal<R: Rng>(rng: &mut R) -> f32 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1 -> 1 network with no hidden layer is `w·x + b`: each head's
    /// greedy action follows by hand, and exploration stays in the box
    /// where the head promises it.
    #[test]
    fn heads_map_outputs_to_the_box() {
        let (low, high) = ([-2.0f32], [2.0f32]);
        let mut tanh = ContinuousPolicy::new(1, &[], ContinuousHead::Tanh, &low, &high, 1);
        assert_eq!(tanh.numel(), 2);
        tanh.load(3, &[1.0, 0.5]).unwrap();
        let mut a = Vec::new();
        tanh.act(&[0.25], 1, false, &mut a);
        assert!((a[0] - 2.0 * 0.75f32.tanh()).abs() < 1e-6, "{a:?}");
        tanh.noise = 5.0;
        for _ in 0..100 {
            tanh.act(&[0.25], 1, true, &mut a);
            assert!((-2.0..=2.0).contains(&a[0]));
        }

        let mut sq =
            ContinuousPolicy::new(1, &[], ContinuousHead::SquashedGaussian, &low, &high, 1);
        assert_eq!(sq.numel(), 4);
        // mean = x, log std = 0.
        sq.load(1, &[1.0, 0.0, 0.0, 0.0]).unwrap();
        sq.act(&[0.5], 1, false, &mut a);
        assert!((a[0] - 2.0 * 0.5f32.tanh()).abs() < 1e-6);

        let mut g = ContinuousPolicy::new(1, &[], ContinuousHead::Gaussian, &low, &high, 1);
        assert_eq!(g.numel(), 3);
        assert_eq!(
            g.load(1, &[1.0, 0.0]).unwrap_err(),
            "weights have 2 values, the policy has 3"
        );
        g.load(1, &[1.0, 0.0, 0.0]).unwrap();
        g.act(&[5.0], 1, false, &mut a);
        assert_eq!(a, vec![2.0], "greedy Gaussian actions are clipped");
        // Sampled: mean 0.5, std 1 → sample mean and std close.
        let n = 20_000;
        let xs: Vec<f32> = (0..n)
            .map(|_| {
                g.act(&[0.5], 1, true, &mut a);
                a[0]
            })
            .collect();
        let mean = xs.iter().sum::<f32>() / n as f32;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / n as f32;
        assert!(
            (mean - 0.5).abs() < 0.03 && (var.sqrt() - 1.0).abs() < 0.03,
            "{mean} {var}"
        );
    }
}
