//! The `[r2d2]` table: hyperparameters of the R2D2 agent (recurrent DQN
//! on replayed sequences), seed_rl's Atari settings by default, and their
//! validation.

use super::validate::{network, positive_finite, require, unit_interval};
use super::{AgentKind, ConfigError, CoreKind, RunConfig, WorkflowKind};
use serde::{Deserialize, Serialize};

/// R2D2 (Kapturowski et al. 2019) as seed_rl builds it: a Q-network with
/// the run's recurrent core, trained on replayed sequences that start from
/// a stored recurrent state, burned in through the online and target
/// networks before the loss; n-step double-Q targets under the value
/// rescaling h; sequence priorities mixing the max and mean |TD error|.
/// Defaults are seed_rl's Atari settings; small tasks shorten the unroll
/// and the replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct R2d2Config {
    /// Hidden layer widths before the recurrent core.
    #[schema(value_type = Vec<super::HiddenWidth>, inline, min_items = 1, max_items = 8)]
    pub hidden: Vec<u32>,
    /// Adam learning rate.
    #[schema(exclusive_minimum = 0.0)]
    pub lr: f64,
    /// Adam's epsilon (seed_rl: 1e-3).
    #[schema(exclusive_minimum = 0.0)]
    pub adam_eps: f64,
    /// Discount factor of future rewards.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub gamma: f64,
    /// Steps of rewards before bootstrapping (truncated at a sequence's
    /// end).
    #[schema(minimum = 1, maximum = 100)]
    pub n_step: u32,
    /// Steps a sequence trains on.
    #[schema(minimum = 1)]
    pub unroll_length: u32,
    /// Steps before them that only rebuild the recurrent state (no loss):
    /// consecutive sequences of an episode overlap by `burn_in + 1`
    /// observations. An episode's first sequence starts from zeros and
    /// burns nothing.
    pub burn_in: u32,
    /// Sequences per gradient step.
    #[schema(minimum = 1)]
    pub batch_size: u32,
    /// Sequences the replay holds.
    #[schema(minimum = 1)]
    pub buffer_size: u32,
    /// Env steps before training starts.
    pub learning_starts: u64,
    /// Env steps per gradient step.
    #[schema(minimum = 1)]
    pub train_freq: u32,
    /// Gradient steps between copies of the online network to the target.
    #[schema(minimum = 1)]
    pub target_update_interval: u32,
    /// α: sampling probability ∝ priority^α.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub priority_exponent: f64,
    /// β: importance-sampling correction exponent.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub importance_sampling_exponent: f64,
    /// η: a sequence's priority is η max|δ| + (1 − η) mean|δ|.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub priority_eta: f64,
    /// Targets under the value rescaling h (off: plain Q-values).
    pub value_rescale: bool,
    /// ε of h(x) = sign(x)(√(|x| + 1) − 1) + εx.
    #[schema(minimum = 0.0)]
    pub value_rescale_eps: f64,
    /// Gradient L2-norm clip.
    #[schema(exclusive_minimum = 0.0)]
    pub max_grad_norm: f64,
    /// The exploration ladder (Ape-X): rung i of N acts with
    /// `eps_base^(1 + eps_alpha * i / (N - 1))` (`eps_base` when N = 1).
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub eps_base: f64,
    /// α of the exploration ladder (see `eps_base`).
    #[schema(minimum = 0.0)]
    pub eps_alpha: f64,
    /// N, the ladder's rungs: actor k (in the order actors join) acts on
    /// rung k mod N, the `seed` front's env k on rung k mod N, and
    /// `single` plays episode e on rung e mod N.
    #[schema(minimum = 1, maximum = 65536)]
    pub eps_ladder: u32,
    /// ε of evaluation episodes (unless `eval.epsilon` is larger).
    #[schema(minimum = 0.0, exclusive_maximum = 1.0)]
    pub eval_epsilon: f64,
}

