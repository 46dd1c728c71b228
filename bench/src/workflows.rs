//! `workflows`: the same DQN CartPole-v1 run — the shipped config of each
//! workflow with the main job's `[dqn]` table (orchestrated keeps its
//! prioritized replay), 4 local actors × 1 env, a fixed number of env steps, no
//! evaluation target — under every workflow, side by side: env steps/s,
//! gradient steps/s, and the share of the learner loop's wall time spent
//! training and waiting for data (from the run's `summary.toml`). The
//! baseline, measured in the same invocation, is `single` (the same agent
//! stepping one env inline, no transport).

use rlfleet_shared::config::{DqnConfig, RunConfig, TransportKind, WorkflowKind};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Serialize)]
pub struct Row {
    pub workflow: String,
    pub transport: String,
    pub env_steps: u64,
    pub train_steps: u64,
    pub wall_secs: f64,
    pub env_steps_per_sec: f64,
    pub train_steps_per_sec: f64,
    /// Learner loop time spent ingesting and training, / wall time.
    pub learner_train_fraction: Option<f64>,
    /// Learner loop time spent waiting for data, / wall time.
    pub learner_wait_fraction: Option<f64>,
    pub batches_dropped: u64,
    /// env steps/s against `single`'s.
    pub ratio_vs_single: f64,
}

pub(crate) fn learner_server() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let b = exe.with_file_name("learner-server");
    anyhow::ensure!(
        b.exists(),
        "{} is not built: cargo build --release",
        b.display()
    );
    Ok(b)
}

/// A shipped config's path: from the working directory (a checkout the
/// binary was carried to), else from the checkout it was built in.
pub(crate) fn shipped(path: &str) -> PathBuf {
    match Path::new(path) {
        p if p.exists() => p.to_path_buf(),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path),
    }
}

/// Runs `cfg` with `learner-server run` and `actors` local actor processes
/// of one env each (its config file and state directory in `dir`); the
/// run's summary.
pub(crate) fn run_local(cfg: &RunConfig, actors: usize, dir: &Path) -> anyhow::Result<toml::Value> {
    run_local_envs(cfg, (actors, 1, 1), dir)
}

/// [`run_local`] with `envs` envs in each actor process, split over
/// `lanes` connections.
pub(crate) fn run_local_envs(
    cfg: &RunConfig,
    actors: (usize, u32, u32),
    dir: &Path,
) -> anyhow::Result<toml::Value> {
    run_local_on(&learner_server()?, cfg, actors, dir)
}

/// [`run_local_envs`] with the `learner-server` at `server` (another
/// build's, beside its `actor-client`).
pub(crate) fn run_local_on(
    server: &Path,
    cfg: &RunConfig,
    (actors, envs, lanes): (usize, u32, u32),
    dir: &Path,
) -> anyhow::Result<toml::Value> {
    let path = dir.join(format!("{}.toml", cfg.name));
    std::fs::write(&path, cfg.to_resolved_toml())?;
    let out = Command::new(server)
        .args([
            "run",
            "--no-progress",
            "--local-actors",
            &actors.to_string(),
            "--envs-per-actor",
            &envs.to_string(),
            "--lanes-per-actor",
            &lanes.to_string(),
        ])
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg(&path)
        .env("RUST_LOG", "warn")
        .output()?;
    finished_summary(&out, &cfg.name, &cfg.output_dir)
}

/// Runs `cfg` through the `learner-server` at `server` as a user does
/// (`run`, with `actors` local actors unless it is `single`; its config
/// file and state directory in `dir`): the run's summary, and the seconds
/// from launching the process to its exit.
pub(crate) fn run_as_user(
    server: &Path,
    cfg: &RunConfig,
    dir: &Path,
    actors: usize,
) -> anyhow::Result<(toml::Value, f64)> {
    let path = dir.join(format!("{}-{}.toml", cfg.name, cfg.seed));
    std::fs::write(&path, cfg.to_resolved_toml())?;
    let mut cmd = Command::new(server);
    cmd.args(["run", "--no-progress", "--state-dir"])
        .arg(dir.join("state"))
        .arg(&path)
        .env("RUST_LOG", "warn");
    if cfg.workflow != WorkflowKind::Single {
        cmd.args(["--local-actors", &actors.to_string()]);
    }
    let t0 = std::time::Instant::now();
    let out = cmd.output()?;
    let secs = t0.elapsed().as_secs_f64();
    let what = format!("{} seed {} ({})", cfg.name, cfg.seed, server.display());
    Ok((finished_summary(&out, &what, &cfg.output_dir)?, secs))
}

