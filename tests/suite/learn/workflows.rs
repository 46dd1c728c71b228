//! The embedded distributed runs: `learner-server run CONFIG --local-actors
//! 4` starts the daemon on loopback and 4 real `actor-client` processes
//! over QUIC; each stop on the target is confirmed (a 100-episode
//! evaluation of the same weights at the target, `eval.confirm_episodes`).
//! DQN on CartPole-v1 reaches an evaluation mean >= 475 with
//! each of `async`, `sync`, `seed`, `nb-async`, `rma` (queue),
//! `rma-queue-pop-all` and `orchestrated` (prioritized replay, rate
//! limiter); A2C (`train_on = "episode"`) and PPO with `sync` and
//! `seed-a2c`; IMPALA with `seed-a2c` and `async`, its V-trace
//! correcting the lag, and with an LSTM core over `async`; on Pendulum-v1 (continuous actions) TD3 with `async` and
//! SAC with `seed`. Then
//! `random` plays the trained weights (`fixed_policy`) and
//! random actions, and reports exactly its episodes.
//!
//! Budget (2-core machine, seed 1, measured): async reaches 500 at ~40,000
//! env steps in ~36 s, sync at ~40,000 in ~33 s, seed at ~69,000 in ~69 s;
//! see the closing note of issue 4 and BENCHMARKS.md for the others. The
//! configs cap each at 150,000 steps (`rma`: 300,000) and 600 s.

use rlfleet_output::read_episodes;
use rlfleet_shared::config::RunConfig;
use rlfleet_tests::{heavy, run_embedded, workspace_root};
use std::collections::BTreeSet;

/// Runs `config/cartpole-{name}.toml` with 4 actor processes to its target.
fn learn(name: &str, dir: &std::path::Path) -> RunConfig {
    learn_config(&format!("cartpole-{name}"), dir)
}

/// Runs `config/{config}.toml` with 4 actor processes to its target.
pub(crate) fn learn_config(config: &str, dir: &std::path::Path) -> RunConfig {
    let name = config;
    let shipped = workspace_root().join(format!("config/{config}.toml"));
    let mut cfg = RunConfig::load(&shipped).unwrap();
    cfg.output_dir = dir.join(name);
    let out = run_embedded(&cfg, dir, &[]);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    assert!(out.success, "{name}: failed\n{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("target reached (evaluation mean"),
        "{name}: {stdout}"
    );
    // Four actor processes took part, each finished cleanly and each
    // contributed a share.
    let reports: Vec<_> = stderr
        .lines()
        .filter_map(rlfleet_tests::daemon::actor_counts)
        .collect();
    assert_eq!(reports.len(), 4, "{name}: {stderr}");
    assert!(
        rlfleet_tests::daemon::each_took_a_share(&reports)
            && reports.iter().all(|r| r.sessions == 1),
        "{name}: {reports:?}"
    );
    // The stop is confirmed: the last evaluation is a confirming one of
    // `eval.confirm_episodes` episodes at the target.
    let evals = rlfleet_output::read_evals(&cfg.output_dir.join("evals.csv")).unwrap();
    let target = cfg.stop.target_eval_return.unwrap();
    let confirmed = evals
        .iter()
        .rfind(|e| e.confirming)
        .unwrap_or_else(|| panic!("{name}: no confirming evaluation: {evals:?}"));
    assert!(
        confirmed.episodes == cfg.eval.confirm_episodes
            && confirmed.episodes >= 100
            && confirmed.mean_return >= target,
        "{name}: {confirmed:?}"
    );
    let eps = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    let ids: BTreeSet<u64> = eps.iter().map(|e| e.episode).collect();
    assert_eq!(ids.len(), eps.len(), "{name}: an episode id finished twice");
    let actors: BTreeSet<u32> = eps.iter().map(|e| e.actor).collect();
    assert_eq!(actors, (0..4).collect(), "{name}: episodes by actor");
    assert!(cfg.output_dir.join("checkpoint.safetensors").exists());
    assert!(cfg.output_dir.join("learning_curve.png").exists());
    eprintln!("{name}: {}", stdout.trim());
    cfg
}

#[test]
fn async_sync_and_seed_reach_475_with_four_actor_processes() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    for wf in ["async", "sync", "seed"] {
        learn(&format!("dqn-{wf}"), dir.path());
    }
}

