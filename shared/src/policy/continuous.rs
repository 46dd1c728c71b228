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
    /// The Gaussian head's log-density of each action it last sampled
    /// (empty for the other heads, and when greedy).
    logps: Vec<f32>,
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
            logps: Vec::new(),
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

    /// For the Gaussian head (PPO's) when exploring, the log-density of
    /// each action of the last call under the weights that sampled it
    /// (uniform in the box before any were loaded), one per row: the
    /// behaviour policy PPO's ratio needs. Empty otherwise.
    pub fn logps(&self) -> &[f32] {
        &self.logps
    }

    /// [`ContinuousPolicy::act`] for rows held either way.
    pub fn act_rows(&mut self, obs: Rows<'_>, n: usize, explore: bool, actions: &mut Vec<f32>) {
        actions.clear();
        self.logps.clear();
        let d = self.dim;
        let gives_logp = explore && self.head == ContinuousHead::Gaussian;
        if !self.net.loaded() {
            let volume: f32 = (0..d).map(|j| (self.high[j] - self.low[j]).ln()).sum();
            for _ in 0..n {
                for j in 0..d {
                    let u: f32 = self.rng.random();
                    actions.push(self.low[j] + u * (self.high[j] - self.low[j]));
                }
                if gives_logp {
                    self.logps.push(-volume);
                }
            }
            return;
        }
        let out = self.net.forward_rows(obs, n);
        let width = out.len() / n.max(1);
        for i in 0..n {
            let row = &out[i * width..(i + 1) * width];
            let mut logp = 0.0;
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
                            let z = standard_normal(&mut self.rng);
                            logp += -0.5 * z * z - self.log_std[j] - HALF_LOG_2PI;
                            row[j] + self.log_std[j].exp() * z
                        } else {
                            row[j].clamp(lo, hi)
                        }
                    }
                };
                actions.push(a);
            }
            if gives_logp {
                self.logps.push(logp);
            }
        }
    }
}

/// ln √(2π): the Gaussian log-density's constant.
const HALF_LOG_2PI: f32 = 0.918_938_5;

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

    /// The Gaussian head says the log-density of each action it sampled
    /// (uniform in the box before weights); greedy, and the other heads,
    /// say none.
    #[test]
    fn the_gaussian_head_says_the_log_density_of_its_samples() {
        let (low, high) = ([-2.0f32, 0.0], [2.0f32, 1.0]);
        let mut g = ContinuousPolicy::new(1, &[], ContinuousHead::Gaussian, &low, &high, 4);
        let mut a = Vec::new();
        g.act(&[0.5], 1, true, &mut a);
        assert!((g.logps()[0] + 4f32.ln()).abs() < 1e-6, "{:?}", g.logps());
        // Means x and -x, log stds 0.5 and -1.
        let (ls0, ls1) = (0.5f32, -1.0f32);
        g.load(1, &[1.0, -1.0, 0.0, 0.0, ls0, ls1]).unwrap();
        for _ in 0..10 {
            g.act(&[0.5, -0.25], 2, true, &mut a);
            for (i, x) in [0.5f32, -0.25].into_iter().enumerate() {
                let z0 = (a[2 * i] - x) / ls0.exp();
                let z1 = (a[2 * i + 1] + x) / ls1.exp();
                let want = -0.5 * (z0 * z0 + z1 * z1) - ls0 - ls1 - 2.0 * HALF_LOG_2PI;
                assert!((g.logps()[i] - want).abs() < 1e-4, "{:?} {want}", g.logps());
            }
        }
        g.act(&[0.5], 1, false, &mut a);
        assert!(g.logps().is_empty());
        let mut tanh = ContinuousPolicy::new(1, &[], ContinuousHead::Tanh, &low, &high, 1);
        tanh.act(&[0.5], 1, true, &mut a);
        assert!(tanh.logps().is_empty());
    }
}
