//! Atari: the PPO configs `rlfleet-bench reference --suite atari` holds
//! against `bench/python/ppo.py` (`config/atari-{breakout,pong}-ppo.toml`)
//! start on ALE's frames under AtariPreprocessing, stack 4 of them, and
//! train on schedule. Their learning is measured in `bench/` (BENCHMARKS.md
//! "Atari"): a budget that shows it does not fit the suite.
//!
//! Budget (2-core CI machine): one rollout of 1,024 steps, its 16
//! minibatch updates and the final evaluation's one episode per game,
//! 39 s for both with the machine to itself. (The configs evaluate at
//! epsilon 0.05: greedy, the untrained Breakout policy never fired, and its
//! episode ran to the time limit, 116 s for the test.)

use rlfleet_tests::run_shipped_single;

#[test]
fn both_atari_ppo_configs_run_one_rollout_and_train_on_it() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    for (game, id) in [("breakout", "Breakout"), ("pong", "Pong")] {
        let name = format!("atari-{game}-ppo");
        let (cfg, summary, _) = run_shipped_single(&name, 1_024, dir.path(), |_| {});
        assert_eq!(cfg.env, format!("gymnasium:ALE/{id}-v5"));
        assert_eq!(cfg.frame_stack, 4);
        // 4 epochs of 4 minibatches of 256.
        assert_eq!(
            summary["train_steps"].as_integer(),
            Some(16),
            "{game}: {summary}"
        );
    }
}

/// Pong's R2D2 (`config/pong-r2d2-seed.toml`, 4 local actors over QUIC,
/// a small replay) keeps each frame of its overlapping sequences once: its
/// replay holds at most 1.3 frames per env step it can hold (it held 6.1,
/// each sequence's 61 stacks of 4 frames for 40 steps), and it trains
/// from the stacks it rebuilds. Budget: 2,000 steps, a few gradient steps
/// of 2 sequences.
#[test]
fn pong_r2d2_keeps_a_frame_per_step_and_trains_from_its_sequences() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let shipped = rlfleet_tests::workspace_root().join("config/pong-r2d2-seed.toml");
    let mut cfg = rlfleet_shared::config::RunConfig::load(&shipped).unwrap();
    cfg.output_dir = dir.path().join("pong-r2d2");
    cfg.stop.max_env_steps = Some(2_000);
    cfg.r2d2.buffer_size = 30;
    cfg.r2d2.batch_size = 2;
    cfg.r2d2.learning_starts = 1_200;
    cfg.r2d2.train_freq = 128;
    cfg.eval.episodes = 1;
    cfg.eval.confirm_episodes = 0;
    cfg.eval.period_steps = u64::MAX / 2;
    cfg.checkpoint.period_steps = 0;
    let out = rlfleet_tests::run_embedded(&cfg, dir.path(), &[]);
    assert!(out.success, "{}\n{}", out.stdout, out.stderr);
    let summary = rlfleet_tests::read_summary(&cfg.output_dir);
    assert!(
        summary["train_steps"].as_integer().unwrap() >= 3,
        "{summary}"
    );
    let prom = std::fs::read_to_string(cfg.output_dir.join("metrics.prom")).unwrap();
    let bytes = rlfleet_tests::metric_value(&prom, "rlfleet_replay_bytes");
    let steps = f64::from(cfg.r2d2.buffer_size * cfg.r2d2.unroll_length);
    let frames = bytes / steps / (84.0 * 84.0);
    assert!(
        (1.0..=1.3).contains(&frames),
        "{frames} frames per env step"
    );
}