/// `random` over QUIC: exactly `n` episodes, each reported once, and the
/// mean return.
fn play_random(dir: &std::path::Path, name: &str, fixed: Option<std::path::PathBuf>) -> f64 {
    let n = 40;
    let shipped = workspace_root().join("config/cartpole-random.toml");
    let mut cfg = RunConfig::load(&shipped).unwrap();
    cfg.output_dir = dir.join(name);
    cfg.stop.max_episodes = Some(n);
    cfg.distributed.fixed_policy = fixed;
    let out = run_embedded(&cfg, dir, &[]);
    assert!(out.success, "{name}: {}\n{}", out.stdout, out.stderr);
    let summary: toml::Value =
        toml::from_str(&std::fs::read_to_string(cfg.output_dir.join("summary.toml")).unwrap())
            .unwrap();
    assert_eq!(summary["train_steps"].as_integer(), Some(0), "{name}");
    let eps = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    let ids: Vec<u64> = eps
        .iter()
        .map(|e| e.episode)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(eps.len() as u64, n, "{name}");
    assert_eq!(ids, (0..n).collect::<Vec<_>>(), "{name}");
    let steps: u64 = eps.iter().map(|e| u64::from(e.length)).sum();
    assert_eq!(summary["env_steps"].as_integer(), Some(steps as i64));
    eps.iter().map(|e| e.ret).sum::<f64>() / n as f64
}

#[test]
fn the_new_experience_workflows_reach_475_and_random_replays_the_result() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let mut trained = None;
    for wf in ["nb-async", "rma", "rma-queue-pop-all", "orchestrated"] {
        trained = Some(learn(&format!("dqn-{wf}"), dir.path()));
    }
    let checkpoint = trained.unwrap().output_dir.join("checkpoint.safetensors");
    let greedy = play_random(dir.path(), "fixed", Some(checkpoint));
    let random = play_random(dir.path(), "random", None);
    eprintln!("random: trained weights {greedy:.1}, random actions {random:.1}");
    // A policy at the 475 threshold scores less on 40 other starts (one
    // run here played 500.0, another below 400); what this checks is that
    // the fixed weights were loaded and played, far above random play.
    assert!(greedy >= 150.0, "the trained policy played {greedy}");
    assert!(random < 60.0, "random actions played {random}");
}

#[test]
fn a2c_and_ppo_reach_475_with_sync_and_seed_a2c() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    for name in ["a2c-sync", "a2c-seed-a2c"] {
        let cfg = learn(name, dir.path());
        let summary: toml::Value =
            toml::from_str(&std::fs::read_to_string(cfg.output_dir.join("summary.toml")).unwrap())
                .unwrap();
        // One gradient step per finished episode.
        let (steps, episodes) = (
            summary["train_steps"].as_integer().unwrap(),
            summary["episodes"].as_integer().unwrap(),
        );
        assert!(steps > 0 && steps <= episodes, "{name}: {summary}");
    }
    for name in ["ppo-sync", "ppo-seed-a2c"] {
        let cfg = learn(name, dir.path());
        let summary: toml::Value =
            toml::from_str(&std::fs::read_to_string(cfg.output_dir.join("summary.toml")).unwrap())
                .unwrap();
        // Each update: 10 epochs over N >= 256 transitions in minibatches
        // of 64, so 10 * ceil(N / 64) gradient steps; there is at most one
        // update per 256 env steps.
        let (steps, env_steps) = (
            summary["train_steps"].as_integer().unwrap(),
            summary["env_steps"].as_integer().unwrap(),
        );
        assert!(steps >= 40, "{name}: {summary}");
        assert!(
            steps <= 10 * (env_steps / 64 + env_steps / 256),
            "{name}: {summary}"
        );
    }
}

