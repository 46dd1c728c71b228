//! `mpi-learners`: DQN trained by the multi-learner workflows on 2
//! learner ranks against their single-learner counterparts on 1.

use super::transports::{transport_config, transport_run};
use rlfleet_shared::config::{RunConfig, TransportKind, WorkflowKind};
use serde::Serialize;
use std::path::Path;

/// One run of the learners benchmark.
#[derive(Debug, Serialize)]
pub struct LearnersRow {
    pub workflow: String,
    pub learner_ranks: u32,
    pub env_steps: u64,
    pub train_steps: u64,
    pub wall_secs: f64,
    pub env_steps_per_sec: f64,
    pub train_steps_per_sec: f64,
    /// Gradient steps/s against the single-learner workflow of its family
    /// (`async` for `ml-async`, `rma` for the `ml-rma` family).
    pub train_ratio_vs_single: f64,
}

/// DQN trained over MPI (learning from the config's `learning_starts`, no
/// evaluations) for `steps` env steps: `async` then `ml-async`, `rma` then
/// `ml-rma` (`bin`) and `ml-rma-queue`, each with `actors` actor ranks.
pub fn learners(steps: u64, actors: usize, out: &Path) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
    let runs = [
        ("async", WorkflowKind::Async),
        ("ml-async", WorkflowKind::MlAsync),
        ("rma", WorkflowKind::Rma),
        ("ml-rma", WorkflowKind::MlRma),
        ("ml-rma", WorkflowKind::MlRmaQueue),
    ];
    let mut rows = Vec::new();
    let (mut base, mut single) = (0.0, String::new());
    for (file, workflow) in runs {
        let mut cfg = transport_config(file, steps, dir.path())?;
        // It trains, from the shipped config's `learning_starts`.
        let shipped = RunConfig::load(&root.join(format!("cartpole-dqn-{file}.toml")))?;
        cfg.dqn.learning_starts = shipped.dqn.learning_starts;
        cfg.workflow = workflow;
        cfg.transport = TransportKind::Mpi;
        cfg.output_dir = dir.path().join(workflow.to_string());
        let t = transport_run(&cfg, dir.path(), actors)?;
        let s: toml::Value = toml::from_str(&std::fs::read_to_string(
            cfg.output_dir.join("summary.toml"),
        )?)?;
        let train_steps = s["train_steps"].as_integer().unwrap_or(0) as u64;
        let per_sec = train_steps as f64 / t.wall_secs;
        if !workflow.is_multi_learner() {
            (base, single) = (per_sec, workflow.to_string());
        }
        let row = LearnersRow {
            workflow: t.workflow,
            learner_ranks: if workflow.is_multi_learner() { 2 } else { 1 },
            env_steps: t.env_steps,
            train_steps,
            wall_secs: t.wall_secs,
            env_steps_per_sec: t.env_steps_per_sec,
            train_steps_per_sec: per_sec,
            train_ratio_vs_single: per_sec / base,
        };
        println!(
            "{:<13} on {} learner rank(s): {:>6} env steps, {:>6} gradient steps in {:>5.1} s: \
             {:>6.0} env steps/s, {:>6.0} gradient steps/s, {:.2}× {single}",
            row.workflow,
            row.learner_ranks,
            row.env_steps,
            row.train_steps,
            row.wall_secs,
            row.env_steps_per_sec,
            row.train_steps_per_sec,
            row.train_ratio_vs_single
        );
        rows.push(row);
    }
    crate::measure::write_json(out, "mpi_learners", &rows)
}
