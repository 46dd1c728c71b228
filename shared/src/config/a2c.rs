//! The `[a2c]` table: hyperparameters of the advantage actor-critic agent,
//! with defaults tuned for CartPole-v1.

use serde::{Deserialize, Serialize};

/// When A2C takes a gradient step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TrainOn {
    /// Once per finished episode, on that episode's trajectory (returns to
    /// the end, bootstrapped from the value of the last state when the
    /// episode was truncated) — as EXARL's A2C workflows did.
    Episode,
}

/// A2C hyperparameters: a policy MLP (logits) and a separate value MLP of
/// the same hidden widths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct A2cConfig {
    /// Hidden layer widths of the policy and of the value MLP.
    #[schema(value_type = Vec<super::HiddenWidth>, inline, min_items = 1, max_items = 8)]
    pub hidden: Vec<u32>,
    /// Adam learning rate of both networks.
    #[schema(exclusive_minimum = 0.0)]
    pub lr: f64,
    /// Discount factor of future rewards.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub gamma: f64,
    /// Weight of the entropy bonus.
    #[schema(minimum = 0.0)]
    pub ent_coef: f64,
    /// Weight of the value loss.
    #[schema(minimum = 0.0)]
    pub vf_coef: f64,
    /// Gradient L2-norm clip (each network).
    #[schema(exclusive_minimum = 0.0)]
    pub max_grad_norm: f64,
    /// Scale each trajectory's advantages to zero mean, unit variance.
    pub normalize_advantage: bool,
    pub train_on: TrainOn,
}

impl Default for A2cConfig {
    fn default() -> Self {
        A2cConfig {
            hidden: vec![64, 64],
            lr: 1e-3,
            gamma: 0.99,
            ent_coef: 0.01,
            vf_coef: 0.5,
            max_grad_norm: 0.5,
            normalize_advantage: true,
            train_on: TrainOn::Episode,
        }
    }
}
