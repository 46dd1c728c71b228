//! `rlfleet-bench solve`: time to a confirmed CartPole-v1 solve, as a user
//! gets it. Each config (by default the main job's, DQN `async`, and PPO
//! `sync`) runs as shipped — evaluation target, confirming evaluation, 4
//! local actor processes over loopback QUIC — once per seed, through
//! `learner-server run`. Reported per seed: whether the run stopped on a
//! confirmed target, the env steps and seconds it took; then, from a second
//! run of the same seed without evaluations or target (up to
//! `--free-secs`), where the rolling mean of 20 training episodes first
//! reached the target (the rule by which CleanRL was timed on this machine
//! kind), and the lowest it fell afterwards; then medians and
//! spread. The baseline of the confirmed time is the same config's `single`
//! run of the same seed, measured in the same invocation (agent and env in
//! one thread, no transport), so the ratio says what the distribution costs
//! or gains; CleanRL's rolling-20 times measured on this machine kind are printed beside
//! the rolling-20 figure for orientation (not measured here).

use crate::learn::{Rolling, rolling, spread};
use rlfleet_output::read_episodes;
use rlfleet_shared::config::{RunConfig, TransportKind, WorkflowKind};
use serde::Serialize;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// CleanRL's time to a rolling mean of 20 episodes ≥ 475 on this machine
/// kind (measured with CleanRL's own scripts), by agent.
fn cleanrl_secs(agent: &str) -> Option<f64> {
    match agent {
        "dqn" => Some(33.0),
        "ppo" => Some(39.0),
        _ => None,
    }
}

