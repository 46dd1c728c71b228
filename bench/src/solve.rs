//! `rlfleet-bench solve`: time to a confirmed CartPole-v1 solve, as a user
//! gets it, and whether the run stays solved. Each config (by default the
//! main job's, DQN `async`, and PPO `sync`) runs as shipped — evaluation
//! target, confirming evaluation, 4 local actor processes over loopback
//! QUIC — once per seed, through `learner-server run`. Reported per seed:
//! whether the run stopped on a confirmed target, the env steps and seconds
//! it took; then, from a second run of the same seed without evaluations or
//! target (for `--free-secs`), where the rolling mean of 20 training
//! episodes first reached the target, the lowest it fell afterwards and the
//! mean of its last 100 episodes; then medians and spread. The baseline of
//! the confirmed time is the same config's `single` run of the same seed,
//! measured in the same invocation (agent and env in one thread, no
//! transport), so the ratio says what the distribution costs or gains.
//! A DQN config's free runs have CleanRL's DQN (`bench/python/cleanrl_dqn.py`,
//! CleanRL's default settings) beside them: the same seeds, the same
//! seconds, in the same invocation, measured by the same rules.

use crate::learn::{Rolling, rolling, spread};
use rlfleet_output::{EpisodeRecord, read_episodes};
use rlfleet_shared::config::{AgentKind, RunConfig, TransportKind, WorkflowKind};
use serde::Serialize;
use std::path::Path;

/// CleanRL's DQN for CartPole-v1 (embedded, so the bench runs from any
/// directory).
const CLEANRL_DQN: &str = include_str!("../python/cleanrl_dqn.py");

/// CleanRL's PPO time to a rolling mean of 20 episodes ≥ 475 on this
/// machine kind, measured once with CleanRL's own script (not rerun here).
const CLEANRL_PPO_SECS: f64 = 39.0;

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
    /// The mean return of the last 100 training episodes of that run.
    last100: Option<f64>,
}

/// CleanRL's DQN on one seed for `--free-secs`, read by the same rules.
#[derive(Debug, Serialize)]
pub struct CleanRlRow {
    seed: u64,
    env_steps: u64,
    episodes: usize,
    rolling20_first: Option<(u64, f64)>,
    rolling20_min_after: Option<f64>,
    last100: Option<f64>,
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
    /// Median, min, max of the free runs' last 100 training episodes, and
    /// the seeds where that mean is at least the target.
    last100: Option<[f64; 3]>,
    last100_at_target: u64,
    /// CleanRL beside it: measured here (DQN), or the earlier figure (PPO).
    cleanrl_rolling20_secs: Option<[f64; 3]>,
    cleanrl_rolling20_reached: Option<u64>,
    cleanrl_last100: Option<[f64; 3]>,
    cleanrl_last100_at_target: Option<u64>,
}

/// Runs `cfg` through `learner-server run` (with `actors` local actors
/// unless it is `single`) and reads its summary.
fn one(cfg: &RunConfig, dir: &Path, actors: usize) -> anyhow::Result<SolveRow> {
    let server = crate::workflows::learner_server()?;
    let (s, process_secs) = crate::workflows::run_as_user(&server, cfg, dir, actors)?;
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
        last100: None,
    })
}

/// The mean return of the last 100 episodes (of all, if fewer).
fn last100(eps: &[EpisodeRecord]) -> Option<f64> {
    let tail = &eps[eps.len().saturating_sub(100)..];
    (!tail.is_empty()).then(|| tail.iter().map(|e| e.ret).sum::<f64>() / tail.len() as f64)
}

/// The run of `cfg` without evaluations or target, for `secs` at most:
/// where its rolling mean of 20 training episodes reaches `target`, and
/// the mean of its last 100 episodes.
fn free_run(
    cfg: &RunConfig,
    dir: &Path,
    actors: usize,
    target: f64,
    secs: f64,
) -> anyhow::Result<(Rolling, Option<f64>)> {
    let mut free = cfg.clone();
    free.name = format!("{}-free", cfg.name);
    free.output_dir = dir.join(format!("{}-{}", free.name, cfg.seed));
    free.stop.target_eval_return = None;
    if free.workflow.ends_on_episodes() {
        free.stop.max_episodes = Some(1_000_000);
    }
    // Only the seconds end it: not the config's step limit either.
    free.stop.max_env_steps = None;
    free.stop.max_wall_secs = Some(secs);
    free.eval.period_steps = u64::MAX / 2;
    one(&free, dir, actors)?;
    let eps = read_episodes(&free.output_dir.join("episodes.csv"))?;
    Ok((rolling(&eps, 20, target), last100(&eps)))
}

