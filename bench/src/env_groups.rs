//! `env-groups` (feature `mpi`): env steps/s of `HeatRod-v0` spanning
//! K = 1, 2 and 4 ranks through the env-group machinery (leader commands,
//! worker threads, statuses), each under its own `mpirun -n K`, against
//! the same env on one rank stepped directly (no group) in the same run.
//! Two sizes: a compute-bound rod (the work splits over the ranks) and the
//! 32-cell rod the shipped config learns on (the step is all overhead: the
//! collective step's fixed cost).

use actor_client::env_group::{follow, lead::GroupLead};
use rlfleet_shared::env::{Action, EnvSource};
use rlfleet_shared::mpi::rsmpi::traits::Communicator;
use rlfleet_shared::mpi::{self, Group};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

/// One configuration's figures.
#[derive(Debug, Serialize, Deserialize)]
pub struct GroupRow {
    pub cells: u32,
    pub substeps: u32,
    /// Ranks per env (0: one rank, no group: the baseline).
    pub ranks_per_env: u32,
    pub steps: u64,
    pub steps_per_sec: f64,
    /// Against the baseline's steps/s.
    pub ratio_vs_one_rank: f64,
    /// Microseconds per step beyond the baseline's divided by K (the
    /// collective step's cost when the work splits perfectly).
    pub overhead_micros: f64,
    /// Cores of this machine (K above them oversubscribes).
    pub cores: usize,
}

fn source(cells: u32, substeps: u32) -> EnvSource {
    EnvSource {
        id: "HeatRod-v0".into(),
        kwargs_json: format!(r#"{{"cells": {cells}, "substeps": {substeps}}}"#),
        ..EnvSource::default()
    }
}

/// Steps/s of `steps` steps with a fixed action after one reset.
fn time_steps(env: &mut dyn rlfleet_shared::env::Env, steps: u64) -> anyhow::Result<f64> {
    let mut obs = vec![0f32; env.spec().obs_dim()];
    env.try_reset(Some(1), &mut obs)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let t = Instant::now();
    for i in 0..steps {
        env.try_step(Action::Discrete((i % 3) as usize), &mut obs)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(steps as f64 / t.elapsed().as_secs_f64())
}

/// Runs every configuration and writes `env_groups.json`.
pub fn bench(cells: u32, substeps: u32, steps: u64, out: &Path) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut rows = Vec::new();
    for (cells, substeps, steps) in [(cells, substeps, steps), (32, 16, steps * 20)] {
        let base = time_steps(source(cells, substeps).make()?.as_mut(), steps)?;
        let row = |k: u32, rate: f64| GroupRow {
            cells,
            substeps,
            ranks_per_env: k,
            steps,
            steps_per_sec: rate,
            ratio_vs_one_rank: rate / base,
            overhead_micros: 1e6 / rate - 1e6 / base / f64::from(k.max(1)),
            cores,
        };
        rows.push(row(0, base));
        for k in [1u32, 2, 4] {
            let o = super::mpi::mpirun()
                .args(["-n", &k.to_string()])
                .arg(&exe)
                .args(["env-group-ranks", "--cells", &cells.to_string()])
                .args(["--substeps", &substeps.to_string()])
                .args(["--steps", &steps.to_string()])
                .output()?;
            anyhow::ensure!(
                o.status.success(),
                "mpirun -n {k} failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let rate: f64 = String::from_utf8_lossy(&o.stdout).trim().parse()?;
            rows.push(row(k, rate));
        }
    }
    for r in &rows {
        let k = match r.ranks_per_env {
            0 => "1 rank, no group".to_string(),
            k => format!("K = {k}"),
        };
        println!(
            "HeatRod {:>6} cells × {:>3} sub-steps  {k:<17} {:>9.0} steps/s  {:>5.2}× one rank  {:>7.1} µs/step over 1/K",
            r.cells, r.substeps, r.steps_per_sec, r.ratio_vs_one_rank, r.overhead_micros
        );
    }
    crate::measure::write_json(out, "env_groups", &rows)
}

/// One rank of a `env-groups` job: rank 0 leads a group of the whole
/// world and times its steps (printing steps/s); the others follow.
pub fn ranks(cells: u32, substeps: u32, steps: u64) -> anyhow::Result<()> {
    mpi::steer_components();
    let universe = mpi::init().map_err(anyhow::Error::msg)?;
    let world = universe.world();
    let comm = world.duplicate();
    if world.rank() != 0 {
        follow::serve(&comm).map_err(anyhow::Error::msg)?;
        drop(comm);
    } else {
        let ranks: Vec<i32> = (0..world.size()).collect();
        let lead = GroupLead::new(Group(comm), 0, ranks);
        let factory = lead.factory();
        let mut env = (factory.0)(&source(cells, substeps), None)?;
        let rate = time_steps(env.as_mut(), steps)?;
        drop(env);
        lead.stop();
        drop(factory);
        drop(lead);
        println!("{rate}");
    }
    drop(world);
    drop(universe);
    Ok(())
}
