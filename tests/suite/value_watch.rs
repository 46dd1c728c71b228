//! A DQN run whose Q-values diverge says so while it plays on: a warning
//! in its log (once per streak) and `rlfleet_value_divergences_total` in
//! its metrics, `train/q_max` past `train/q_bound` beside it; the same
//! run with the shipped settings stays within the bound and says nothing.

use rlfleet_shared::config::{RunConfig, TransportKind};
use rlfleet_tests::{binary, output_within, workspace_root};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The main job's config over `inproc` with 2 local actors for
/// `env_steps`, no target, `sets` on top; its stderr and `metrics.prom`.
fn run(dir: &Path, name: &str, env_steps: u64, sets: &[&str]) -> (String, String) {
    let mut cfg =
        RunConfig::load(&workspace_root().join("config/cartpole-dqn-async.toml")).unwrap();
    cfg.transport = TransportKind::Inproc;
    cfg.output_dir = dir.join(name);
    cfg.stop = Default::default();
    cfg.stop.max_env_steps = Some(env_steps);
    cfg.stop.max_episodes = Some(1 << 30);
    cfg.eval.period_steps = 1 << 40;
    cfg.checkpoint.period_steps = 0;
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(&config, cfg.to_resolved_toml()).unwrap();
    let mut cmd = Command::new(binary("learner-server"));
    cmd.args(["run", "--no-progress", "--local-actors", "2", "--state-dir"])
        .arg(dir.join("state"));
    for s in sets {
        cmd.args(["--set", s]);
    }
    cmd.arg(&config).env("RUST_LOG", "warn");
    let out = output_within(&mut cmd, Duration::from_secs(180), "learner-server run");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let metrics = std::fs::read_to_string(dir.join(name).join("metrics.prom")).unwrap();
    (err, metrics)
}

/// The value of the one series `name` in a Prometheus text (it must be
/// there).
fn series(metrics: &str, name: &str) -> f64 {
    let values: Vec<f64> = metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
        .collect();
    assert_eq!(values.len(), 1, "{name} in {metrics}");
    values[0]
}

#[test]
fn diverging_q_values_are_said_and_counted_and_sound_ones_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let (err, metrics) = run(dir.path(), "sound", 12_000, &[]);
    assert!(!err.contains("Q-values diverge"), "{err}");
    assert_eq!(series(&metrics, "rlfleet_value_divergences_total"), 0.0);
    let q = series(&metrics, "rlfleet_q_value_max");
    assert!(q > 0.0 && q <= 2.0 / (1.0 - 0.99), "{q}");

    let (err, metrics) = run(dir.path(), "diverging", 12_000, DIVERGING);
    let said = err.matches("Q-values diverge").count();
    assert!(said >= 1, "{err}");
    assert_eq!(
        series(&metrics, "rlfleet_value_divergences_total"),
        said as f64
    );
    let q = series(&metrics, "rlfleet_q_value_max");
    assert!(q.is_nan() || q > 2.0 / (1.0 - 0.99), "{q}");
}

/// Settings under which the main job's Q-values run away: a learning rate
/// 100× the shipped one, no target network to hold the targets still, and
/// the targets not held to the return bound.
const DIVERGING: &[&str] = &[
    "dqn.lr=0.05",
    "dqn.lr_anneal_steps=0",
    "dqn.target_update_interval=1",
    "dqn.bound_targets=false",
];
