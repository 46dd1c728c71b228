//! `rlfleet-bench learn`: the longer learning benchmark. Each agent's
//! shipped `single` config runs, without its evaluation target, for the
//! env-step budget rl-baselines3-zoo trained that agent on that env with;
//! reported are the final policy's evaluation mean (`eval_episodes` greedy
//! episodes), the best evaluation, and the env steps at which an
//! evaluation first reached the learning test's threshold — beside the
//! zoo's published figure (benchmark.md of DLR-RM/rl-baselines3-zoo, one
//! run per agent, deterministic policy), the baseline this benchmark
//! compares against.

use learner_server::output::read_evals;
use learner_server::workflows::{self, RunOptions};
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
}

pub fn bench(only: &[String], eval_episodes: u32, out: &Path) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();
    for &(name, budget, zoo_mean, zoo_std, threshold) in CASES {
        if !only.is_empty() && !only.iter().any(|o| name.contains(o.as_str())) {
            continue;
        }
        let mut cfg = RunConfig::load(Path::new(&format!("config/{name}.toml")))?;
        cfg.output_dir = dir.path().join(name);
        cfg.stop = Default::default();
        cfg.stop.max_env_steps = Some(budget);
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
        let row = LearnRow {
            config: name.to_string(),
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
        };
        let show = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        println!(
            "{name:<22} {:>7} steps {:>6.0} s: final {:>7} best {:>7} (zoo {zoo_mean:.1} ± {zoo_std:.1} at \
             {budget}); >= {threshold} first at {}",
            row.env_steps,
            row.wall_secs,
            show(row.final_eval),
            show(row.best_eval),
            row.steps_to_threshold
                .map_or("never".into(), |s| format!("{s} steps")),
        );
        rows.push(row);
    }
    super::write_json(out, "agents_learn", &rows)
}
