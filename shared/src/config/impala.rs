//! The `[impala]` table: hyperparameters of the IMPALA agent (V-trace
//! actor-critic), with defaults tuned for CartPole-v1.

use serde::{Deserialize, Serialize};

/// IMPALA hyperparameters: a policy network (logits) and a value network
/// of the same hidden widths, trained on the steps of several unrolls at
/// once with V-trace targets (Espeholt et al. 2018), so that steps acted
/// by older weights (policy lag) are corrected rather than refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ImpalaConfig {
    /// Hidden layer widths of the policy and of the value MLP.
    #[schema(value_type = Vec<super::HiddenWidth>, inline, min_items = 1, max_items = 8)]
    pub hidden: Vec<u32>,
    /// Adam learning rate of both networks.
    #[schema(exclusive_minimum = 0.0)]
    pub lr: f64,
    /// Discount factor of future rewards.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub gamma: f64,
    /// Steps held (finished and unfinished episodes alike) before an
    /// update trains on all of them.
    #[schema(minimum = 1)]
    pub n_steps: u32,
    /// Gradient steps per update, each on every held step with V-trace
    /// targets recomputed from the current networks (an epoch after the
    /// first is off-policy too, and corrected the same way).
    #[schema(minimum = 1)]
    pub n_epochs: u32,
    /// ρ̄: importance weights in the value targets and the policy
    /// gradient are clipped to at most this.
    #[schema(exclusive_minimum = 0.0)]
    pub rho_bar: f64,
    /// c̄: the trace coefficients are clipped to at most this.
    #[schema(exclusive_minimum = 0.0)]
    pub c_bar: f64,
    /// λ: scales the trace coefficients (1: V-trace as published).
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub lambda: f64,
    /// Weight of the value loss (½ (v_s − V(x_s))²).
    #[schema(minimum = 0.0)]
    pub baseline_cost: f64,
    /// Weight of the entropy bonus.
    #[schema(minimum = 0.0)]
    pub entropy_cost: f64,
    /// Gradient L2-norm clip (each network).
    #[schema(exclusive_minimum = 0.0)]
    pub max_grad_norm: f64,
}

impl Default for ImpalaConfig {
    fn default() -> Self {
        ImpalaConfig {
            hidden: vec![64, 64],
            lr: 1e-3,
            gamma: 0.99,
            n_steps: 256,
            n_epochs: 4,
            rho_bar: 1.0,
            c_bar: 1.0,
            lambda: 1.0,
            baseline_cost: 0.5,
            entropy_cost: 0.0,
            max_grad_norm: 0.5,
        }
    }
}
