//! Validation of the agent tables (`[a2c]`, `[dqn]`, `[ppo]`, `[impala]`, `[ddpg]`,
//! `[td3]`, `[sac]`), and of which agent fits which action space and
//! workflow.

use super::validate::{network, positive_finite, require, unit_interval};
use super::{AgentKind, ConfigError, RunConfig, WorkflowKind};
use crate::env::Space;

impl RunConfig {
    /// The agent acts in the env's action space; agents on continuous
    /// actions run in the workflows this build gives them.
    pub(super) fn validate_action_space(&self, space: &Space) -> Result<(), ConfigError> {
        if space.is_discrete() && self.agent.needs_continuous() {
            return Err(ConfigError::Conflict(format!(
                "agent `{}` needs a continuous action space, and `{}` has a discrete one",
                self.agent, self.env
            )));
        }
        if space.is_discrete() {
            return Ok(());
        }
        if self.eval.epsilon > 0.0 {
            return Err(ConfigError::Conflict(format!(
                "eval.epsilon = {} takes random discrete actions, and `{}` has a continuous action space",
                self.eval.epsilon, self.env
            )));
        }
        if !self.agent.handles_continuous() {
            return Err(ConfigError::Conflict(format!(
                "agent `{}` needs a discrete action space, and `{}` has a continuous one",
                self.agent, self.env
            )));
        }
        // `random` picks discrete actions only.
        if self.workflow == WorkflowKind::Random {
            return Err(ConfigError::Conflict(format!(
                "workflow `random` plays discrete actions only; agent `{}` on `{}` acts in a box",
                self.agent, self.env
            )));
        }
        Ok(())
    }

    pub(super) fn validate_ppo(&self) -> Result<(), ConfigError> {
        let on_policy = [
            WorkflowKind::Single,
            WorkflowKind::Sync,
            WorkflowKind::SeedA2c,
        ];
        if self.agent == AgentKind::Ppo && !on_policy.contains(&self.workflow) {
            return Err(ConfigError::Conflict(format!(
                "agent `ppo` trains on rollouts of its current policy: use workflow `single`, \
                 `sync` or `seed-a2c`, not `{}`",
                self.workflow
            )));
        }
        let p = &self.ppo;
        network(
            ["ppo.hidden", "ppo.lr", "ppo.gamma"],
            &p.hidden,
            p.lr,
            p.gamma,
        )?;
        unit_interval("ppo.gae_lambda", p.gae_lambda)?;
        require(
            "ppo.n_steps",
            p.n_steps,
            (1..=1_000_000).contains(&p.n_steps),
            "an integer in 1..=1000000",
        )?;
        require(
            "ppo.batch_size",
            p.batch_size,
            p.batch_size >= 1 && p.batch_size <= p.n_steps,
            &format!("an integer in 1..={} (at most ppo.n_steps)", p.n_steps),
        )?;
        require(
            "ppo.n_epochs",
            p.n_epochs,
            (1..=1_000).contains(&p.n_epochs),
            "an integer in 1..=1000",
        )?;
        positive_finite("ppo.clip_range", p.clip_range)?;
        for (key, v) in [
            ("ppo.clip_range_vf", p.clip_range_vf),
            ("ppo.ent_coef", p.ent_coef),
            ("ppo.vf_coef", p.vf_coef),
        ] {
            require(key, v, v.is_finite() && v >= 0.0, "a finite number >= 0")?;
        }
        positive_finite("ppo.max_grad_norm", p.max_grad_norm)?;
        require(
            "ppo.log_std_init",
            p.log_std_init,
            (-20.0..=2.0).contains(&p.log_std_init),
            "a number in [-20, 2]",
        )
    }