impl Default for R2d2Config {
    fn default() -> Self {
        R2d2Config {
            hidden: vec![512],
            lr: 1e-4,
            adam_eps: 1e-3,
            gamma: 0.997,
            n_step: 5,
            unroll_length: 80,
            burn_in: 40,
            batch_size: 64,
            buffer_size: 10_000,
            learning_starts: 50_000,
            train_freq: 16,
            target_update_interval: 2_500,
            priority_exponent: 0.9,
            importance_sampling_exponent: 0.6,
            priority_eta: 0.9,
            value_rescale: true,
            value_rescale_eps: 1e-3,
            max_grad_norm: 40.0,
            eps_base: 0.4,
            eps_alpha: 7.0,
            eps_ladder: 256,
            eval_epsilon: 1e-3,
        }
    }
}

impl R2d2Config {
    /// Rung `i`'s exploration rate.
    pub fn ladder_epsilon(&self, i: u64) -> f64 {
        let n = u64::from(self.eps_ladder.max(1));
        if n == 1 {
            return self.eps_base;
        }
        let i = (i % n) as f64;
        self.eps_base
            .powf(1.0 + self.eps_alpha * i / (n - 1) as f64)
    }
}

impl RunConfig {
    /// The `[r2d2]` table, and what an `r2d2` run needs: a recurrent core
    /// and a workflow whose episodes reach the learner in order.
    pub(super) fn validate_r2d2(&self) -> Result<(), ConfigError> {
        let r = &self.r2d2;
        network(
            ["r2d2.hidden", "r2d2.lr", "r2d2.gamma"],
            &r.hidden,
            r.lr,
            r.gamma,
        )?;
        positive_finite("r2d2.adam_eps", r.adam_eps)?;
        require(
            "r2d2.n_step",
            r.n_step,
            (1..=100).contains(&r.n_step),
            "an integer in 1..=100",
        )?;
        for (key, v) in [
            ("r2d2.unroll_length", r.unroll_length),
            ("r2d2.batch_size", r.batch_size),
            ("r2d2.buffer_size", r.buffer_size),
            ("r2d2.train_freq", r.train_freq),
            ("r2d2.target_update_interval", r.target_update_interval),
        ] {
            require(key, v, v >= 1, "a positive integer")?;
        }
        require(
            "r2d2.burn_in",
            r.burn_in,
            r.burn_in <= 10_000 && r.unroll_length <= 10_000,
            "at most 10000 (and `r2d2.unroll_length` too)",
        )?;
        for (key, v) in [
            ("r2d2.priority_exponent", r.priority_exponent),
            (
                "r2d2.importance_sampling_exponent",
                r.importance_sampling_exponent,
            ),
            ("r2d2.priority_eta", r.priority_eta),
            ("r2d2.eps_base", r.eps_base),
        ] {
            unit_interval(key, v)?;
        }
        for (key, v) in [
            ("r2d2.value_rescale_eps", r.value_rescale_eps),
            ("r2d2.eps_alpha", r.eps_alpha),
        ] {
            require(key, v, v.is_finite() && v >= 0.0, "a finite number >= 0")?;
        }
        positive_finite("r2d2.max_grad_norm", r.max_grad_norm)?;
        require(
            "r2d2.eps_ladder",
            r.eps_ladder,
            (1..=65_536).contains(&r.eps_ladder),
            "an integer in 1..=65536",
        )?;
        require(
            "r2d2.eval_epsilon",
            r.eval_epsilon,
            (0.0..1.0).contains(&r.eval_epsilon),
            "a number in [0, 1)",
        )?;
        if self.agent != AgentKind::R2d2 {
            return Ok(());
        }
        if self.model.core == CoreKind::None {
            return Err(ConfigError::Conflict(
                "agent `r2d2` is a recurrent agent: set `[model] core = \"lstm\"`".into(),
            ));
        }
        let ordered = [
            WorkflowKind::Single,
            WorkflowKind::Sync,
            WorkflowKind::Async,
            WorkflowKind::Seed,
        ];
        if !ordered.contains(&self.workflow) {
            return Err(ConfigError::Conflict(format!(
                "agent `r2d2` cuts each episode into sequences as its steps arrive: use workflow \
                 `single`, `sync`, `async` or `seed`, not `{}`",
                self.workflow
            )));
        }
        Ok(())
    }
}
