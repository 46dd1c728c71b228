//! The `[td3]`, `[ddpg]` and `[sac]` tables: off-policy actor-critic agents
//! for continuous actions, with defaults for Pendulum-v1 on a 2-core CPU.

use serde::{Deserialize, Serialize};

/// TD3 (Fujimoto et al.): twin critics, delayed policy updates, target
/// policy smoothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Td3Config {
    /// Hidden widths of the actor and of each critic.
    #[schema(value_type = Vec<super::HiddenWidth>, inline, min_items = 1, max_items = 8)]
    pub hidden: Vec<u32>,
    /// Adam learning rate of the actor (policy).
    #[schema(exclusive_minimum = 0.0)]
    pub actor_lr: f64,
    /// Adam learning rate of the critics.
    #[schema(exclusive_minimum = 0.0)]
    pub critic_lr: f64,
    /// Discount factor of future rewards.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub gamma: f64,
    /// Polyak coefficient of the target networks.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub tau: f64,
    /// Transitions per gradient step.
    #[schema(minimum = 1, maximum = 65536)]
    pub batch_size: u32,
    /// Replay capacity in transitions.
    #[schema(minimum = 1, maximum = 100000000)]
    pub buffer_size: u32,
    /// Env steps of uniformly random actions before training starts.
    pub learning_starts: u64,
    /// Std of the Gaussian exploration noise, in units of half the action
    /// range.
    #[schema(minimum = 0.0)]
    pub exploration_noise: f64,
    /// Critic steps per actor (and target) update.
    #[schema(minimum = 1, maximum = 1000)]
    pub policy_delay: u32,
    /// Std of the noise added to target actions (half-range units).
    #[schema(minimum = 0.0)]
    pub target_noise: f64,
    /// Target noise is clipped to ± this.
    #[schema(minimum = 0.0)]
    pub target_noise_clip: f64,
}

impl Default for Td3Config {
    fn default() -> Self {
        Td3Config {
            hidden: vec![256, 256],
            actor_lr: 1e-3,
            critic_lr: 1e-3,
            gamma: 0.98,
            tau: 0.005,
            batch_size: 256,
            buffer_size: 200_000,
            learning_starts: 1_000,
            exploration_noise: 0.1,
            policy_delay: 2,
            target_noise: 0.2,
            target_noise_clip: 0.5,
        }
    }
}

/// DDPG (Lillicrap et al.): one critic, the actor and targets updated every
/// step, no target smoothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DdpgConfig {
    /// Hidden widths of the actor and of the critic.
    #[schema(value_type = Vec<super::HiddenWidth>, inline, min_items = 1, max_items = 8)]
    pub hidden: Vec<u32>,
    /// Adam learning rate of the actor (policy).
    #[schema(exclusive_minimum = 0.0)]
    pub actor_lr: f64,
    /// Adam learning rate of the critics.
    #[schema(exclusive_minimum = 0.0)]
    pub critic_lr: f64,
    /// Discount factor of future rewards.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub gamma: f64,
    /// Polyak coefficient of the target networks.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub tau: f64,
    /// Transitions per gradient step.
    #[schema(minimum = 1, maximum = 65536)]
    pub batch_size: u32,
    /// Replay capacity in transitions.
    #[schema(minimum = 1, maximum = 100000000)]
    pub buffer_size: u32,
    /// Env steps of uniformly random actions before training starts.
    pub learning_starts: u64,
    /// Std of the Gaussian exploration noise, in units of half the action range.
    #[schema(minimum = 0.0)]
    pub exploration_noise: f64,
}

impl Default for DdpgConfig {
    fn default() -> Self {
        let t = Td3Config::default();
        DdpgConfig {
            hidden: t.hidden,
            actor_lr: t.actor_lr,
            critic_lr: t.critic_lr,
            gamma: t.gamma,
            tau: t.tau,
            batch_size: t.batch_size,
            buffer_size: t.buffer_size,
            learning_starts: t.learning_starts,
            exploration_noise: t.exploration_noise,
        }
    }
}

impl DdpgConfig {
    /// DDPG as the TD3 agent runs it: a delay of 1 and no target noise
    /// (with one critic; the agent takes that from the agent kind).
    pub fn as_td3(&self) -> Td3Config {
        Td3Config {
            hidden: self.hidden.clone(),
            actor_lr: self.actor_lr,
            critic_lr: self.critic_lr,
            gamma: self.gamma,
            tau: self.tau,
            batch_size: self.batch_size,
            buffer_size: self.buffer_size,
            learning_starts: self.learning_starts,
            exploration_noise: self.exploration_noise,
            policy_delay: 1,
            target_noise: 0.0,
            target_noise_clip: 0.0,
        }
    }
}

/// SAC (Haarnoja et al.): a squashed Gaussian policy, twin critics, a
/// learned entropy temperature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SacConfig {
    /// Hidden widths of the actor and of each critic.
    #[schema(value_type = Vec<super::HiddenWidth>, inline, min_items = 1, max_items = 8)]
    pub hidden: Vec<u32>,
    /// Adam learning rate of the actor (policy).
    #[schema(exclusive_minimum = 0.0)]
    pub actor_lr: f64,
    /// Adam learning rate of the critics.
    #[schema(exclusive_minimum = 0.0)]
    pub critic_lr: f64,
    /// Learning rate of the log temperature.
    #[schema(exclusive_minimum = 0.0)]
    pub alpha_lr: f64,
    /// Initial temperature.
    #[schema(exclusive_minimum = 0.0)]
    pub alpha_init: f64,
    /// Learn the temperature towards `target_entropy` (false: keep
    /// `alpha_init`).
    pub autotune: bool,
    /// Entropy the temperature aims for (default: minus the action
    /// dimension).
    pub target_entropy: Option<f64>,
    /// Discount factor of future rewards.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub gamma: f64,
    /// Polyak coefficient of the target networks.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub tau: f64,
    /// Transitions per gradient step.
    #[schema(minimum = 1, maximum = 65536)]
    pub batch_size: u32,
    /// Replay capacity in transitions.
    #[schema(minimum = 1, maximum = 100000000)]
    pub buffer_size: u32,
    /// Env steps of uniformly random actions before training starts.
    pub learning_starts: u64,
}

impl Default for SacConfig {
    fn default() -> Self {
        SacConfig {
            hidden: vec![256, 256],
            actor_lr: 1e-3,
            critic_lr: 1e-3,
            alpha_lr: 1e-3,
            alpha_init: 1.0,
            autotune: true,
            target_entropy: None,
            gamma: 0.98,
            tau: 0.005,
            batch_size: 256,
            buffer_size: 200_000,
            learning_starts: 1_000,
        }
    }
}