    pub(super) fn validate_continuous_agents(&self) -> Result<(), ConfigError> {
        let t = &self.td3;
        off_policy(
            off_policy_keys!("td3"),
            [t.actor_lr, t.critic_lr, t.gamma, t.tau],
            &t.hidden,
            t.batch_size,
            t.buffer_size,
        )?;
        for (key, v) in [
            ("td3.exploration_noise", t.exploration_noise),
            ("td3.target_noise", t.target_noise),
            ("td3.target_noise_clip", t.target_noise_clip),
        ] {
            require(key, v, v.is_finite() && v >= 0.0, "a finite number >= 0")?;
        }
        require(
            "td3.policy_delay",
            t.policy_delay,
            (1..=1_000).contains(&t.policy_delay),
            "an integer in 1..=1000",
        )?;
        let d = &self.ddpg;
        off_policy(
            off_policy_keys!("ddpg"),
            [d.actor_lr, d.critic_lr, d.gamma, d.tau],
            &d.hidden,
            d.batch_size,
            d.buffer_size,
        )?;
        require(
            "ddpg.exploration_noise",
            d.exploration_noise,
            d.exploration_noise.is_finite() && d.exploration_noise >= 0.0,
            "a finite number >= 0",
        )?;
        let s = &self.sac;
        off_policy(
            off_policy_keys!("sac"),
            [s.actor_lr, s.critic_lr, s.gamma, s.tau],
            &s.hidden,
            s.batch_size,
            s.buffer_size,
        )?;
        positive_finite("sac.alpha_lr", s.alpha_lr)?;
        positive_finite("sac.alpha_init", s.alpha_init)?;
        if let Some(h) = s.target_entropy {
            require("sac.target_entropy", h, h.is_finite(), "a finite number")?;
        }
        Ok(())
    }

    pub(super) fn validate_impala(&self) -> Result<(), ConfigError> {
        let unrolls = [
            WorkflowKind::Single,
            WorkflowKind::Sync,
            WorkflowKind::Async,
            WorkflowKind::SeedA2c,
        ];
        if self.agent == AgentKind::Impala && !unrolls.contains(&self.workflow) {
            return Err(ConfigError::Conflict(format!(
                "agent `impala` trains on unrolls of the episodes it is given: use workflow \
                 `single`, `sync`, `async` or `seed-a2c`, not `{}`",
                self.workflow
            )));
        }
        let p = &self.impala;
        network(
            ["impala.hidden", "impala.lr", "impala.gamma"],
            &p.hidden,
            p.lr,
            p.gamma,
        )?;
        require(
            "impala.n_steps",
            p.n_steps,
            (1..=1_000_000).contains(&p.n_steps),
            "an integer in 1..=1000000",
        )?;
        require(
            "impala.n_epochs",
            p.n_epochs,
            (1..=1_000).contains(&p.n_epochs),
            "an integer in 1..=1000",
        )?;
        positive_finite("impala.rho_bar", p.rho_bar)?;
        positive_finite("impala.c_bar", p.c_bar)?;
        unit_interval("impala.lambda", p.lambda)?;
        for (key, v) in [
            ("impala.baseline_cost", p.baseline_cost),
            ("impala.entropy_cost", p.entropy_cost),
        ] {
            require(key, v, v.is_finite() && v >= 0.0, "a finite number >= 0")?;
        }
        positive_finite("impala.max_grad_norm", p.max_grad_norm)
    }

    pub(super) fn validate_a2c(&self) -> Result<(), ConfigError> {
        let on_policy = [
            WorkflowKind::Single,
            WorkflowKind::Sync,
            WorkflowKind::Async,
            WorkflowKind::SeedA2c,
        ];
        if self.agent == AgentKind::A2c && !on_policy.contains(&self.workflow) {
            return Err(ConfigError::Conflict(format!(
                "agent `a2c` trains on each finished episode's own trajectory: use workflow \
                 `single`, `sync`, `async` or `seed-a2c`, not `{}`",
                self.workflow
            )));
        }
        // (The probe runs everywhere: it is the conformance suite's agent.)
        if self.workflow == WorkflowKind::SeedA2c
            && !self.agent.samples_softmax()
            && self.agent != AgentKind::Probe
        {
            return Err(ConfigError::Conflict(format!(
                "workflow `seed-a2c` trains a policy-gradient agent: use agent `a2c`, `ppo` or \
                 `impala`, not `{}`",
                self.agent
            )));
        }
        let a = &self.a2c;
        network(
            ["a2c.hidden", "a2c.lr", "a2c.gamma"],
            &a.hidden,
            a.lr,
            a.gamma,
        )?;
        for (key, v) in [("a2c.ent_coef", a.ent_coef), ("a2c.vf_coef", a.vf_coef)] {
            require(key, v, v.is_finite() && v >= 0.0, "a finite number >= 0")?;
        }
        positive_finite("a2c.max_grad_norm", a.max_grad_norm)
    }