/// IMPALA over `seed-a2c` and `async`: the `seed` front acts with whatever
/// weights it last loaded, `async` actors with those of their last
/// acknowledgement; each step carries its action's log-probability under
/// them, and V-trace corrects for the lag (and for the epochs after an
/// update's first): CartPole's target is confirmed, every step was
/// corrected (none dropped for want of its log-probability: the front and
/// the actors over the wire gave every one), the lag is reported and
/// TensorBoard shows the importance weights.
#[test]
fn impala_reaches_475_with_seed_a2c_and_async_correcting_their_lag() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    for name in ["impala-seed-a2c", "impala-async"] {
        let cfg = learn(name, dir.path());
        let summary: toml::Value =
            toml::from_str(&std::fs::read_to_string(cfg.output_dir.join("summary.toml")).unwrap())
                .unwrap();
        // 4 gradient steps per update.
        let steps = summary["train_steps"].as_integer().unwrap();
        assert!(steps >= 8 && steps % 4 == 0, "{name}: {summary}");
        let board = crate::tensorboard::read_board(&cfg.output_dir);
        let rho = crate::tensorboard::series(&board, "vtrace/rho_mean");
        assert!(
            !rho.is_empty() && rho.iter().all(|&(_, r)| r.is_finite() && r > 0.0),
            "{name}: {rho:?}"
        );
        let clipped = crate::tensorboard::series(&board, "vtrace/rho_clipped_fraction");
        assert!(clipped.iter().all(|&(_, f)| (0.0..=1.0).contains(&f)));
        // The lag is reported (steps acted by weights older than the
        // learner's when they reached it), and some steps had it.
        let lag = crate::tensorboard::series(&board, "train/policy_lag");
        assert!(
            lag.iter().all(|&(_, l)| l >= 0.0) && lag.iter().any(|&(_, l)| l > 0.0),
            "{name}: {lag:?}"
        );
        let lost = crate::tensorboard::series(&board, "vtrace/uncorrectable_steps");
        assert_eq!(lost.last().map(|&(_, n)| n), Some(0.0), "{name}: {lost:?}");
    }
}

/// Continuous actions over the wire: TD3's actors act with the published
/// tanh actor plus the noise the learner sends (`async`), and SAC's actions
/// come from the learner's inference front sampling the squashed Gaussian
/// (`seed`); both reach the Pendulum target (-200; the agent tests assert
/// -250).
#[test]
fn continuous_agents_learn_pendulum_over_async_and_seed() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    for config in ["pendulum-td3-async", "pendulum-sac-seed"] {
        let cfg = learn_config(config, dir.path());
        let summary: toml::Value =
            toml::from_str(&std::fs::read_to_string(cfg.output_dir.join("summary.toml")).unwrap())
                .unwrap();
        assert!(
            summary["best_eval_return"].as_float().unwrap() >= -250.0,
            "{config}: {summary}"
        );
    }
}

/// IMPALA with an LSTM core over `async`: each of 4 actor processes runs
/// the core with every env slot's state, the learner trains each unroll
/// from the state its episode had reached and V-trace's behaviour
/// log-probs are the ones the actors computed with the states they held;
/// CartPole's target is confirmed (seed 1, 8 runs two at a
/// time: 18,000 to 136,000 env steps, 6 to 33 s; a full test run of
/// 2026-11-29 reached 500 only at 200,013; the config stops at 300,000
/// steps or 3,000 episodes).
#[test]
fn recurrent_impala_reaches_475_over_async() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    learn_config("cartpole-impala-lstm-async", dir.path());
}
