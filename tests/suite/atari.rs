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
