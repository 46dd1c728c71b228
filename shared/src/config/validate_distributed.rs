//! Validation of the `[distributed]` table: batch and round sizes,
//! inference batching, the policy-lag bound, pools and the rate limiter.

use super::validate::{positive_finite, require};
use super::{AgentKind, ConfigError, RunConfig, WorkflowKind};

impl RunConfig {
    pub(super) fn validate_distributed(&self) -> Result<(), ConfigError> {
        let d = &self.distributed;
        require(
            "distributed.batch_step_frequency",
            d.batch_step_frequency,
            (1..=1_000_000).contains(&d.batch_step_frequency),
            "an integer in 1..=1000000",
        )?;
        require(
            "distributed.steps_per_round",
            d.steps_per_round,
            (1..=1_000_000).contains(&d.steps_per_round),
            "an integer in 1..=1000000",
        )?;
        require(
            "distributed.inference_max_batch",
            d.inference_max_batch,
            (1..=65_536).contains(&d.inference_max_batch),
            "an integer in 1..=65536",
        )?;
        require(
            "distributed.inference_max_wait_us",
            d.inference_max_wait_us,
            d.inference_max_wait_us <= 10_000_000,
            "an integer in 0..=10000000",
        )?;
        require(
            "distributed.max_batches_ahead",
            d.max_batches_ahead,
            (1..=1_024).contains(&d.max_batches_ahead),
            "an integer in 1..=1024 (each batch held is up to inference_max_batch observations)",
        )?;
        require(
            "distributed.max_envs_per_actor",
            d.max_envs_per_actor,
            (1..=4_096).contains(&d.max_envs_per_actor),
            "an integer in 1..=4096",
        )?;
        require(
            "distributed.env_step_timeout_secs",
            d.env_step_timeout_secs,
            (0.0..=86_400.0).contains(&d.env_step_timeout_secs),
            "a number of seconds in 0..=86400 (0: no limit)",
        )?;
        require(
            "distributed.max_env_errors_in_a_row",
            d.max_env_errors_in_a_row,
            d.max_env_errors_in_a_row >= 1,
            "an integer >= 1",
        )?;
        require(
            "distributed.in_flight",
            d.in_flight,
            (1..=32).contains(&d.in_flight),
            "an integer in 1..=32",
        )?;
        require(
            "distributed.window_ms",
            d.window_ms,
            (1..=60_000).contains(&d.window_ms),
            "an integer in 1..=60000",
        )?;
        require(
            "distributed.data_structure_length",
            d.data_structure_length,
            (1..=65_536).contains(&d.data_structure_length),
            "an integer in 1..=65536",
        )?;
        if self.workflow == WorkflowKind::Orchestrated {
            positive_finite("distributed.samples_per_insert", d.samples_per_insert)?;
            let Some(batch) = self.items_per_sample() else {
                return Err(ConfigError::Conflict(format!(
                    "workflow `orchestrated` trains from replay: use agent `dqn`, not `{}`",
                    self.agent
                )));
            };
            let what = match self.agent {
                AgentKind::Dqn => "dqn.batch_size",
                _ => "the probe's 1",
            };
            require(
                "distributed.min_size_to_sample",
                d.min_size_to_sample,
                d.min_size_to_sample >= batch,
                &format!("an integer >= {batch} ({what}: a sample needs a full batch)"),
            )?;
            // Insert admitted while spi*I - S <= centre + eb, sample while
            // spi*I - S - batch >= centre - eb: with 2*eb < batch both can
            // be refused at once, and the run would stall.
            require(
                "distributed.error_buffer",
                d.error_buffer,
                d.error_buffer.is_finite() && 2.0 * d.error_buffer >= batch as f64,
                &format!(
                    "a number >= {} (half of {what}): a narrower window can stall inserts and \
                     training both",
                    batch as f64 / 2.0
                ),
            )?;
        }
        Ok(())
    }
}
