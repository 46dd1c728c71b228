//! `rlfleet-bench ab`: a change to learning, measured against the build
//! before it. Each shipped config runs once per seed under this build's
//! `learner-server` and under another build's (`--before DIR`, the
//! directory of its `learner-server` and `actor-client`), in turns, in one
//! invocation, as a user runs it (`learner-server run`, `--local-actors`
//! unless `single`). Reported per seed: whether the run stopped on its
//! confirmed target, and the env steps it took; per config, how many
//! seeds confirmed on each side and the median env steps of those that
//! did, this build's over the other's.

use crate::learn::spread;
use rlfleet_shared::config::RunConfig;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One run: a config, a seed, a build.
#[derive(Debug, Serialize)]
pub struct AbRun {
    config: String,
    seed: u64,
    /// `before` (the other build) or `after` (this one).
    build: &'static str,
    /// Stopped on its target, confirmed by `eval.confirm_episodes`.
    confirmed: bool,
    confirm_eval_return: Option<f64>,
    env_steps: u64,
    run_secs: f64,
}

/// One build's seeds of a config.
#[derive(Debug, Serialize)]
pub struct Side {
    /// Seeds that stopped on their confirmed target.
    confirmed: u64,
    /// Their env steps: median, min, max.
    env_steps: Option<[u64; 3]>,
}

#[derive(Debug, Serialize)]
pub struct AbSummary {
    config: String,
    seeds: u64,
    before: Side,
    after: Side,
    /// The medians' ratio, after ÷ before (below 1: fewer steps now).
    ratio: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    before: String,
    runs: &'a [AbRun],
    summaries: &'a [AbSummary],
}

/// Runs `cfg` with the `learner-server` at `server` and reads its summary.
fn one(
    (build, server): (&'static str, &Path),
    cfg: &RunConfig,
    dir: &Path,
    actors: usize,
) -> anyhow::Result<AbRun> {
    let (s, _) = crate::workflows::run_as_user(server, cfg, dir, actors)?;
    let float = |k: &str| s.get(k).and_then(toml::Value::as_float);
    Ok(AbRun {
        config: cfg.name.clone(),
        seed: cfg.seed,
        build,
        confirmed: s.get("target_reached").and_then(toml::Value::as_bool) == Some(true),
        confirm_eval_return: float("confirm_eval_return").filter(|v| !v.is_nan()),
        env_steps: s
            .get("env_steps")
            .and_then(toml::Value::as_integer)
            .unwrap_or(-1) as u64,
        run_secs: float("wall_secs").unwrap_or(f64::NAN),
    })
}

/// The seeds of `runs` of `build` that confirmed, and their env steps.
fn side(runs: &[AbRun], build: &str) -> Side {
    let steps: Vec<u64> = runs
        .iter()
        .filter(|r| r.build == build && r.confirmed)
        .map(|r| r.env_steps)
        .collect();
    Side {
        confirmed: steps.len() as u64,
        env_steps: spread(steps),
    }
}

pub fn bench(
    other: &Path,
    configs: &[String],
    seeds: u64,
    actors: usize,
    name: &str,
    out: &Path,
) -> anyhow::Result<()> {
    let servers: [(&'static str, PathBuf); 2] = [
        ("before", other.join("learner-server")),
        ("after", crate::workflows::learner_server()?),
    ];
    for (_, s) in &servers {
        anyhow::ensure!(s.exists(), "{} is not built", s.display());
    }
    let dir = tempfile::tempdir()?;
    let mut runs = Vec::new();
    let mut summaries = Vec::new();
    for config in configs {
        // From its absolute path, so that its `python_path` stays right
        // when the run's copy is written elsewhere.
        let path = crate::workflows::shipped(&format!("config/{config}.toml"));
        let shipped = RunConfig::load(&std::fs::canonicalize(path)?)?;
        anyhow::ensure!(
            shipped.stop.target_eval_return.is_some(),
            "{config} has no evaluation target to confirm"
        );
        let first = runs.len();
        for seed in 1..=seeds {
            for (build, server) in &servers {
                let mut cfg = shipped.clone();
                cfg.seed = seed;
                cfg.output_dir = dir.path().join(format!("{config}-{seed}-{build}"));
                let run = one((build, server), &cfg, dir.path(), actors)?;
                println!(
                    "{config} seed {seed} {build}: {} at {} env steps ({:.0} s)",
                    if run.confirmed {
                        "confirmed"
                    } else {
                        "not confirmed"
                    },
                    run.env_steps,
                    run.run_secs
                );
                runs.push(run);
            }
        }
        let mine = &runs[first..];
        let (before, after) = (side(mine, "before"), side(mine, "after"));
        let ratio = before
            .env_steps
            .zip(after.env_steps)
            .map(|(b, a)| a[0] as f64 / b[0] as f64);
        let median = |s: &Side| s.env_steps.map_or("-".into(), |s| s[0].to_string());
        println!(
            "{config}: confirmed {}/{seeds} before, {}/{seeds} after; \
             median env steps {} before, {} after: {} after ÷ before",
            before.confirmed,
            after.confirmed,
            median(&before),
            median(&after),
            ratio.map_or("-".into(), |r| format!("{r:.2}")),
        );
        summaries.push(AbSummary {
            config: config.clone(),
            seeds,
            before,
            after,
            ratio,
        });
        // What is measured so far, should a later config fail.
        let report = Report {
            before: other.display().to_string(),
            runs: &runs,
            summaries: &summaries,
        };
        crate::measure::write_json(out, name, &report)?;
    }
    Ok(())
}
