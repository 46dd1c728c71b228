//! `pyenv`: what the Gymnasium bridge costs. Three figures, each against
//! Gymnasium's own Python loop stepping the same env, measured in the same
//! invocation by the set-up venv's Python. Both loops pick actions at
//! (almost) no cost — `(t / 3) % n` for a discrete env — so the figures
//! compare stepping, not action sampling:
//!
//! - `bridge`: `gymnasium:ID` stepped through `PyEnv` from a Rust loop in
//!   this process, vs `env.step` in a Python loop; the difference is the
//!   bridge's overhead per step.
//! - `actor N`: a `random` run over QUIC (one `actor-client` process with
//!   N envs, the learner ingesting without training), env steps/s from its
//!   `summary.toml`, vs one Python env (N = 1) or
//!   `gymnasium.vector.SyncVectorEnv` of N envs.
//! - `builtin N` (when the id is also a built-in): the same actor run with
//!   rlfleet's Rust env, the machinery's cost without Python.

use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::{Action, EnvSource};
use serde::Serialize;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

#[derive(Debug, Serialize)]
struct Row {
    env: String,
    what: String,
    envs: u32,
    rlfleet_steps_per_sec: f64,
    python_steps_per_sec: f64,
    ratio: f64,
    /// rlfleet's µs per env step minus Gymnasium's.
    overhead_us_per_step: f64,
}

/// Gymnasium's own loop: `n` envs (a SyncVectorEnv when n > 1) stepped
/// with actions `(t / 3) % n_actions` for `secs`; env steps per second.
fn python_rate(env: &str, n: u32, secs: f64) -> anyhow::Result<f64> {
    let python = rlfleet_shared::env::python::venv()
        .map(|v| v.join("bin/python"))
        .ok_or_else(|| anyhow::anyhow!("no venv: run scripts/setup.sh"))?;
    let code = format!(
        r#"
import time, gymnasium as gym
n, secs = {n}, {secs}
t = 0
if n == 1:
    env = gym.make("{env}")
    k_actions = int(env.action_space.n)
    env.reset(seed=0)
    def step():
        global t
        t += 1
        _, _, te, tr, _ = env.step((t // 3) % k_actions)
        if te or tr:
            env.reset()
else:
    import numpy as np
    env = gym.vector.SyncVectorEnv([lambda: gym.make("{env}") for _ in range(n)])
    k_actions = int(env.single_action_space.n)
    acts = [np.full(n, a, dtype=np.int64) for a in range(k_actions)]
    env.reset(seed=0)
    def step():
        global t
        t += 1
        env.step(acts[(t // 3) % k_actions])
for _ in range(1000):
    step()
t0, k = time.perf_counter(), 0
while time.perf_counter() - t0 < secs:
    for _ in range(100):
        step()
    k += 100
print(k * n / (time.perf_counter() - t0))
"#
    );
    let out = Command::new(python).args(["-c", &code]).output()?;
    anyhow::ensure!(
        out.status.success(),
        "python: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?.trim().parse()?)
}

/// `gymnasium:ID` stepped through the bridge from Rust, random actions.
fn bridge_rate(id: &str, secs: f64) -> anyhow::Result<f64> {
    let mut env = EnvSource::plain(format!("gymnasium:{id}")).make()?;
    let spec = env.spec().clone();
    let n = spec.action_space.n().expect("a discrete env");
    let mut obs = vec![0f32; spec.obs_dim()];
    env.reset(Some(0), &mut obs);
    let mut t = 0usize;
    let mut step = || {
        t += 1;
        if env.step(Action::Discrete((t / 3) % n), &mut obs).done() {
            env.reset(None, &mut obs);
        }
    };
    for _ in 0..1000 {
        step();
    }
    let (t0, mut k) = (Instant::now(), 0u64);
    while t0.elapsed().as_secs_f64() < secs {
        for _ in 0..100 {
            step();
        }
        k += 100;
    }
    Ok(k as f64 / t0.elapsed().as_secs_f64())
}

/// A `random` run of `env` for `steps` env steps over QUIC, one actor
/// process with `envs` envs; env steps per second from its summary.
fn actor_rate(env: &str, envs: u32, steps: u64, dir: &Path) -> anyhow::Result<f64> {
    let text = format!(
        r#"
name = "pyenv-random-{envs}"
env = "{env}"
agent = "dqn"
workflow = "random"
transport = "quic"
seed = 1
output_dir = "{out}"
[stop]
max_episodes = 1000000
max_env_steps = {steps}
[eval]
period_steps = 100000000
episodes = 1
[distributed]
batch_step_frequency = 64
"#,
        out = dir
            .join(format!("random-{envs}-{}", env.replace(':', "-")))
            .display()
    );
    let cfg = RunConfig::from_toml(&text, "pyenv")?;
    let path = cfg.output_dir.with_extension("toml");
    std::fs::write(&path, cfg.to_resolved_toml())?;
    let exe = std::env::current_exe()?.with_file_name("learner-server");
    let out = Command::new(exe)
        .args(["run", "--no-progress", "--local-actors", "1"])
        .args(["--envs-per-actor", &envs.to_string()])
        .arg(&path)
        .env("RUST_LOG", "warn")
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "learner-server run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: toml::Value = toml::from_str(&std::fs::read_to_string(
        cfg.output_dir.join("summary.toml"),
    )?)?;
    summary["env_steps_per_sec"]
        .as_float()
        .ok_or_else(|| anyhow::anyhow!("no env_steps_per_sec in the summary"))
}

fn row(env: &str, what: &str, envs: u32, ours: f64, python: f64) -> Row {
    let row = Row {
        env: env.to_string(),
        what: what.to_string(),
        envs,
        rlfleet_steps_per_sec: ours,
        python_steps_per_sec: python,
        ratio: ours / python,
        overhead_us_per_step: 1e6 / ours - 1e6 / python,
    };
    println!(
        "{env} {what:<7} envs {envs:>2}: rlfleet {ours:>9.0} steps/s, Gymnasium's loop \
         {python:>9.0} steps/s, ratio {:.2}, overhead {:+.1} us/step",
        row.ratio, row.overhead_us_per_step
    );
    row
}

pub fn run(env: &str, secs: f64, envs: &[u32], steps: u64, out: &Path) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();
    let python = python_rate(env, 1, secs)?;
    rows.push(row(env, "bridge", 1, bridge_rate(env, secs)?, python));
    let builtin = rlfleet_shared::env::spec(env).is_ok();
    for &n in envs {
        let python = python_rate(env, n, secs)?;
        let ours = actor_rate(&format!("gymnasium:{env}"), n, steps, dir.path())?;
        rows.push(row(env, "actor", n, ours, python));
        if builtin {
            // The same actor path with rlfleet's own Rust env: what the
            // machinery costs without Python.
            let native = actor_rate(env, n, steps, dir.path())?;
            rows.push(row(env, "builtin", n, native, python));
        }
    }
    crate::measure::write_json(out, "pyenv", &rows)
}
