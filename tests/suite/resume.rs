//! Resume: a run stopped part-way continues from its checkpoint with the
//! saved counters, weights and optimizer state, and appends to its files;
//! every agent (PPO, DDPG, TD3, SAC too) restores its whole state.

use rlfleet_checkpoint::Checkpoint;
use rlfleet_output::read_episodes;
use rlfleet_run::workflows::{RunOptions, SingleRun, StopReason};
use rlfleet_shared::config::RunConfig;
use rlfleet_tests::workspace_root;
use tokio_util::sync::CancellationToken;

fn config(dir: &std::path::Path, max_env_steps: u64) -> RunConfig {
    let mut cfg =
        RunConfig::load(&workspace_root().join("config/cartpole-dqn-single.toml")).unwrap();
    cfg.output_dir = dir.to_path_buf();
    cfg.stop.target_eval_return = None;
    cfg.stop.max_env_steps = Some(max_env_steps);
    cfg.eval.period_steps = 1_000;
    cfg.eval.episodes = 2;
    // The counts below are for one gradient step per env step (the shipped
    // config trains in rounds of 128 every 256 steps).
    cfg.dqn.train_freq = 1;
    cfg.dqn.gradient_steps = 1;
    cfg
}

#[test]
fn resumed_run_continues_from_saved_counters_and_weights() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let first = config(dir.path(), 3_000);
    let summary = SingleRun::new(&first, &RunOptions::default())
        .unwrap()
        .run(&CancellationToken::new())
        .unwrap();
    assert_eq!(summary.reason, StopReason::MaxEnvSteps);
    assert_eq!(summary.counters.env_steps, 3_000);
    // learning_starts = 1000, one gradient step per env step after it.
    assert_eq!(summary.train_steps, 2_001);

    let ck_path = dir.path().join("checkpoint.safetensors");
    let saved = Checkpoint::load(&ck_path).unwrap();
    assert_eq!(saved.counters.env_steps, 3_000);
    assert_eq!(saved.counters.episodes, summary.counters.episodes);
    assert_eq!(saved.agent_state.train_steps, 2_001);
    assert_eq!(saved.agent_state.optimizer_steps, 2_001);
    let episodes_before = read_episodes(&dir.path().join("episodes.csv")).unwrap();
    assert_eq!(episodes_before.len() as u64, saved.counters.episodes);

    let second = config(dir.path(), 4_000);
    let opts = RunOptions::new(Some(ck_path.clone()), false);
    let run = SingleRun::new(&second, &opts).unwrap();
    assert_eq!(run.counters(), saved.counters);
    assert_eq!(run.agent().train_steps(), 2_001);
    // Every tensor of the agent (online, target, Adam moments, the largest
    // |reward| seen) is the saved one.
    let state = run.agent().state();
    assert_eq!(state.tensors.len(), 5);
    for t in &state.tensors {
        let want = saved.agent_state.tensor(&t.name).unwrap();
        assert!(
            t.data == want.data,
            "tensor `{}` differs from the checkpoint",
            t.name
        );
    }
    assert_eq!(state.optimizer_steps, saved.agent_state.optimizer_steps);
    assert!(run.agent().weights().data == saved.agent_state.tensor("online").unwrap().data);

    let summary = run.run(&CancellationToken::new()).unwrap();
    assert_eq!(
        summary.counters.env_steps, 4_000,
        "continues from 3,000, not from 0"
    );
    // The replay is not in the checkpoint: training resumes once the refilled
    // replay holds a batch (64 transitions), i.e. from the 64th step on.
    assert_eq!(summary.train_steps, 2_001 + (1_000 - 63));
    let episodes = read_episodes(&dir.path().join("episodes.csv")).unwrap();
    assert_eq!(
        &episodes[..episodes_before.len()],
        &episodes_before[..],
        "earlier rows kept"
    );
    for (i, e) in episodes.iter().enumerate() {
        assert_eq!(e.episode, i as u64, "episode ids continue");
    }
    let after = Checkpoint::load(&ck_path).unwrap();
    assert_eq!(after.counters.env_steps, 4_000);
    assert!(
        after.agent_state.tensor("online").unwrap().data
            != saved.agent_state.tensor("online").unwrap().data
    );
}

