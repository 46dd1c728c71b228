//! The agent library learns what the public baselines learn, each in the
//! `single` workflow from its shipped config (seed 1), on a budget that
//! keeps the suite short on 2 cores:
//!
//! | agent | env | asserted | budget (config cap) | measured here |
//! |---|---|---|---|---|
//! | PPO | CartPole-v1 | >= 475 | 200,000 steps, 600 s | 487.5 at 6,000 steps, 1.5 s |
//! | PPO | Pendulum-v1 | >= -400 | 300,000 steps, 600 s | -357.1 at 12,000 steps, 2.9 s |
//! | DQN (dueling, 3-step, PER) | Acrobot-v1 | >= -100 | 100,000 steps, 600 s | -96.8 confirmed over 100 episodes at 36,000 steps, 5.4 s |
//! | TD3 | Pendulum-v1 | >= -250 | 40,000 steps, 600 s | -154.2 at 8,000 steps, 18.0 s |
//! | SAC | Pendulum-v1 | >= -250 | 40,000 steps, 600 s | -161.3 at 5,000 steps, 18.1 s |
//! | DDPG | Pendulum-v1 | >= -300 | 40,000 steps, 600 s | -187.6 at 4,000 steps, 7.2 s |
//!
//! Each stops at its config's target (-200 for TD3, SAC and DDPG, -100 —
//! Gymnasium's threshold — for Acrobot, the asserted return for PPO), at
//! or above what is asserted, confirmed by a 100-episode evaluation of the
//! same weights (`eval.confirm_episodes`). Acrobot's target was -80 when a
//! 10-episode evaluation stopped the run; -80 over 100 episodes is not
//! reached within 100,000 steps (best confirming evaluations ~-89).
//! Each run must stop on its target (not a cap), its best evaluation must
//! reach the asserted return, the checkpoint's best weights must have the
//! published network's size, and the episodes must add up to the steps.

use rlfleet_checkpoint::Checkpoint;
use rlfleet_output::{read_episodes, read_evals};
use rlfleet_shared::config::RunConfig;
use rlfleet_tests::{heavy, run_single, workspace_root};

/// Parameters of a ReLU MLP with these layer sizes.
fn mlp(sizes: &[usize]) -> usize {
    sizes.windows(2).map(|w| w[0] * w[1] + w[1]).sum()
}

/// Runs `config/{name}.toml` in `single` to its target; checks the best
/// evaluation reached `at_least` and the published weights have `numel`
/// values; returns the summary line.
fn learn(name: &str, at_least: f64, numel: usize) -> String {
    let dir = tempfile::tempdir().unwrap();
    let shipped = workspace_root().join(format!("config/{name}.toml"));
    let mut cfg = RunConfig::load(&shipped).unwrap();
    cfg.output_dir = dir.path().join("out");
    let out = run_single(&cfg, dir.path());
    let stdout = out.stdout;
    assert!(out.success, "{name}: failed\n{stdout}\n{}", out.stderr);
    assert!(
        stdout.starts_with("target reached (evaluation mean"),
        "{name}: {stdout}"
    );
    let o = &cfg.output_dir;
    let evals = read_evals(&o.join("evals.csv")).unwrap();
    let best = evals.iter().map(|e| e.mean_return).fold(f64::MIN, f64::max);
    assert!(best >= at_least, "{name}: best evaluation {best}");
    let episodes = read_episodes(&o.join("episodes.csv")).unwrap();
    let steps: u64 = episodes.iter().map(|e| u64::from(e.length)).sum();
    let ck = Checkpoint::load(&o.join("checkpoint.safetensors")).unwrap();
    assert_eq!(ck.counters.episodes, episodes.len() as u64, "{name}");
    assert!(ck.counters.env_steps >= steps, "{name}");
    let best_ck = ck.best.expect("best evaluation saved");
    assert!(best_ck.mean_return >= at_least, "{name}");
    assert_eq!(best_ck.weights.data.len(), numel, "{name}: weights");
    eprintln!("{name}: {}", stdout.trim());
    stdout
}

#[test]
fn ppo_reaches_475_on_cartpole() {
    let _heavy = heavy();
    learn("cartpole-ppo-single", 475.0, mlp(&[4, 64, 64, 2]));
}

#[test]
fn ppo_reaches_minus_400_on_pendulum() {
    let _heavy = heavy();
    // The Gaussian head's one log std follows the MLP's parameters.
    learn("pendulum-ppo-single", -400.0, mlp(&[3, 64, 64, 1]) + 1);
}

#[test]
fn dueling_n_step_prioritized_dqn_reaches_minus_100_on_acrobot() {
    let _heavy = heavy();
    // A dueling head: one output more than the 3 actions.
    learn("acrobot-dqn-single", -100.0, mlp(&[6, 128, 128, 4]));
}

#[test]
fn td3_sac_and_ddpg_learn_pendulum() {
    let _heavy = heavy();
    learn("pendulum-td3-single", -250.0, mlp(&[3, 64, 64, 1]));
    // SAC's actor gives a mean and a log std per action dimension.
    learn("pendulum-sac-single", -250.0, mlp(&[3, 64, 64, 2]));
    learn("pendulum-ddpg-single", -300.0, mlp(&[3, 64, 64, 1]));
}
