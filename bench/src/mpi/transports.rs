//! `mpi-transports`: `async` and `rma` over MPI against over QUIC, the
//! transport alone (DQN never trains).

use super::mpirun;
use rlfleet_shared::config::{RunConfig, TransportKind};
use serde::Serialize;
use std::path::Path;
use std::process::Command;

/// One (workflow, transport) run of the transport benchmark.
#[derive(Debug, Serialize)]
pub struct TransportRow {
    pub workflow: String,
    pub transport: String,
    pub env_steps: u64,
    pub transitions_received: u64,
    pub wall_secs: f64,
    pub env_steps_per_sec: f64,
    pub transitions_per_sec: f64,
    /// env steps/s against QUIC's for the same workflow.
    pub ratio_vs_quic: f64,
}

pub(super) fn transport_config(
    workflow: &str,
    steps: u64,
    dir: &Path,
) -> anyhow::Result<RunConfig> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cfg = RunConfig::load(&root.join(format!("config/cartpole-dqn-{workflow}.toml")))?;
    cfg.stop = Default::default();
    cfg.stop.max_env_steps = Some(steps);
    cfg.stop.max_episodes = Some(1_000_000);
    cfg.eval.period_steps = u64::MAX / 2;
    cfg.checkpoint.period_steps = 0;
    cfg.dqn.learning_starts = steps * 10;
    cfg.output_dir = dir.join(workflow);
    Ok(cfg)
}

pub(super) fn transport_run(
    cfg: &RunConfig,
    dir: &Path,
    actors: usize,
) -> anyhow::Result<TransportRow> {
    let path = dir.join(format!("{}-{}.toml", cfg.workflow, cfg.transport));
    std::fs::write(&path, cfg.to_resolved_toml())?;
    let bin = std::env::current_exe()?.with_file_name("learner-server");
    let learners = if cfg.workflow.is_multi_learner() {
        2
    } else {
        1
    };
    let out = if cfg.transport == TransportKind::Mpi {
        mpirun()
            .args(["-n", &learners.to_string()])
            .arg(&bin)
            .arg("mpi")
            .arg(&path)
            .args([":", "-n", &actors.to_string()])
            .arg(bin.with_file_name("actor-client"))
            .arg("mpi")
            .env("RUST_LOG", "warn")
            .output()?
    } else {
        Command::new(&bin)
            .args([
                "run",
                "--no-progress",
                "--local-actors",
                &actors.to_string(),
            ])
            .arg(&path)
            .env("RUST_LOG", "warn")
            .output()?
    };
    let s = crate::workflows::finished_summary(
        &out,
        &format!("{} over {}", cfg.workflow, cfg.transport),
        &cfg.output_dir,
    )?;
    let wall = s["wall_secs"].as_float().unwrap_or(0.0);
    let env_steps = s["env_steps"].as_integer().unwrap_or(0) as u64;
    let prom = std::fs::read_to_string(cfg.output_dir.join("metrics.prom"))?;
    // The run's series (labelled with its name and id).
    let transitions = crate::wire::metric(&prom, "rlfleet_transitions_ingested_total")
        .ok_or_else(|| anyhow::anyhow!("no rlfleet_transitions_ingested_total in metrics.prom"))?
        as u64;
    Ok(TransportRow {
        workflow: cfg.workflow.to_string(),
        transport: cfg.transport.to_string(),
        env_steps,
        transitions_received: transitions,
        wall_secs: wall,
        env_steps_per_sec: env_steps as f64 / wall,
        transitions_per_sec: transitions as f64 / wall,
        ratio_vs_quic: 0.0,
    })
}

/// `async` and `rma`, each over QUIC then MPI, with `actors` actors.
pub fn transports(steps: u64, actors: usize, out: &Path) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();
    for workflow in ["async", "rma"] {
        let mut quic = 0.0;
        for transport in [TransportKind::Quic, TransportKind::Mpi] {
            let mut cfg = transport_config(workflow, steps, dir.path())?;
            cfg.transport = transport;
            cfg.output_dir = dir.path().join(format!("{workflow}-{transport}"));
            let mut row = transport_run(&cfg, dir.path(), actors)?;
            if transport == TransportKind::Quic {
                quic = row.env_steps_per_sec;
            }
            row.ratio_vs_quic = row.env_steps_per_sec / quic;
            println!(
                "{:<6} over {:<4}: {:>7} env steps in {:>5.1} s: {:>7.0} env steps/s, {:>7.0} transitions/s received, {:.2}× QUIC",
                row.workflow,
                row.transport,
                row.env_steps,
                row.wall_secs,
                row.env_steps_per_sec,
                row.transitions_per_sec,
                row.ratio_vs_quic
            );
            rows.push(row);
        }
    }
    crate::measure::write_json(out, "mpi_transports", &rows)
}
