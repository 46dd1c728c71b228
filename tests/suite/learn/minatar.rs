//! MinAtar: Breakout with the shipped DQN config (`single`, MinAtar's
//! published settings) learns what MinAtar's own DQN learns in the same
//! frames: by 50,000 frames the reference (`bench/python/minatar_dqn.py`)
//! scores 1.19–1.44 over its last 100 episodes (seeds 1–3, BENCHMARKS.md
//! "MinAtar"), and random play 0.47. The test asks 0.9 of seed 1.
//!
//! PPO (`config/minatar-breakout-ppo.toml`) is held to its own reference
//! in the same frames.
//!
//! Budget (2-core CI machine): DQN 50,000 env steps, 45,000 gradient
//! steps, about 150 s; PPO 50,000 env steps, about 15 s. The other four
//! games' DQN configs each run 600 steps.

use rlfleet_output::read_episodes;
use rlfleet_tests::run_shipped_single;

/// Runs the shipped config `name` (seed 1) for `frames` env steps in a
/// temporary folder: its summary, and the mean return of its last 100
/// episodes (with their count and what the run printed, for messages).
fn last_100_mean(name: &str, frames: u64) -> (toml::Value, f64, String) {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, summary, stdout) = run_shipped_single(name, frames, dir.path(), |_| {});
    let episodes = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    assert!(episodes.len() >= 100, "{} episodes", episodes.len());
    let last: Vec<f64> = episodes.iter().rev().take(100).map(|e| e.ret).collect();
    let mean = last.iter().sum::<f64>() / last.len() as f64;
    let said = format!(
        "{name} seed {}: mean of the last 100 of {} episodes by {frames} frames: {mean:.2} ({})",
        cfg.seed,
        episodes.len(),
        stdout.trim()
    );
    eprintln!("{said}");
    (summary, mean, said)
}

#[test]
fn minatar_breakout_dqn_learns_what_the_reference_learns_by_50k_frames() {
    let _heavy = rlfleet_tests::heavy();
    let (summary, mean, said) = last_100_mean("minatar-breakout-dqn", 50_000);
    // One update a frame from 5,000 on.
    assert_eq!(
        summary["train_steps"].as_integer(),
        Some(45_001),
        "{summary}"
    );
    assert!(
        mean >= 0.9,
        "{said}: the reference has 1.19-1.44, random 0.47"
    );
}

/// PPO (`config/minatar-breakout-ppo.toml`) by 50,000 frames, against
/// `bench/python/ppo.py` with the same settings (BENCHMARKS.md
/// "MinAtar"): 2.67-2.74 over seeds 1-3; random play 0.47. The test asks
/// 2.0 of seed 1.
#[test]
fn minatar_breakout_ppo_learns_what_the_reference_learns_by_50k_frames() {
    let _heavy = rlfleet_tests::heavy();
    let (summary, mean, said) = last_100_mean("minatar-breakout-ppo", 50_000);
    // 48 rollouts of 1,024 steps, each 4 epochs of 4 minibatches.
    assert_eq!(
        summary["train_steps"].as_integer(),
        Some(48 * 16),
        "{summary}"
    );
    assert!(
        mean >= 2.0,
        "{said}: the reference has 2.67-2.74, random 0.47"
    );
}

/// The other four games' shipped configs (the same DQN) start, act on
/// their own plane counts (Asterix 4, Freeway 7, Seaquest 10, Space
/// Invaders 6) and run to their step limit.
#[test]
fn every_other_minatar_game_runs_under_its_shipped_config() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    for (game, id) in [
        ("asterix", "Asterix"),
        ("freeway", "Freeway"),
        ("seaquest", "Seaquest"),
        ("space-invaders", "SpaceInvaders"),
    ] {
        let name = format!("minatar-{game}-dqn");
        let (cfg, summary, _) = run_shipped_single(&name, 600, dir.path(), |cfg| {
            cfg.dqn.learning_starts = 300;
        });
        assert_eq!(cfg.env, format!("gymnasium:MinAtar/{id}-v0"));
        assert_eq!(
            summary["train_steps"].as_integer(),
            Some(301),
            "{game}: {summary}"
        );
    }
}
