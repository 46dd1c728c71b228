//! `rlfleet-bench cnn`'s end-to-end part: an Atari config's frames per
//! second with local actors, against the same actors under `random`.

use super::Actors;
use crate::workflows::{run_local_envs, shipped as shipped_path};
use rlfleet_shared::config::{AgentKind, CoreKind, RunConfig, WorkflowKind};
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Serialize)]
pub struct AtariRow {
    config: String,
    workflow: String,
    actors: usize,
    envs_per_actor: u32,
    /// Connections each actor splits its envs over.
    lanes_per_actor: u32,
    /// `seed` workflows: inference batches the front may answer ahead of
    /// training (`[distributed] max_batches_ahead`).
    max_batches_ahead: u32,
    env_steps: u64,
    frames: u64,
    train_steps: u64,
    wall_secs: f64,
    frames_per_sec: f64,
    gradient_steps_per_sec: f64,
    /// Mean policy versions a trained batch was behind (NaN: none).
    policy_lag_mean: f64,
    /// Share of the wall time the learner's run thread was busy (ingest,
    /// gradient steps, answers).
    learner_busy_share: f64,
    /// `seed` workflows (NaN elsewhere): envs per forward pass of the
    /// inference front, a request's mean wait for its answer, and the share
    /// of the wall time the front held a ready batch behind training.
    inference_batch_mean: f64,
    inference_latency_mean_ms: f64,
    front_stall_share: f64,
    /// The same actors and env under `random` (no network).
    random_frames_per_sec: f64,
    ratio: f64,
}

/// What one embedded run did, from its `summary.toml`.
struct Embedded {
    env_steps: u64,
    train_steps: u64,
    wall: f64,
    /// `[learner]` (empty for a run without one).
    learner: toml::Table,
}

impl Embedded {
    /// `[learner]`'s float `key` (NaN: absent).
    fn learner(&self, key: &str) -> f64 {
        self.learner
            .get(key)
            .and_then(toml::Value::as_float)
            .unwrap_or(f64::NAN)
    }
}

/// One embedded run of `cfg` with `actors` local actors of `envs` envs
/// each, split over `lanes` connections.
fn embedded(cfg: &RunConfig, actors: Actors, dir: &Path) -> anyhow::Result<Embedded> {
    let s = run_local_envs(cfg, actors, dir)?;
    let int = |k: &str| s.get(k).and_then(toml::Value::as_integer).unwrap_or(0) as u64;
    Ok(Embedded {
        env_steps: int("env_steps"),
        train_steps: int("train_steps"),
        wall: s
            .get("wall_secs")
            .and_then(toml::Value::as_float)
            .unwrap_or(0.0),
        learner: s
            .get("learner")
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_default(),
    })
}

pub(super) fn atari_row(
    shipped: &str,
    runs: &AtariRuns<'_>,
    dir: &Path,
) -> anyhow::Result<AtariRow> {
    let (steps, (actors, envs, lanes)) = (runs.steps, runs.actors);
    let mut cfg = RunConfig::load(&shipped_path(shipped))?;
    cfg.output_dir = dir.join(&cfg.name);
    if let Some(ahead) = runs.ahead {
        cfg.distributed.max_batches_ahead = ahead;
    }
    cfg.env_kwargs
        .insert("max_num_frames_per_episode".into(), 4_000.into());
    cfg.eval.episodes = 1;
    cfg.eval.confirm_episodes = 0;
    cfg.stop = Default::default();
    cfg.stop.max_env_steps = Some(steps);
    cfg.stop.max_episodes = Some(1_000_000);
    cfg.eval.period_steps = u64::MAX / 2;
    cfg.checkpoint.period_steps = 0;
    // Training from the first thousand steps on, in a replay that fits.
    cfg.dqn.learning_starts = 1_000;
    cfg.dqn.buffer_size = 10_000;
    cfg.r2d2.learning_starts = 1_000;
    cfg.r2d2.buffer_size = cfg.r2d2.buffer_size.min(500);
    let run = embedded(&cfg, (actors, envs, lanes), dir)?;
    let (env_steps, train_steps, wall) = (run.env_steps, run.train_steps, run.wall);
    let lag = run.learner("policy_lag_mean");
    let busy = run.learner("train_secs") / wall;
    let batch_mean = run.learner("inference_batch_mean");
    let latency_ms = run.learner("inference_latency_mean_ms");
    let stall = run.learner("front_stall_secs") / wall;
    let mut random = cfg.clone();
    random.name = format!("{}-random", cfg.name);
    random.workflow = WorkflowKind::Random;
    // `random` plays no policy; an on-policy agent would refuse it.
    random.agent = AgentKind::Dqn;
    random.model.core = CoreKind::None;
    random.output_dir = dir.join(&random.name);
    let r = embedded(&random, (actors, envs, lanes), dir)?;
    let (r_steps, r_wall) = (r.env_steps, r.wall);
    let fps = 4.0 * env_steps as f64 / wall;
    let random_fps = 4.0 * r_steps as f64 / r_wall;
    println!(
        "atari end to end ({shipped}, {actors} actors of {envs} envs in {lanes} lanes, front up to {} \
         batches ahead): {env_steps} env steps ({} frames) and \
         {train_steps} gradient steps in {wall:.1} s: {fps:.0} frames/s, {:.1} gradient \
         steps/s, mean policy lag {lag:.2}; the same actors under `random`: {random_fps:.0} \
         frames/s; ratio {:.2}; learner busy {:.0} % of the time, inference {batch_mean:.1} \
         envs a pass, {latency_ms:.2} ms a request, held behind training {:.0} % of the time",
        cfg.distributed.max_batches_ahead,
        4 * env_steps,
        train_steps as f64 / wall,
        fps / random_fps,
        100.0 * busy,
        100.0 * stall,
    );
    Ok(AtariRow {
        config: shipped.into(),
        workflow: cfg.workflow.to_string(),
        actors,
        envs_per_actor: envs,
        lanes_per_actor: lanes,
        max_batches_ahead: cfg.distributed.max_batches_ahead,
        env_steps,
        frames: 4 * env_steps,
        train_steps,
        wall_secs: wall,
        frames_per_sec: fps,
        gradient_steps_per_sec: train_steps as f64 / wall,
        policy_lag_mean: lag,
        learner_busy_share: busy,
        inference_batch_mean: batch_mean,
        inference_latency_mean_ms: latency_ms,
        front_stall_share: stall,
        random_frames_per_sec: random_fps,
        ratio: fps / random_fps,
    })
}

/// The end-to-end runs: each of `configs` for `steps` env steps (none
/// with 0) with `actors`, the `seed` front's `max_batches_ahead` set to
/// `ahead` when given.
#[derive(Debug)]
pub struct AtariRuns<'a> {
    pub steps: u64,
    pub actors: Actors,
    pub configs: &'a [String],
    pub ahead: Option<u32>,
}