    pub(super) fn validate_dqn(&self) -> Result<(), ConfigError> {
        let d = &self.dqn;
        network(
            ["dqn.hidden", "dqn.lr", "dqn.gamma"],
            &d.hidden,
            d.lr,
            d.gamma,
        )?;
        require(
            "dqn.lr_end",
            d.lr_end,
            d.lr_end.is_finite() && d.lr_end >= 0.0 && d.lr_end <= d.lr,
            &format!("a number in 0..={} (at most dqn.lr)", d.lr),
        )?;
        require(
            "dqn.rmsprop_alpha",
            d.rmsprop_alpha,
            d.rmsprop_alpha > 0.0 && d.rmsprop_alpha < 1.0,
            "a number in (0, 1)",
        )?;
        positive_finite("dqn.rmsprop_eps", d.rmsprop_eps)?;
        require(
            "dqn.batch_size",
            d.batch_size,
            (1..=65_536).contains(&d.batch_size),
            "an integer in 1..=65536",
        )?;
        require(
            "dqn.buffer_size",
            d.buffer_size,
            d.buffer_size >= d.batch_size && d.buffer_size <= 100_000_000,
            &format!(
                "an integer in {}..=100000000 (at least dqn.batch_size)",
                d.batch_size
            ),
        )?;
        require(
            "dqn.train_freq",
            d.train_freq,
            d.train_freq >= 1,
            "an integer >= 1",
        )?;
        require(
            "dqn.gradient_steps",
            d.gradient_steps,
            d.gradient_steps >= 1,
            "an integer >= 1",
        )?;
        require(
            "dqn.target_update_interval",
            d.target_update_interval,
            d.target_update_interval >= 1,
            "an integer >= 1",
        )?;
        require(
            "dqn.tau",
            d.tau,
            d.tau > 0.0 && d.tau <= 1.0,
            "a number in (0, 1]",
        )?;
        positive_finite("dqn.max_grad_norm", d.max_grad_norm)?;
        positive_finite("dqn.huber_delta", d.huber_delta)?;
        unit_interval("dqn.eps_start", d.eps_start)?;
        unit_interval("dqn.eps_end", d.eps_end)?;
        unit_interval("dqn.per_alpha", d.per_alpha)?;
        unit_interval("dqn.per_beta", d.per_beta)?;
        positive_finite("dqn.per_eps", d.per_eps)?;
        require(
            "dqn.n_step",
            d.n_step,
            (1..=100).contains(&d.n_step),
            "an integer in 1..=100",
        )?;
        require(
            "dqn.eps_decay_steps",
            d.eps_decay_steps,
            d.eps_decay_steps >= 1,
            "an integer >= 1",
        )?;
        Ok(())
    }
}

/// The keys of the fields every off-policy actor-critic table shares, in
/// the order [`off_policy`] takes them.
macro_rules! off_policy_keys {
    ($table:literal) => {
        [
            concat!($table, ".hidden"),
            concat!($table, ".actor_lr"),
            concat!($table, ".gamma"),
            concat!($table, ".critic_lr"),
            concat!($table, ".tau"),
            concat!($table, ".batch_size"),
            concat!($table, ".buffer_size"),
        ]
    };
}
use off_policy_keys;

/// Checks the fields every off-policy actor-critic table shares: `[actor_lr,
/// critic_lr, gamma, tau]`, hidden widths, batch and buffer sizes.
fn off_policy(
    keys: [&'static str; 7],
    [actor_lr, critic_lr, gamma, tau]: [f64; 4],
    hidden: &[u32],
    batch_size: u32,
    buffer_size: u32,
) -> Result<(), ConfigError> {
    network([keys[0], keys[1], keys[2]], hidden, actor_lr, gamma)?;
    positive_finite(keys[3], critic_lr)?;
    require(keys[4], tau, tau > 0.0 && tau <= 1.0, "a number in (0, 1]")?;
    require(
        keys[5],
        batch_size,
        (1..=65_536).contains(&batch_size),
        "an integer in 1..=65536",
    )?;
    require(
        keys[6],
        buffer_size,
        buffer_size >= batch_size && buffer_size <= 100_000_000,
        &format!("an integer in {batch_size}..=100000000 (at least the batch size)"),
    )
}
