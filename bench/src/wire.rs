//! `rlfleet-bench wire`: what the data plane carries and keeps per env
//! step, against the bytes of one frame. Each shipped image config runs
//! with local actor processes over QUIC for a fixed number of env steps,
//! training never started (the learner only takes the data in): bytes the
//! learner received per env step (`rlfleet_transport_received_bytes_total`
//! over the run's env steps) and bytes the agent keeps per env step it
//! holds (`rlfleet_replay_bytes`: DQN's replay over its capacity in slots,
//! one step each; R2D2's over its capacity in sequences times the steps
//! each trains on; PPO's, IMPALA's and A2C's rollouts over the steps they
//! hold), each as a multiple of one frame (the observation over
//! `frame_stack`, at the bytes per value the env's dtype travels as).
//! With `--before DIR`, each config runs under that build's
//! `learner-server` too, in the same invocation: the change's baseline.

use crate::measure::write_json;
use crate::workflows::run_local_on;
use rlfleet_shared::config::{AgentKind, RunConfig};
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Serialize)]
pub struct WireRow {
    config: String,
    /// `after` (this build) or `before` (`--before`'s).
    build: &'static str,
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
    /// What the agent keeps: the env steps it holds (or can hold, for a
    /// replay allocated whole), and the bytes per such step.
    kept_steps: Option<u64>,
    kept_bytes_per_step: Option<f64>,
    kept_frames_per_step: Option<f64>,
}

/// The value of an unlabelled (or first-labelled) series in a metrics dump.
pub(crate) fn metric(prom: &str, name: &str) -> Option<f64> {
    prom.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The env steps the agent of `cfg` keeps, from its metrics: a replay
/// allocated whole counts its capacity; a rollout the steps it holds.
fn kept_steps(cfg: &RunConfig, prom: &str) -> Option<u64> {
    match cfg.agent {
        AgentKind::Dqn => Some(u64::from(cfg.dqn.buffer_size)),
        AgentKind::R2d2 => {
            Some(u64::from(cfg.r2d2.buffer_size) * u64::from(cfg.r2d2.unroll_length))
        }
        AgentKind::Ppo | AgentKind::Impala | AgentKind::A2c => {
            metric(prom, "rlfleet_replay_size").map(|n| n as u64)
        }
        _ => None,
    }
}

fn row(
    (build, server): (&'static str, &Path),
    shipped: &str,
    (steps, actors): (u64, usize),
    dir: &Path,
) -> anyhow::Result<WireRow> {
    let mut cfg = RunConfig::load(&crate::workflows::shipped(shipped))?;
    cfg.name = format!("wire-{}-{build}", cfg.name);
    cfg.output_dir = dir.join(&cfg.name);
    cfg.stop = Default::default();
    cfg.stop.max_env_steps = Some(steps);
    cfg.stop.max_episodes = Some(1_000_000);
    cfg.eval.episodes = 1;
    cfg.eval.confirm_episodes = 0;
    cfg.eval.period_steps = u64::MAX / 2;
    cfg.checkpoint.period_steps = 0;
    // Data in, no training: a replay that fits, learning never started,
    // rollouts never trained on.
    cfg.dqn.buffer_size = 5_000;
    cfg.dqn.learning_starts = u64::MAX / 2;
    cfg.r2d2.learning_starts = u64::MAX / 2;
    cfg.ppo.n_steps = 1_000_000;
    cfg.impala.n_steps = 1_000_000;
    let spec = cfg.env_source().spec()?;
    let per_value = if spec.obs_dtype.is_bytes() { 1 } else { 4 };
    let frame_bytes = (spec.obs_dim() / cfg.frame_stack.max(1) as usize) as u64 * per_value;
    let summary = run_local_on(server, &cfg, (actors, 1, 1), dir)?;
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
    let kept = kept_steps(&cfg, &prom);
    let kept_per_step = kept
        .map(|n| {
            metric(&prom, "rlfleet_replay_bytes")
                .map(|bytes| bytes / n.max(1) as f64)
                .ok_or_else(|| anyhow::anyhow!("no replay bytes in {shipped}'s metrics"))
        })
        .transpose()?;
    let r = WireRow {
        config: shipped.into(),
        build,
        workflow: cfg.workflow.to_string(),
        frame_stack: cfg.frame_stack,
        actors,
        env_steps,
        frame_bytes,
        received_bytes: received,
        bytes_per_env_step: per_step,
        frames_per_env_step: per_step / frame_bytes as f64,
        kept_steps: kept,
        kept_bytes_per_step: kept_per_step,
        kept_frames_per_step: kept_per_step.map(|b| b / frame_bytes as f64),
    };
    let keeps = match (kept, kept_per_step) {
        (Some(n), Some(b)) => format!(
            "; keeps {b:.0} bytes per env step of {n} = {:.3} frames",
            b / frame_bytes as f64
        ),
        _ => String::new(),
    };
    println!(
        "{shipped} ({build}; {}, frame_stack {}, {actors} actors): {per_step:.0} bytes received \
         per env step = {:.3}x one {frame_bytes}-byte frame{keeps}",
        r.workflow, r.frame_stack, r.frames_per_env_step
    );
    Ok(r)
}

pub fn bench(
    configs: &[String],
    (steps, actors): (u64, usize),
    before: Option<&Path>,
    out: &Path,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut builds: Vec<(&'static str, PathBuf)> = Vec::new();
    if let Some(b) = before {
        builds.push(("before", b.join("learner-server")));
    }
    builds.push(("after", crate::workflows::learner_server()?));
    let mut rows = Vec::new();
    for c in configs {
        for (build, server) in &builds {
            rows.push(row((build, server), c, (steps, actors), dir.path())?);
        }
    }
    write_json(out, "wire", &rows)
}