#[test]
fn resuming_from_a_checkpoint_of_another_env_is_refused() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), 300);
    SingleRun::new(&cfg, &RunOptions::default())
        .unwrap()
        .run(&CancellationToken::new())
        .unwrap();
    let mut other = cfg.clone();
    other.env = "Acrobot-v1".into();
    other.output_dir = dir.path().join("other");
    let opts = RunOptions::new(Some(dir.path().join("checkpoint.safetensors")), false);
    let err = SingleRun::new(&other, &opts).unwrap_err().to_string();
    assert!(
        err.contains("CartPole-v1") && err.contains("Acrobot-v1"),
        "{err}"
    );
}

/// PPO, DDPG, TD3 and SAC resume with every tensor of their state (actor,
/// critics, targets, the temperature, every Adam moment) and their counters,
/// and go on training on the schedule the counters say.
#[test]
fn every_agent_resumes_with_its_whole_state() {
    let _heavy = rlfleet_tests::heavy();
    // (config, train steps after 1,500 env steps, after 500 more resumed)
    let cases = [
        // An update of 10 epochs x 4 minibatches every 256 steps; the
        // unfinished rollout is not in the checkpoint.
        ("cartpole-ppo-single", 5 * 40, 5 * 40 + 40),
        // Rollouts of 1,024: one update (10 x 16) before the stop, none in
        // the 500 steps after.
        ("pendulum-ppo-single", 160, 160),
        // One step per env step from step 1,000; after the resume the
        // replay refills, and training waits for a batch of 256.
        ("pendulum-td3-single", 501, 501 + 245),
        ("pendulum-ddpg-single", 501, 501 + 245),
        ("pendulum-sac-single", 501, 501 + 245),
    ];
    for (name, first_steps, total_steps) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg =
            RunConfig::load(&workspace_root().join(format!("config/{name}.toml"))).unwrap();
        cfg.output_dir = dir.path().to_path_buf();
        cfg.stop.target_eval_return = None;
        cfg.stop.max_env_steps = Some(1_500);
        cfg.eval.period_steps = 500;
        cfg.eval.episodes = 1;
        let summary = SingleRun::new(&cfg, &RunOptions::default())
            .unwrap()
            .run(&CancellationToken::new())
            .unwrap();
        assert_eq!(summary.train_steps, first_steps, "{name}");
        let ck_path = dir.path().join("checkpoint.safetensors");
        let saved = Checkpoint::load(&ck_path).unwrap();
        assert_eq!(saved.agent_state.train_steps, first_steps, "{name}");

        cfg.stop.max_env_steps = Some(2_000);
        let opts = RunOptions::new(Some(ck_path), false);
        let run = SingleRun::new(&cfg, &opts).unwrap();
        assert_eq!(run.counters(), saved.counters, "{name}");
        let state = run.agent().state();
        assert_eq!(
            state.tensors.len(),
            saved.agent_state.tensors.len(),
            "{name}"
        );
        for t in &state.tensors {
            let want = saved.agent_state.tensor(&t.name).unwrap();
            assert!(t.data == want.data, "{name}: tensor `{}` differs", t.name);
        }
        assert_eq!(
            state.optimizer_steps, saved.agent_state.optimizer_steps,
            "{name}"
        );
        let summary = run.run(&CancellationToken::new()).unwrap();
        assert_eq!(summary.counters.env_steps, 2_000, "{name}");
        assert_eq!(summary.train_steps, total_steps, "{name}");
    }
}

/// Resumes `cfg` from `ck_path`, checks that its replay is `img` again,
/// and runs it on; returns its train steps.
fn resume_with_the_replay(
    cfg: &RunConfig,
    ck_path: std::path::PathBuf,
    img: &rlfleet_replay::ReplayImage,
    what: &str,
) -> u64 {
    let run = SingleRun::new(cfg, &RunOptions::new(Some(ck_path), false)).unwrap();
    assert_eq!(
        run.agent().replay_image().as_ref(),
        Some(img),
        "{what}: the restored replay differs from the saved one"
    );
    run.run(&CancellationToken::new()).unwrap().train_steps
}

