//! The `[dqn]` table: hyperparameters of the DQN agent, with defaults tuned
//! for CartPole-v1 on a 2-core CPU.

use serde::{Deserialize, Serialize};

/// How the target network follows the online network.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TargetUpdate {
    /// Copy the online weights every `target_update_interval` train steps.
    Hard,
    /// Polyak averaging with `tau` every `target_update_interval` steps.
    Soft,
}

/// DQN's update rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OptimizerKind {
    /// Adam with PyTorch's defaults (betas 0.9, 0.999; eps 1e-8).
    Adam,
    /// RMSprop as PyTorch defines it (`rmsprop_alpha`, `rmsprop_eps`
    /// added to the root, `rmsprop_centered`): DQN-Nature's and MinAtar's
    /// reference's rule.
    Rmsprop,
}

/// DQN hyperparameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DqnConfig {
    /// Hidden layer widths of the Q-network MLP (ReLU).
    #[schema(value_type = Vec<super::HiddenWidth>, inline, min_items = 1, max_items = 8)]
    pub hidden: Vec<u32>,
    /// Learning rate (at the start, when annealed).
    #[schema(exclusive_minimum = 0.0)]
    pub lr: f64,
    /// Anneal the learning rate linearly from `lr` to `lr_end` over this
    /// many env steps, then hold it there (0: constant `lr`). A small rate
    /// late in a run keeps a solved policy from being trained away.
    pub lr_anneal_steps: u64,
    /// Where the annealed learning rate ends (at most `lr`).
    #[schema(minimum = 0.0)]
    pub lr_end: f64,
    /// Discount factor of future rewards.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub gamma: f64,
    /// Transitions per gradient step.
    #[schema(minimum = 1, maximum = 65536)]
    pub batch_size: u32,
    /// Replay ring capacity in transitions.
    #[schema(minimum = 1, maximum = 100000000)]
    pub buffer_size: u32,
    /// Env steps before training starts (random-ish exploration fills replay).
    pub learning_starts: u64,
    /// Train every this many env steps...
    #[schema(minimum = 1)]
    pub train_freq: u32,
    /// ...with this many gradient steps each time.
    #[schema(minimum = 1)]
    pub gradient_steps: u32,
    pub target_update: TargetUpdate,
    /// Train steps between target updates.
    #[schema(minimum = 1)]
    pub target_update_interval: u32,
    /// Polyak coefficient for soft updates.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub tau: f64,
    /// Double-DQN targets (online argmax, target evaluation).
    pub double: bool,
    /// Clip the bootstrapped value in each target to ±max |reward| /
    /// (1 − gamma), the largest discounted return the rewards seen so far
    /// allow: no true value lies outside, and values that overshoot it
    /// cannot feed their own growth through the targets.
    pub bound_targets: bool,
    /// Dueling head (Wang et al.): the last layer gives a state value and
    /// one advantage per action, Q = V + A - mean(A).
    pub dueling: bool,
    /// Returns over this many steps before bootstrapping (1: one-step
    /// targets).
    #[schema(minimum = 1, maximum = 100)]
    pub n_step: u32,
    /// Gradient L2-norm clip.
    #[schema(exclusive_minimum = 0.0)]
    pub max_grad_norm: f64,
    /// Huber loss threshold.
    #[schema(exclusive_minimum = 0.0)]
    pub huber_delta: f64,
    /// ε-greedy exploration's chance of a random action at the start.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub eps_start: f64,
    /// ε-greedy exploration's floor, reached `eps_decay_steps` after the decay starts.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub eps_end: f64,
    /// Env steps over which epsilon decays linearly.
    #[schema(minimum = 1)]
    pub eps_decay_steps: u64,
    /// Env steps for which epsilon holds at `eps_start` before it decays
    /// (0: from the first step; MinAtar's and the Nature DQN's references
    /// decay from their replay start, `learning_starts`).
    pub eps_decay_start: u64,
    /// Prioritized replay (sum tree; priorities from TD errors).
    pub prioritized: bool,
    /// How strongly priorities shape sampling (0: uniform).
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub per_alpha: f64,
    /// Importance-sampling correction exponent (1: full correction).
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub per_beta: f64,
    /// Added to |TD error| so that no transition gets priority 0.
    #[schema(exclusive_minimum = 0.0)]
    pub per_eps: f64,
    /// The update rule: `adam` or `rmsprop`.
    pub optimizer: OptimizerKind,
    /// RMSprop's smoothing of its running means (MinAtar: 0.95).
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub rmsprop_alpha: f64,
    /// Added to RMSprop's root (MinAtar's "min squared gradient": 0.01).
    #[schema(exclusive_minimum = 0.0)]
    pub rmsprop_eps: f64,
    /// Centred RMSprop: the root of the gradients' variance, not of their
    /// mean square.
    pub rmsprop_centered: bool,
}

impl Default for DqnConfig {
    fn default() -> Self {
        DqnConfig {
            hidden: vec![64, 64],
            lr: 1e-3,
            lr_anneal_steps: 0,
            lr_end: 0.0,
            gamma: 0.99,
            batch_size: 64,
            buffer_size: 50_000,
            learning_starts: 1_000,
            train_freq: 1,
            gradient_steps: 1,
            target_update: TargetUpdate::Hard,
            target_update_interval: 500,
            tau: 1.0,
            double: true,
            bound_targets: false,
            dueling: false,
            n_step: 1,
            max_grad_norm: 10.0,
            huber_delta: 1.0,
            eps_start: 1.0,
            eps_end: 0.05,
            eps_decay_steps: 10_000,
            eps_decay_start: 0,
            prioritized: false,
            per_alpha: 0.6,
            per_beta: 0.4,
            per_eps: 1e-6,
            optimizer: OptimizerKind::Adam,
            rmsprop_alpha: 0.95,
            rmsprop_eps: 0.01,
            rmsprop_centered: true,
        }
    }
}

/// The `[probe]` table: the conformance-test agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    /// One "train step" (a new policy version) per this many transitions
    /// observed.
    #[schema(minimum = 1)]
    pub train_every: u32,
    /// Exploration rate the actors use (the probe's weights are all zero,
    /// so its greedy action is always 0).
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub epsilon: f64,
    /// Each "train step" takes this long (a stuck or slow learner, for the
    /// watchdog's tests); 0: none.
    pub train_sleep_ms: u64,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            train_every: 8,
            epsilon: 0.5,
            train_sleep_ms: 0,
        }
    }
}