/// The `summary.toml` a `learner-server` process (`out`) left in
/// `output_dir`, once it has exited successfully; `what` names the run in
/// the error otherwise.
pub(crate) fn finished_summary(
    out: &std::process::Output,
    what: &str,
    output_dir: &Path,
) -> anyhow::Result<toml::Value> {
    anyhow::ensure!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(toml::from_str(&std::fs::read_to_string(
        output_dir.join("summary.toml"),
    )?)?)
}

/// The shipped config of `workflow`, made to run exactly `steps` env steps.
fn config(
    workflow: &str,
    steps: u64,
    transport: TransportKind,
    dir: &Path,
) -> anyhow::Result<RunConfig> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cfg = RunConfig::load(&root.join(format!("config/cartpole-dqn-{workflow}.toml")))?;
    // The main job's [dqn] table for every workflow (orchestrated keeps its
    // prioritized replay), so that the rows differ by workflow only.
    let main = RunConfig::load(&root.join("config/cartpole-dqn-async.toml"))?;
    cfg.dqn = DqnConfig {
        prioritized: cfg.dqn.prioritized,
        per_alpha: cfg.dqn.per_alpha,
        per_beta: cfg.dqn.per_beta,
        per_eps: cfg.dqn.per_eps,
        ..main.dqn
    };
    cfg.output_dir = dir.join(workflow);
    cfg.stop = Default::default();
    cfg.stop.max_env_steps = Some(steps);
    if cfg.workflow.ends_on_episodes() {
        cfg.stop.max_episodes = Some(1_000_000);
    }
    cfg.eval.period_steps = u64::MAX / 2;
    cfg.checkpoint.period_steps = 0;
    if cfg.workflow != WorkflowKind::Single {
        cfg.transport = transport;
    }
    Ok(cfg)
}

fn measure(cfg: &RunConfig, dir: &Path) -> anyhow::Result<Row> {
    let path = dir.join(format!("{}.toml", cfg.workflow));
    std::fs::write(&path, cfg.to_resolved_toml())?;
    let out = Command::new(learner_server()?)
        .args(["run", "--no-progress", "--local-actors", "4"])
        .arg(&path)
        .env("RUST_LOG", "warn")
        .output()?;
    let s = finished_summary(&out, &cfg.workflow.to_string(), &cfg.output_dir)?;
    let int = |v: Option<&toml::Value>| v.and_then(toml::Value::as_integer).unwrap_or(0) as u64;
    let float = |v: Option<&toml::Value>| v.and_then(toml::Value::as_float).unwrap_or(0.0);
    let wall = float(s.get("wall_secs"));
    let learner = s.get("learner");
    let share = |key: &str| learner.map(|l| float(l.get(key)) / wall);
    let dropped = learner
        .and_then(|l| l.get("batches_dropped"))
        .and_then(toml::Value::as_table)
        .map_or(0, |t| t.values().map(|v| int(Some(v))).sum());
    let env_steps = int(s.get("env_steps"));
    let train_steps = int(s.get("train_steps"));
    Ok(Row {
        workflow: cfg.workflow.to_string(),
        transport: if cfg.workflow == WorkflowKind::Single {
            "-".into()
        } else {
            cfg.transport.to_string()
        },
        env_steps,
        train_steps,
        wall_secs: wall,
        env_steps_per_sec: env_steps as f64 / wall,
        train_steps_per_sec: train_steps as f64 / wall,
        learner_train_fraction: share("train_secs"),
        learner_wait_fraction: share("wait_secs"),
        batches_dropped: dropped,
        ratio_vs_single: 0.0,
    })
}

/// Runs `single` and then each of `workflows` for `steps` env steps.
pub fn run(steps: u64, workflows: &[String], transport: TransportKind) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();
    for wf in std::iter::once("single").chain(workflows.iter().map(String::as_str)) {
        let cfg = config(wf, steps, transport, dir.path())?;
        let row = measure(&cfg, dir.path())?;
        println!(
            "{:<18} {:>6} {:>7} env steps in {:>6.1} s: {:>7.0} env steps/s, {:>5.0} train steps/s, learner training {:>4} waiting {:>4}, {} batches dropped",
            row.workflow,
            row.transport,
            row.env_steps,
            row.wall_secs,
            row.env_steps_per_sec,
            row.train_steps_per_sec,
            row.learner_train_fraction
                .map_or("-".into(), |f| format!("{:.0}%", f * 100.0)),
            row.learner_wait_fraction
                .map_or("-".into(), |f| format!("{:.0}%", f * 100.0)),
            row.batches_dropped
        );
        rows.push(row);
    }
    let base = rows[0].env_steps_per_sec;
    for r in &mut rows {
        r.ratio_vs_single = r.env_steps_per_sec / base;
    }
    println!("env steps/s vs single:");
    for r in &rows {
        println!("  {:<18} {:.2}", r.workflow, r.ratio_vs_single);
    }
    Ok(rows)
}