/// With `checkpoint.replay = true` the replay is in the checkpoint — every
/// transition's fields and, for prioritized replay, every priority — and a
/// resumed run trains from its first step instead of refilling; TD3 too.
#[test]
fn a_checkpointed_replay_comes_back_exactly_and_training_resumes_at_once() {
    let _heavy = rlfleet_tests::heavy();
    // (config, prioritized, train steps after the first part, after 500
    // more env steps resumed: one per step, no refill wait)
    let cases = [
        ("cartpole-dqn-single", true, 3_000, 2_001, 2_001 + 500),
        ("pendulum-td3-single", false, 1_500, 501, 501 + 500),
    ];
    for (name, prioritized, steps, first, total) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg =
            RunConfig::load(&workspace_root().join(format!("config/{name}.toml"))).unwrap();
        cfg.output_dir = dir.path().to_path_buf();
        cfg.stop.target_eval_return = None;
        cfg.stop.max_env_steps = Some(steps);
        cfg.eval.period_steps = 1_000;
        cfg.eval.episodes = 1;
        cfg.checkpoint.replay = true;
        cfg.dqn.prioritized = prioritized;
        // One gradient step per env step, as the counts say.
        cfg.dqn.train_freq = 1;
        cfg.dqn.gradient_steps = 1;
        let summary = SingleRun::new(&cfg, &RunOptions::default())
            .unwrap()
            .run(&CancellationToken::new())
            .unwrap();
        assert_eq!(summary.train_steps, first, "{name}");
        let ck_path = dir.path().join("checkpoint.safetensors");
        let saved = Checkpoint::load(&ck_path).unwrap();
        let img = saved
            .replay
            .as_ref()
            .expect("the replay is in the checkpoint");
        assert_eq!(img.counters["len"], steps, "{name}");
        let mut parts: Vec<&str> = img.blobs.keys().map(String::as_str).collect();
        parts.sort();
        let mut want = vec!["actions", "discounts", "next_obs", "obs", "rewards"];
        if prioritized {
            want.push("priorities");
        }
        want.sort();
        assert_eq!(parts, want, "{name}");
        if prioritized {
            // Priorities moved away from the initial 1.0 with the TD errors.
            let p = img.blobs["priorities"].bytes.chunks_exact(8);
            let distinct: std::collections::BTreeSet<u64> = p
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            assert!(
                distinct.len() > 100,
                "{name}: {} priorities",
                distinct.len()
            );
        }

        cfg.stop.max_env_steps = Some(steps + 500);
        let train_steps = resume_with_the_replay(&cfg, ck_path, img, name);
        assert_eq!(train_steps, total, "{name}: training waited");
    }
}

/// A frame-stacked byte replay (frame chains: each frame kept once) with
/// n-step returns and priorities comes back from its checkpoint exactly,
/// wrapped around (its oldest chains overwritten) and with episodes cut by
/// a time limit, and the resumed run trains at once.
#[test]
fn a_checkpointed_frame_chain_replay_comes_back_exactly() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
name = "chains-resume"
env = "python:rlfleet_test_envs:Frames"
env_kwargs = {{ shape = [12, 12], n_actions = 3, length = 37 }}
python_path = ["{envs}"]
agent = "dqn"
workflow = "single"
frame_stack = 4
seed = 5
output_dir = "{out}"
[stop]
max_env_steps = 1500
[eval]
period_steps = 1000
episodes = 1
[checkpoint]
replay = true
[model]
torso = "nature-cnn"
channels = [8]
kernels = [3]
strides = [1]
[dqn]
hidden = [16]
batch_size = 16
buffer_size = 1000
learning_starts = 200
train_freq = 1
gradient_steps = 1
n_step = 3
prioritized = true
"#,
        envs = crate::python_envs::test_envs(),
        out = dir.path().display(),
    );
    let mut cfg = RunConfig::from_toml(&text, "chains-resume").unwrap();
    let summary = SingleRun::new(&cfg, &RunOptions::default())
        .unwrap()
        .run(&CancellationToken::new())
        .unwrap();
    assert_eq!(summary.counters.env_steps, 1_500);
    let first = summary.train_steps;
    assert!(first > 1_000, "{first} train steps");
    let ck_path = dir.path().join("checkpoint.safetensors");
    let saved = Checkpoint::load(&ck_path).unwrap();
    let img = saved
        .replay
        .as_ref()
        .expect("the replay is in the checkpoint");
    // The ring wrapped: every slot holds a step, and 1,500 went in.
    assert_eq!(
        (
            img.counters["len"],
            img.counters["pushed"],
            img.counters["frame"]
        ),
        (1_000, 1_500, 144)
    );
    // One frame a slot, not a stack and a next frame.
    assert_eq!(img.blobs["chain.frames"].bytes.len(), 1_000 * 144);
    assert!(img.blobs.contains_key("priorities"));
    cfg.stop.max_env_steps = Some(1_700);
    // One gradient step per env step from the first resumed step.
    let train_steps = resume_with_the_replay(&cfg, ck_path, img, "chains");
    assert_eq!(train_steps, first + 200, "training waited");
}