/// CleanRL's DQN on `seed` for `secs`, read as [`free_run`] reads ours.
fn cleanrl_dqn(seed: u64, secs: f64, target: f64) -> anyhow::Result<CleanRlRow> {
    let lines: Vec<crate::reference::Episode> =
        crate::torch_python::json_lines(CLEANRL_DQN, &[seed.to_string(), secs.to_string()])
            .map_err(|e| anyhow::anyhow!("CleanRL's DQN, seed {seed}: {e}"))?;
    // As `episodes.csv` rows, for the rules ours are read by (a CartPole
    // episode's length is its return).
    let eps: Vec<EpisodeRecord> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| EpisodeRecord {
            episode: i as u64,
            actor: 0,
            ret: l.ret,
            length: l.ret as u32,
            wall_secs: l.secs,
            policy_version: 0,
            env_steps: l.frames,
        })
        .collect();
    let (rolling20_first, rolling20_min_after) = rolling(&eps, 20, target);
    Ok(CleanRlRow {
        seed,
        env_steps: eps.last().map_or(0, |e| e.env_steps),
        episodes: eps.len(),
        rolling20_first,
        rolling20_min_after,
        last100: last100(&eps),
    })
}

/// Median, min and max of the confirmed runs' seconds.
fn confirmed_secs(rows: &[SolveRow]) -> Option<[f64; 3]> {
    spread(
        rows.iter()
            .filter(|r| r.confirmed)
            .map(|r| r.run_secs)
            .collect(),
    )
}

/// Whether CleanRL's DQN is the peer of `cfg` (a DQN config on CartPole).
fn cleanrl_peer(cfg: &RunConfig) -> bool {
    cfg.agent == AgentKind::Dqn && cfg.env == "CartPole-v1"
}

/// `rolling20_first`'s seconds and the last-100 means of `rows`.
fn tails(
    rows: impl Iterator<Item = (Option<(u64, f64)>, Option<f64>)> + Clone,
    target: f64,
) -> (Option<[f64; 3]>, u64, Option<[f64; 3]>, u64) {
    let secs: Vec<f64> = rows.clone().filter_map(|r| r.0.map(|x| x.1)).collect();
    let reached = secs.len() as u64;
    let last: Vec<f64> = rows.filter_map(|r| r.1).collect();
    let at_target = last.iter().filter(|&&m| m >= target).count() as u64;
    (spread(secs), reached, spread(last), at_target)
}

