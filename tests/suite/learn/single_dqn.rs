//! The embedded main job: `learner-server run` trains DQN on CartPole-v1
//! with the `single` workflow to an evaluation mean >= 475, and leaves every
//! promised file in its output directory.
//!
//! Budget (2-core CI machine, seed 1): see the run's figures in the test
//! output; the config caps the run at 150,000 steps and 600 s.

use rlfleet_checkpoint::Checkpoint;
use rlfleet_output::{EPISODES_HEADER, read_episodes, read_evals};
use rlfleet_shared::config::RunConfig;
use rlfleet_tests::workspace_root;

#[test]
fn dqn_single_reaches_475_and_writes_its_outputs() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let shipped = workspace_root().join("config/cartpole-dqn-single.toml");
    let mut cfg = RunConfig::load(&shipped).unwrap();
    cfg.output_dir = dir.path().join("out");
    let out = rlfleet_tests::run_single(&cfg, dir.path());
    let stdout = out.stdout;
    assert!(out.success, "failed\n{stdout}\n{}", out.stderr);
    assert!(
        stdout.starts_with("target reached (evaluation mean"),
        "summary line: {stdout}"
    );

    let o = &cfg.output_dir;
    // The resolved config parses back to the same run.
    let resolved = RunConfig::load(&o.join("config.resolved.toml")).unwrap();
    assert_eq!(resolved, cfg);
    // Episodes: consecutive ids, returns equal lengths on CartPole, steps add up.
    let text = std::fs::read_to_string(o.join("episodes.csv")).unwrap();
    assert_eq!(text.lines().next().unwrap(), EPISODES_HEADER);
    let episodes = read_episodes(&o.join("episodes.csv")).unwrap();
    assert!(!episodes.is_empty());
    for (i, e) in episodes.iter().enumerate() {
        assert_eq!(e.episode, i as u64);
        assert_eq!(e.ret, e.length as f64, "CartPole pays 1 per step");
        assert!(e.length >= 1 && e.length <= 500);
    }
    let steps: u64 = episodes.iter().map(|e| u64::from(e.length)).sum();
    assert_eq!(episodes.last().unwrap().env_steps, steps);
    // Evaluations: the last one reached the target.
    let evals = read_evals(&o.join("evals.csv")).unwrap();
    let best = evals.iter().map(|e| e.mean_return).fold(f64::MIN, f64::max);
    assert!(best >= 475.0, "best evaluation {best}");
    // The checkpoint holds the counters and the weights that reached it.
    let ck = Checkpoint::load(&o.join("checkpoint.safetensors")).unwrap();
    assert_eq!(ck.counters.episodes, episodes.len() as u64);
    assert!(ck.counters.env_steps >= steps && ck.counters.env_steps <= 150_000);
    let best_ck = ck.best.expect("best evaluation saved");
    assert!(best_ck.mean_return >= 475.0);
    let [h1, h2] = [cfg.dqn.hidden[0] as usize, cfg.dqn.hidden[1] as usize];
    assert_eq!(
        best_ck.weights.data.len(),
        4 * h1 + h1 + h1 * h2 + h2 + h2 * 2 + 2
    );
    // A real PNG of a plausible size.
    let png = std::fs::read(o.join("learning_curve.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(png.len() > 10_000, "png is {} bytes", png.len());
    let summary = std::fs::read_to_string(o.join("summary.toml")).unwrap();
    assert!(summary.contains("target_reached = true"), "{summary}");
}