#[derive(Debug, Serialize)]
pub struct SolveRow {
    config: String,
    workflow: String,
    seed: u64,
    /// The run stopped on its target, confirmed by `eval.confirm_episodes`.
    confirmed: bool,
    confirm_eval_return: Option<f64>,
    env_steps: u64,
    /// From launching `learner-server run` to its exit.
    process_secs: f64,
    /// The run's own wall time (`summary.toml`).
    run_secs: f64,
    /// In the run without a target: env steps and run seconds where the
    /// rolling mean of 20 training episodes first reached the target, and
    /// its lowest value after that (None for the `single` baseline).
    rolling20_first: Option<(u64, f64)>,
    rolling20_min_after: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct SolveSummary {
    config: String,
    workflow: String,
    seeds: u64,
    confirmed: u64,
    /// Median, min, max over the seeds that confirmed.
    run_secs: Option<[f64; 3]>,
    env_steps: Option<[u64; 3]>,
    /// Over the seeds whose rolling mean reached the target.
    rolling20_secs: Option<[f64; 3]>,
    /// Seeds whose rolling mean never fell below 90 % of the target after
    /// reaching it.
    rolling20_held: u64,
    /// The same for the baseline (`single`, same seeds).
    single_run_secs: Option<[f64; 3]>,
    cleanrl_rolling20_secs: Option<f64>,
}

/// Runs `cfg` through `learner-server run` (with `actors` local actors
/// unless it is `single`) and reads its summary.
fn one(cfg: &RunConfig, dir: &Path, actors: usize) -> anyhow::Result<SolveRow> {
    let path = dir.join(format!("{}-{}.toml", cfg.name, cfg.seed));
    std::fs::write(&path, cfg.to_resolved_toml())?;
    let mut cmd = Command::new(crate::workflows::learner_server()?);
    cmd.args(["run", "--no-progress", "--state-dir"])
        .arg(dir.join("state"))
        .arg(&path)
        .env("RUST_LOG", "warn");
    if cfg.workflow != WorkflowKind::Single {
        cmd.args(["--local-actors", &actors.to_string()]);
    }
    let t0 = Instant::now();
    let out = cmd.output()?;
    let process_secs = t0.elapsed().as_secs_f64();
    let s = crate::workflows::finished_summary(
        &out,
        &format!("{} seed {}", cfg.name, cfg.seed),
        &cfg.output_dir,
    )?;
    let float = |k: &str| s.get(k).and_then(toml::Value::as_float);
    let confirm = float("confirm_eval_return").filter(|v| !v.is_nan());
    Ok(SolveRow {
        config: cfg.name.clone(),
        workflow: cfg.workflow.to_string(),
        seed: cfg.seed,
        confirmed: s.get("target_reached").and_then(toml::Value::as_bool) == Some(true),
        confirm_eval_return: confirm,
        env_steps: s
            .get("env_steps")
            .and_then(toml::Value::as_integer)
            .unwrap_or(-1) as u64,
        process_secs,
        run_secs: float("wall_secs").unwrap_or(f64::NAN),
        rolling20_first: None,
        rolling20_min_after: None,
    })
}

/// The run of `cfg` without evaluations or target, for `secs` at most:
/// where its rolling mean of 20 training episodes reaches `target`.
fn free_run(
    cfg: &RunConfig,
    dir: &Path,
    actors: usize,
    target: f64,
    secs: f64,
) -> anyhow::Result<Rolling> {
    let mut free = cfg.clone();
    free.name = format!("{}-free", cfg.name);
    free.output_dir = dir.join(format!("{}-{}", free.name, cfg.seed));
    free.stop.target_eval_return = None;
    if free.workflow.ends_on_episodes() {
        free.stop.max_episodes = Some(1_000_000);
    }
    free.stop.max_wall_secs = Some(secs);
    free.eval.period_steps = u64::MAX / 2;
    one(&free, dir, actors)?;
    let eps = read_episodes(&free.output_dir.join("episodes.csv"))?;
    Ok(rolling(&eps, 20, target))
}

/// The medians of the confirmed runs' seconds and of the rolling-20 times.
fn medians(rows: &[SolveRow]) -> (Option<[f64; 3]>, Option<[f64; 3]>) {
    (
        spread(
            rows.iter()
                .filter(|r| r.confirmed)
                .map(|r| r.run_secs)
                .collect(),
        ),
        spread(
            rows.iter()
                .filter_map(|r| r.rolling20_first.map(|x| x.1))
                .collect(),
        ),
    )
}

pub fn bench(
    configs: &[String],
    seeds: u64,
    actors: usize,
    free_secs: f64,
    out: &Path,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut rows = Vec::new();
    let mut summaries = Vec::new();
    let show = |v: Option<[f64; 3]>| {
        v.map_or("-".into(), |[m, lo, hi]| {
            format!("{m:.1} s [{lo:.1}, {hi:.1}]")
        })
    };
    for name in configs {
        // A shipped config's name, or the path of a config file to try.
        let shipped = if name.ends_with(".toml") {
            RunConfig::load(Path::new(name))?
        } else {
            RunConfig::load(&root.join(format!("config/{name}.toml")))?
        };
        let name = &shipped.name;
        let Some(target) = shipped.stop.target_eval_return else {
            anyhow::bail!("{name} has no evaluation target to solve");
        };
        // The shipped workflow, then `single` as its baseline (a `single`
        // config is its own).
        let single_too = shipped.workflow != WorkflowKind::Single;
        let workflows = [shipped.workflow, WorkflowKind::Single];
        let mut mine = Vec::new();
        let mut base = Vec::new();
        for seed in 1..=seeds {
            for &workflow in &workflows[..1 + usize::from(single_too)] {
                let mut cfg = shipped.clone();
                cfg.seed = seed;
                cfg.workflow = workflow;
                if workflow == WorkflowKind::Single {
                    cfg.transport = TransportKind::Inproc;
                    cfg.stop.max_episodes = None;
                }
                cfg.name = format!("{name}-{workflow}");
                cfg.output_dir = dir.path().join(format!("{}-{seed}", cfg.name));
                let mut row = one(&cfg, dir.path(), actors)?;
                if workflow == shipped.workflow {
                    (row.rolling20_first, row.rolling20_min_after) =
                        free_run(&cfg, dir.path(), actors, target, free_secs)?;
                }
                println!(
                    "{name:<20} {workflow:<7} seed {seed}: {} at {:>7} env steps in {:>5.1} s \
                     (process {:>5.1} s); without a target, rolling 20 >= target at {}, \
                     lowest after {}",
                    if row.confirmed {
                        format!(
                            "confirmed {:.1}",
                            row.confirm_eval_return.unwrap_or(f64::NAN)
                        )
                    } else {
                        "NOT confirmed".into()
                    },
                    row.env_steps,
                    row.run_secs,
                    row.process_secs,
                    row.rolling20_first
                        .map_or("never".into(), |(s, w)| format!("{s} steps, {w:.1} s")),
                    row.rolling20_min_after
                        .map_or("-".into(), |m| format!("{m:.1}")),
                );
                if single_too && workflow == WorkflowKind::Single {
                    base.push(row);
                } else {
                    mine.push(row);
                }
            }
        }
        let (run_secs, rolling20_secs) = medians(&mine);
        let (single_run_secs, _) = medians(if single_too { &base } else { &mine });
        let rolling20_held = mine
            .iter()
            .filter(|r| r.rolling20_min_after.is_some_and(|m| m >= 0.9 * target))
            .count() as u64;
        let confirmed = mine.iter().filter(|r| r.confirmed).count() as u64;
        let ratio = |a: Option<[f64; 3]>, b: Option<[f64; 3]>| match (a, b) {
            (Some(a), Some(b)) => format!("{:.2}×", a[0] / b[0]),
            _ => "-".into(),
        };
        let cleanrl = cleanrl_secs(&shipped.agent.to_string());
        println!(
            "{name}: {confirmed}/{seeds} confirmed; run {} ({} of single's {}); without a target, \
             rolling 20 reached on {}/{seeds} at {}, held (never below 90 %) on {rolling20_held}; \
             CleanRL (measured on this machine kind, rolling 20): {}",
            show(run_secs),
            ratio(run_secs, single_run_secs),
            show(single_run_secs),
            mine.iter().filter(|r| r.rolling20_first.is_some()).count(),
            show(rolling20_secs),
            cleanrl.map_or("-".into(), |c| format!(
                "{c:.0} s{}",
                rolling20_secs.map_or(String::new(), |r| format!(" ({:.2}× of it)", r[0] / c))
            )),
        );
        summaries.push(SolveSummary {
            config: name.clone(),
            workflow: shipped.workflow.to_string(),
            seeds,
            confirmed,
            run_secs,
            env_steps: spread(
                mine.iter()
                    .filter(|r| r.confirmed)
                    .map(|r| r.env_steps)
                    .collect(),
            ),
            rolling20_secs,
            rolling20_held,
            single_run_secs,
            cleanrl_rolling20_secs: cleanrl,
        });
        rows.extend(mine);
        rows.extend(base);
    }
    crate::measure::write_json(
        out,
        "solve",
        &serde_json::json!({ "summary": summaries, "runs": rows }),
    )
}
