//! MinAtar: Breakout with the shipped DQN config (`single`, MinAtar's
//! published settings) learns what MinAtar's own DQN learns in the same
//! frames: by 50,000 frames the reference (`bench/python/minatar_dqn.py`)
//! scores 1.19–1.44 over its last 100 episodes (seeds 1–3, BENCHMARKS.md
//! "MinAtar"), and random play 0.47. The test asks 0.9 of seed 1.
//!
//! Budget (2-core CI machine): 50,000 env steps, 45,000 gradient steps,
//! about 150 s. The other four games' configs each run 600 steps.

use learner_server::output::read_episodes;
use rlfleet_shared::config::RunConfig;
use rlfleet_tests::{read_summary, run_single, workspace_root};

#[test]
fn minatar_breakout_dqn_learns_what_the_reference_learns_by_50k_frames() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let shipped = workspace_root().join("config/minatar-breakout-dqn.toml");
    let mut cfg = RunConfig::load(&shipped).unwrap();
    cfg.output_dir = dir.path().join("out");
    cfg.stop.max_env_steps = Some(50_000);
    let out = run_single(&cfg, dir.path());
    assert!(out.success, "failed\n{}\n{}", out.stdout, out.stderr);
    let summary = read_summary(&cfg.output_dir);
    assert_eq!(summary["env_steps"].as_integer(), Some(50_000), "{summary}");
    // One update a frame from 5,000 on.
    assert_eq!(
        summary["train_steps"].as_integer(),
        Some(45_001),
        "{summary}"
    );
    let episodes = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    assert!(episodes.len() >= 100, "{} episodes", episodes.len());
    let last: Vec<f64> = episodes.iter().rev().take(100).map(|e| e.ret).collect();
    let mean = last.iter().sum::<f64>() / last.len() as f64;
    eprintln!(
        "MinAtar Breakout seed {}: mean of the last 100 of {} episodes by 50k frames: {mean:.2} \
         ({})",
        cfg.seed,
        episodes.len(),
        out.stdout.trim()
    );
    assert!(
        mean >= 0.9,
        "mean return of the last 100 episodes {mean:.2}: the reference has 1.19-1.44, random 0.47"
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
        let shipped = workspace_root().join(format!("config/minatar-{game}-dqn.toml"));
        let mut cfg = RunConfig::load(&shipped).unwrap();
        assert_eq!(cfg.env, format!("gymnasium:MinAtar/{id}-v0"));
        cfg.output_dir = dir.path().join(game);
        cfg.stop.max_env_steps = Some(600);
        cfg.dqn.learning_starts = 300;
        let out = run_single(&cfg, dir.path());
        assert!(out.success, "{game}\n{}\n{}", out.stdout, out.stderr);
        let summary = read_summary(&cfg.output_dir);
        assert_eq!(
            summary["env_steps"].as_integer(),
            Some(600),
            "{game}: {summary}"
        );
        assert_eq!(
            summary["train_steps"].as_integer(),
            Some(301),
            "{game}: {summary}"
        );
    }
}
