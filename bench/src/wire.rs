//! `rlfleet-bench wire`: what the data plane carries and keeps per env
//! step, against the bytes of one frame. Each shipped image config runs
//! with local actor processes over QUIC for a fixed number of env steps,
//! training never started (the learner only takes the data in): bytes the
//! learner received per env step (`rlfleet_transport_received_bytes_total`
//! over the run's env steps) and bytes its replay keeps per slot
//! (`rlfleet_replay_bytes` over its capacity), each as a multiple of one
//! frame (the observation over `frame_stack`, at the bytes per value the
//! env's dtype travels as).

use crate::measure::write_json;
use crate::workflows::run_local;
use rlfleet_shared::config::{AgentKind, RunConfig};
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Serialize)]
pub struct WireRow {
    config: String,
    workflow: String,
    frame_stack: u32,
    actors: usize,
    env_steps: u64,
    /// Bytes of one frame as it travels.
    frame_bytes: u64,
    received_bytes: u64,
    bytes_per_env_step: f64,
    /// `bytes_per_env_step / frame_bytes`.
    frames_per_env_step: f64,
    /// The replay's figures, for an agent with one (DQN).
    replay_slots: Option<u64>,
    replay_bytes_per_slot: Option<f64>,
    replay_frames_per_slot: Option<f64>,
}

/// The value of an unlabelled (or first-labelled) series in a metrics dump.
pub(crate) fn metric(prom: &str, name: &str) -> Option<f64> {
    prom.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn row(shipped: &str, steps: u64, actors: usize, dir: &Path) -> anyhow::Result<WireRow> {
    let mut cfg = RunConfig::load(&crate::workflows::shipped(shipped))?;
    cfg.name = format!("wire-{}", cfg.name);
    cfg.output_dir = dir.join(&cfg.name);
    cfg.stop = Default::default();
    cfg.stop.max_env_steps = Some(steps);
    cfg.stop.max_episodes = Some(1_000_000);
    cfg.eval.episodes = 1;
    cfg.eval.confirm_episodes = 0;
    cfg.eval.period_steps = u64::MAX / 2;
    cfg.checkpoint.period_steps = 0;
    // Data in, no training: a replay that fits, learning never started.
    cfg.dqn.buffer_size = 5_000;
    cfg.dqn.learning_starts = u64::MAX / 2;
    cfg.ppo.n_steps = 1_000_000;
    let spec = cfg.env_source().spec()?;
    let per_value = if spec.obs_dtype.is_bytes() { 1 } else { 4 };
    let frame_bytes = (spec.obs_dim() / cfg.frame_stack.max(1) as usize) as u64 * per_value;
    let summary = run_local(&cfg, actors, dir)?;
    let env_steps = summary
        .get("env_steps")
        .and_then(toml::Value::as_integer)
        .unwrap_or(0) as u64;
    let prom = std::fs::read_to_string(cfg.output_dir.join("metrics.prom"))?;
    let received = metric(
        &prom,
        "rlfleet_transport_received_bytes_total{transport=\"quic\"}",
    )
    .ok_or_else(|| anyhow::anyhow!("no QUIC received bytes in {shipped}'s metrics"))?
        as u64;
    let per_step = received as f64 / env_steps.max(1) as f64;
    // DQN's replay is sized by `buffer_size` and allocated whole; an agent
    // without one has no slots to count.
    let slots = (cfg.agent == AgentKind::Dqn).then_some(u64::from(cfg.dqn.buffer_size));
    let per_slot = slots
        .map(|slots| {
            metric(&prom, "rlfleet_replay_bytes")
                .map(|bytes| bytes / slots as f64)
                .ok_or_else(|| anyhow::anyhow!("no replay bytes in {shipped}'s metrics"))
        })
        .transpose()?;
    let r = WireRow {
        config: shipped.into(),
        workflow: cfg.workflow.to_string(),
        frame_stack: cfg.frame_stack,
        actors,
        env_steps,
        frame_bytes,
        received_bytes: received,
        bytes_per_env_step: per_step,
        frames_per_env_step: per_step / frame_bytes as f64,
        replay_slots: slots,
        replay_bytes_per_slot: per_slot,
        replay_frames_per_slot: per_slot.map(|b| b / frame_bytes as f64),
    };
    let replay = match per_slot {
        Some(b) => format!(
            "; replay {b:.0} bytes per slot = {:.3} frames",
            b / frame_bytes as f64
        ),
        None => String::new(),
    };
    println!(
        "{shipped} ({}, frame_stack {}, {actors} actors): {per_step:.0} bytes received per env step \
         = {:.3}x one {frame_bytes}-byte frame{replay}",
        r.workflow, r.frame_stack, r.frames_per_env_step
    );
    Ok(r)
}

pub fn bench(configs: &[String], steps: u64, actors: usize, out: &Path) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let rows = configs
        .iter()
        .map(|c| row(c, steps, actors, dir.path()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    write_json(out, "wire", &rows)
}
