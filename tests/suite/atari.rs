//! Atari: the PPO configs `rlfleet-bench reference --suite atari` holds
//! against `bench/python/ppo.py` (`config/atari-{breakout,pong}-ppo.toml`)
//! start on ALE's frames under AtariPreprocessing, stack 4 of them, and
//! train on schedule. Their learning is measured in `bench/` (BENCHMARKS.md
//! "Atari"): a budget that shows it does not fit the suite.
//!
//! Budget (2-core CI machine): one rollout of 1,024 steps and its 16
//! minibatch updates per game, about 10 s each.

use rlfleet_shared::config::RunConfig;
use rlfleet_tests::{read_summary, run_single, workspace_root};

#[test]
fn both_atari_ppo_configs_run_one_rollout_and_train_on_it() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    for (game, id) in [("breakout", "Breakout"), ("pong", "Pong")] {
        let shipped = workspace_root().join(format!("config/atari-{game}-ppo.toml"));
        let mut cfg = RunConfig::load(&shipped).unwrap();
        assert_eq!(cfg.env, format!("gymnasium:ALE/{id}-v5"));
        assert_eq!(cfg.frame_stack, 4);
        cfg.output_dir = dir.path().join(game);
        cfg.stop.max_env_steps = Some(1_024);
        let out = run_single(&cfg, dir.path());
        assert!(out.success, "{game}\n{}\n{}", out.stdout, out.stderr);
        let summary = read_summary(&cfg.output_dir);
        assert_eq!(
            summary["env_steps"].as_integer(),
            Some(1_024),
            "{game}: {summary}"
        );
        // 4 epochs of 4 minibatches of 256.
        assert_eq!(
            summary["train_steps"].as_integer(),
            Some(16),
            "{game}: {summary}"
        );
    }
}
