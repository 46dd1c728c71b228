//! The `[ppo]` table: hyperparameters of the PPO agent (clipped objective,
//! GAE), with defaults close to rl-baselines3-zoo's CartPole-v1 settings
//! for one environment.

use serde::{Deserialize, Serialize};

/// PPO hyperparameters: a policy MLP (logits for discrete actions; the mean
/// of a Gaussian with a learned state-independent log std for continuous
/// ones) and a separate value MLP of the same hidden widths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PpoConfig {
    /// Hidden layer widths of the policy and of the value MLP.
    #[schema(value_type = Vec<super::HiddenWidth>, inline, min_items = 1, max_items = 8)]
    pub hidden: Vec<u32>,
    /// Adam learning rate of both networks (at the start, when annealed).
    #[schema(exclusive_minimum = 0.0)]
    pub lr: f64,
    /// Anneal the learning rate linearly to 0 over this many env steps (0:
    /// constant), as rl-baselines3-zoo's `lin_` schedules do.
    pub lr_anneal_steps: u64,
    /// Discount factor of future rewards.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub gamma: f64,
    /// GAE lambda.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub gae_lambda: f64,
    /// Transitions collected (over all actors) before each update.
    #[schema(minimum = 1, maximum = 1000000)]
    pub n_steps: u32,
    /// Minibatch size of each gradient step.
    #[schema(minimum = 1, maximum = 1000000)]
    pub batch_size: u32,
    /// Passes over the collected transitions per update.
    #[schema(minimum = 1, maximum = 1000)]
    pub n_epochs: u32,
    /// Clip range of the probability ratio.
    #[schema(exclusive_minimum = 0.0)]
    pub clip_range: f64,
    /// Clip range of the value change around the old value (0: no value
    /// clipping).
    #[schema(minimum = 0.0)]
    pub clip_range_vf: f64,
    /// Weight of the entropy bonus.
    #[schema(minimum = 0.0)]
    pub ent_coef: f64,
    /// Weight of the value loss.
    #[schema(minimum = 0.0)]
    pub vf_coef: f64,
    /// Gradient L2-norm clip (each network).
    #[schema(exclusive_minimum = 0.0)]
    pub max_grad_norm: f64,
    /// Scale each minibatch's advantages to zero mean, unit variance.
    pub normalize_advantage: bool,
    /// Initial log standard deviation of continuous actions.
    #[schema(minimum = -20.0, maximum = 2.0)]
    pub log_std_init: f64,
}

impl Default for PpoConfig {
    fn default() -> Self {
        PpoConfig {
            hidden: vec![64, 64],
            lr: 1e-3,
            lr_anneal_steps: 0,
            gamma: 0.98,
            gae_lambda: 0.8,
            n_steps: 256,
            batch_size: 64,
            n_epochs: 10,
            clip_range: 0.2,
            clip_range_vf: 0.0,
            ent_coef: 0.0,
            vf_coef: 0.5,
            max_grad_norm: 0.5,
            normalize_advantage: true,
            log_std_init: 0.0,
        }
    }
}
