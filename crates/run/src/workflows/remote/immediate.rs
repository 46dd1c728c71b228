//! `async`, `nb-async`, `random` and `ml-async`: every batch is ingested,
//! trained on and answered as it arrives (the actor of `async` blocks for
//! the reply; `nb-async`'s keeps up to `in_flight` batches unanswered;
//! `random`'s batches are counted, never trained; `ml-async`'s agent is the
//! lead of the data-parallel learners).

use super::core::Core;
use super::workflow::Workflow;
use crate::vocab::{ConnId, Reply};
use rlfleet_learning::agents::{Agent, Weights};
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::wire::Submission;
use std::time::Instant;

/// The workflows that answer each batch at once.
#[derive(Debug, Default)]
pub(super) struct Immediate;

impl Workflow for Immediate {
    fn experience(
        &mut self,
        core: &mut Core,
        conn: ConnId,
        s: Submission,
        reply: Reply,
        _now: Instant,
    ) -> anyhow::Result<()> {
        core.answer(conn, s, reply)
    }
}

/// `random`: the exploration rate its actors use — uniformly random actions,
/// or (with `distributed.fixed_policy`) greedy ones from a checkpoint's
/// best evaluated weights (its latest when it has no evaluation), loaded
/// into `agent` here.
pub(super) fn fixed_policy(cfg: &RunConfig, agent: &mut dyn Agent) -> anyhow::Result<f32> {
    let Some(path) = &cfg.distributed.fixed_policy else {
        return Ok(1.0);
    };
    let ck = rlfleet_checkpoint::Checkpoint::load(path)?;
    ck.check_matches(path, &cfg.env, &cfg.agent.to_string())?;
    let weights = match ck.best {
        Some(best) => best.weights,
        None => Weights {
            version: ck.agent_state.version,
            data: ck.agent_state.tensor("online")?.data.clone(),
        },
    };
    agent
        .load_weights(&weights)
        .map_err(|e| anyhow::anyhow!("`{}`: {e}", path.display()))?;
    tracing::info!(
        version = weights.version,
        "random: acting greedily with the weights of {}",
        path.display()
    );
    Ok(0.0)
}
