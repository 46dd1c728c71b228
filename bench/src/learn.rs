//! `rlfleet-bench learn`: the longer learning benchmark. Each agent's
//! shipped `single` config runs, without its evaluation target, for the
//! env-step budget rl-baselines3-zoo trained that agent on that env with;
//! reported are the final policy's evaluation mean (`eval_episodes` greedy
//! episodes), the best evaluation, and the env steps at which an
//! evaluation first reached the learning test's threshold — beside the
//! zoo's published figure (benchmark.md of DLR-RM/rl-baselines3-zoo, one
//! run per agent, deterministic policy), the baseline this benchmark
//! compares against.

use rlfleet_output::{EpisodeRecord, read_episodes, read_evals};
use rlfleet_run::workflows::{self, RunOptions};
use rlfleet_shared::config::RunConfig;
use serde::Serialize;
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// (config, zoo budget, zoo mean reward, zoo std, the learning test's
/// threshold).
pub const CASES: &[(&str, u64, f64, f64, f64)] = &[
    ("cartpole-ppo-single", 100_000, 500.0, 0.0, 475.0),
    ("pendulum-ppo-single", 100_000, -172.225, 104.159, -400.0),
    ("acrobot-dqn-single", 100_000, -76.639, 11.752, -100.0),
    ("cartpole-dqn-single", 50_000, 500.0, 0.0, 475.0),
    ("cartpole-a2c-single", 500_000, 500.0, 0.0, 475.0),
    ("pendulum-ddpg-single", 20_000, -152.099, 94.282, -300.0),
    ("pendulum-td3-single", 20_000, -151.855, 90.227, -250.0),
    ("pendulum-sac-single", 20_000, -156.995, 88.714, -250.0),
];

#[derive(Debug, Serialize)]
pub struct LearnRow {
    config: String,
    seed: u64,
    agent: String,
    env: String,
    env_steps: u64,
    wall_secs: f64,
    final_eval: Option<f64>,
    best_eval: Option<f64>,
    threshold: f64,
    /// Env steps of the first evaluation at or above the threshold.
    steps_to_threshold: Option<u64>,
    zoo_mean: f64,
    zoo_std: f64,
    /// final_eval - zoo_mean.
    vs_zoo: Option<f64>,
    /// Mean return of the last 20 training episodes (does it stay up?).
    last20_train_mean: Option<f64>,
    /// Env steps and wall seconds at which the rolling mean of 20 training
    /// episodes first reached the threshold (the rule CleanRL's and RLlib's
    /// published times to 475 were taken by).
    rolling20_first: Option<(u64, f64)>,
    /// The lowest rolling mean of 20 training episodes after that: whether
    /// the run stays solved once it is.
    rolling20_min_after: Option<f64>,
}

/// Where a rolling mean first reached a threshold (env steps, wall
/// seconds), and its minimum from then on.
pub(crate) type Rolling = (Option<(u64, f64)>, Option<f64>);

/// [`Rolling`] for the mean of `window` training returns and `threshold`.
pub(crate) fn rolling(eps: &[EpisodeRecord], window: usize, threshold: f64) -> Rolling {
    if eps.len() < window {
        return (None, None);
    }
    let means: Vec<f64> = eps
        .windows(window)
        .map(|w| w.iter().map(|e| e.ret).sum::<f64>() / window as f64)
        .collect();
    let Some(first) = means.iter().position(|&m| m >= threshold) else {
        return (None, None);
    };
    let at = &eps[first + window - 1];
    let min_after = means[first..].iter().copied().fold(f64::INFINITY, f64::min);
    (Some((at.env_steps, at.wall_secs)), Some(min_after))
}

/// One config over its seeds.
#[derive(Debug, Serialize)]
pub struct SeedsRow {
    config: String,
    seeds: u64,
    threshold: f64,
    budget: u64,
    /// Seeds whose evaluation reached the threshold within the budget.
    reached: u64,
    /// Env steps each run went on for (the budget, or a multiple of it).
    run_steps: u64,
    /// Seeds whose rolling mean of 20 training episodes reached the
    /// threshold, and of those, the ones that never fell below 90 % of it
    /// afterwards.
    rolling20_reached: u64,
    rolling20_held: u64,
    /// Over the seeds that reached it: median, min, max.
    steps_to_threshold: Option<[u64; 3]>,
    /// Over every seed: median, min, max.
    final_eval: Option<[f64; 3]>,
    last20_train_mean: Option<[f64; 3]>,
    wall_secs: [f64; 3],
}

/// Median (the lower of the middle two), min and max.
pub(crate) fn spread<T: Copy + PartialOrd>(mut v: Vec<T>) -> Option<[T; 3]> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    Some([v[(v.len() - 1) / 2], v[0], v[v.len() - 1]])
}