pub fn bench(
    configs: &[String],
    seeds: u64,
    actors: usize,
    free_secs: f64,
    cleanrl: bool,
    out: &Path,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut rows = Vec::new();
    let mut peers = Vec::new();
    let mut summaries = Vec::new();
    let show = |v: Option<[f64; 3]>, unit: &str| {
        v.map_or("-".into(), |[m, lo, hi]| {
            format!("{m:.1}{unit} [{lo:.1}, {hi:.1}]")
        })
    };
    let rolling_text = |r: Option<(u64, f64)>, min: Option<f64>, last: Option<f64>| {
        format!(
            "rolling 20 >= target at {}, lowest after {}, last 100 {}",
            r.map_or("never".into(), |(s, w)| format!("{s} steps, {w:.1} s")),
            min.map_or("-".into(), |m| format!("{m:.1}")),
            last.map_or("-".into(), |m| format!("{m:.1}")),
        )
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
        let with_cleanrl = cleanrl && cleanrl_peer(&shipped);
        // The shipped workflow, then `single` as its baseline (a `single`
        // config is its own).
        let single_too = shipped.workflow != WorkflowKind::Single;
        let workflows = [shipped.workflow, WorkflowKind::Single];
        let mut mine = Vec::new();
        let mut base = Vec::new();
        let mut theirs = Vec::new();
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
                    ((row.rolling20_first, row.rolling20_min_after), row.last100) =
                        free_run(&cfg, dir.path(), actors, target, free_secs)?;
                }
                println!(
                    "{name:<20} {workflow:<7} seed {seed}: {} at {:>7} env steps in {:>5.1} s \
                     (process {:>5.1} s); without a target, {}",
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
                    rolling_text(row.rolling20_first, row.rolling20_min_after, row.last100),
                );
                if single_too && workflow == WorkflowKind::Single {
                    base.push(row);
                } else {
                    mine.push(row);
                }
            }
            if with_cleanrl {
                let peer = cleanrl_dqn(seed, free_secs, target)?;
                println!(
                    "{:<20} {:<7} seed {seed}: {} env steps, {} episodes in {free_secs:.0} s; {}",
                    "CleanRL DQN",
                    "",
                    peer.env_steps,
                    peer.episodes,
                    rolling_text(peer.rolling20_first, peer.rolling20_min_after, peer.last100),
                );
                theirs.push(peer);
            }
        }
        let run_secs = confirmed_secs(&mine);
        let single_run_secs = confirmed_secs(if single_too { &base } else { &mine });
        let (rolling20_secs, rolling20_reached, last100, last100_at_target) =
            tails(mine.iter().map(|r| (r.rolling20_first, r.last100)), target);
        let rolling20_held = mine
            .iter()
            .filter(|r| r.rolling20_min_after.is_some_and(|m| m >= 0.9 * target))
            .count() as u64;
        let confirmed = mine.iter().filter(|r| r.confirmed).count() as u64;
        let ratio = |a: Option<[f64; 3]>, b: Option<[f64; 3]>| match (a, b) {
            (Some(a), Some(b)) => format!("{:.2}×", a[0] / b[0]),
            _ => "-".into(),
        };
        let (c_secs, c_reached, c_last, c_at) = tails(
            theirs.iter().map(|r| (r.rolling20_first, r.last100)),
            target,
        );
        // CleanRL's PPO was timed once, earlier; its DQN is run here.
        let cleanrl_secs = match shipped.agent {
            _ if with_cleanrl => c_secs,
            AgentKind::Ppo => Some([CLEANRL_PPO_SECS; 3]),
            _ => None,
        };
        let peer = if with_cleanrl {
            format!(
                "CleanRL DQN, same seeds and seconds: rolling 20 reached on {c_reached}/{seeds} at \
                 {} ({} of it), last 100 {} (>= target on {c_at}/{seeds})",
                show(c_secs, " s"),
                ratio(rolling20_secs, c_secs),
                show(c_last, ""),
            )
        } else if shipped.agent == AgentKind::Ppo {
            format!(
                "CleanRL PPO (measured earlier on this machine kind, rolling 20): {CLEANRL_PPO_SECS:.0} s"
            )
        } else {
            "no CleanRL run".into()
        };
        println!(
            "{name}: {confirmed}/{seeds} confirmed; run {} ({} of single's {}); without a target, \
             rolling 20 reached on {rolling20_reached}/{seeds} at {}, held (never below 90 %) on \
             {rolling20_held}, last 100 {} (>= target on {last100_at_target}/{seeds}); {peer}",
            show(run_secs, " s"),
            ratio(run_secs, single_run_secs),
            show(single_run_secs, " s"),
            show(rolling20_secs, " s"),
            show(last100, ""),
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
            last100,
            last100_at_target,
            cleanrl_rolling20_secs: cleanrl_secs,
            cleanrl_rolling20_reached: with_cleanrl.then_some(c_reached),
            cleanrl_last100: c_last,
            cleanrl_last100_at_target: with_cleanrl.then_some(c_at),
        });
        rows.extend(mine);
        rows.extend(base);
        peers.extend(theirs);
    }
    crate::measure::write_json(
        out,
        "solve",
        &serde_json::json!({ "summary": summaries, "runs": rows, "cleanrl": peers }),
    )
}