pub fn bench(
    only: &[String],
    eval_episodes: u32,
    seeds: u64,
    steps_factor: f64,
    out: &Path,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();
    let mut summaries = Vec::new();
    for &(name, budget, zoo_mean, zoo_std, threshold) in CASES {
        if !only.is_empty() && !only.iter().any(|o| name.contains(o.as_str())) {
            continue;
        }
        let first = rows.len();
        for seed in 1..=seeds {
            let row = one(
                name,
                seed,
                eval_episodes,
                dir.path(),
                (budget, zoo_mean, zoo_std, threshold),
                steps_factor,
            )?;
            rows.push(row);
        }
        let runs = &rows[first..];
        let s = SeedsRow {
            config: name.to_string(),
            seeds,
            threshold,
            budget,
            reached: runs
                .iter()
                .filter(|r| r.steps_to_threshold.is_some_and(|s| s <= budget))
                .count() as u64,
            run_steps: run_steps(budget, steps_factor),
            rolling20_reached: runs.iter().filter(|r| r.rolling20_first.is_some()).count() as u64,
            rolling20_held: runs
                .iter()
                .filter(|r| r.rolling20_min_after.is_some_and(|m| held(m, threshold)))
                .count() as u64,
            steps_to_threshold: spread(runs.iter().filter_map(|r| r.steps_to_threshold).collect()),
            final_eval: spread(runs.iter().filter_map(|r| r.final_eval).collect()),
            last20_train_mean: spread(runs.iter().filter_map(|r| r.last20_train_mean).collect()),
            wall_secs: spread(runs.iter().map(|r| r.wall_secs).collect()).expect("a seed"),
        };
        if seeds > 1 {
            println!(
                "{name:<22} {}/{seeds} seeds reached {threshold} within {budget} steps: at {:?} \
                 (median, min, max); final eval {:?}; last 20 training {:?}; wall s {:.0?}; \
                 rolling 20 reached on {}, held on {} over {} steps",
                s.reached,
                s.steps_to_threshold,
                s.final_eval,
                s.last20_train_mean,
                s.wall_secs,
                s.rolling20_reached,
                s.rolling20_held,
                s.run_steps
            );
        }
        summaries.push(s);
    }
    if seeds > 1 {
        #[derive(Serialize)]
        struct Out<'a> {
            summary: &'a [SeedsRow],
            runs: &'a [LearnRow],
        }
        let out_json = Out {
            summary: &summaries,
            runs: &rows,
        };
        return crate::measure::write_json(out, "agents_learn_seeds", &out_json);
    }
    crate::measure::write_json(out, "agents_learn", &rows)
}

/// Env steps a run goes on for: `factor` times the zoo's budget.
fn run_steps(budget: u64, factor: f64) -> u64 {
    (budget as f64 * factor).round() as u64
}

/// A rolling mean that never fell below 90 % of the threshold (of its
/// magnitude for negative thresholds) after first reaching it.
fn held(min_after: f64, threshold: f64) -> bool {
    min_after >= threshold - 0.1 * threshold.abs()
}

/// One seed of one config for its budget (times `steps_factor`).
fn one(
    name: &str,
    seed: u64,
    eval_episodes: u32,
    dir: &Path,
    (budget, zoo_mean, zoo_std, threshold): (u64, f64, f64, f64),
    steps_factor: f64,
) -> anyhow::Result<LearnRow> {
    let mut cfg = RunConfig::load(Path::new(&format!("config/{name}.toml")))?;
    cfg.seed = seed;
    cfg.output_dir = dir.join(format!("{name}-{seed}"));
    cfg.stop = Default::default();
    cfg.stop.max_env_steps = Some(run_steps(budget, steps_factor));
    cfg.eval.period_steps = (budget / 20).max(1_000);
    cfg.eval.episodes = eval_episodes;
    cfg.checkpoint.period_steps = 0;
    let opts = RunOptions::new(None, false);
    let s = workflows::run(&cfg, &opts, CancellationToken::new())?;
    let evals = read_evals(&cfg.output_dir.join("evals.csv"))?;
    let steps_to_threshold = evals
        .iter()
        .find(|e| e.mean_return >= threshold)
        .map(|e| e.env_steps);
    let wall_secs = s.counters.env_steps as f64 / s.env_steps_per_sec.max(1e-9);
    let eps = read_episodes(&cfg.output_dir.join("episodes.csv"))?;
    let tail = &eps[eps.len().saturating_sub(20)..];
    let last20_train_mean =
        (!tail.is_empty()).then(|| tail.iter().map(|e| e.ret).sum::<f64>() / tail.len() as f64);
    let (rolling20_first, rolling20_min_after) = rolling(&eps, 20, threshold);
    let row = LearnRow {
        config: name.to_string(),
        seed,
        agent: cfg.agent.to_string(),
        env: cfg.env.clone(),
        env_steps: s.counters.env_steps,
        wall_secs,
        final_eval: s.final_eval,
        best_eval: s.best_eval.map(|b| b.0),
        threshold,
        steps_to_threshold,
        zoo_mean,
        zoo_std,
        vs_zoo: s.final_eval.map(|f| f - zoo_mean),
        last20_train_mean,
        rolling20_first,
        rolling20_min_after,
    };
    let show = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
    println!(
        "{name:<22} seed {seed} {:>7} steps {:>6.0} s: final {:>7} best {:>7} (zoo {zoo_mean:.1} ± \
             {zoo_std:.1} at {budget}); >= {threshold} first at {}; rolling 20 first at {}, \
             lowest after {}; last 20 {}",
        row.env_steps,
        row.wall_secs,
        show(row.final_eval),
        show(row.best_eval),
        row.steps_to_threshold
            .map_or("never".into(), |s| format!("{s} steps")),
        row.rolling20_first
            .map_or("never".into(), |(s, w)| format!("{s} steps ({w:.1} s)")),
        show(row.rolling20_min_after),
        show(row.last20_train_mean),
    );
    Ok(row)
}
