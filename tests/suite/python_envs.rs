//! Bring your own environment: Gymnasium ids (`gymnasium:ID`) and a user's
//! own classes (`python:module:attr`, from `tests/envs/`) run through the
//! embedded interpreter on real actor processes over QUIC. Parity with the
//! built-in CartPole step for step; a user env with a known optimum trained
//! to it through `async` and `seed`; an env that raises loses its episode,
//! which is played again (exact counts); unknown ids and unsupported spaces
//! refused at start with the Python error while the daemon stays up;
//! multi-dimensional MuJoCo actions kept inside their box.

use rlfleet_output::read_episodes;
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::{self, Action, EnvSource, Space};
use rlfleet_tests::daemon::{Daemon, actor_counts, finish_actor};
use rlfleet_tests::{binary, heavy, run_embedded, workspace_root};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The folder of the test envs, as a config's `python_path` entry.
pub(crate) fn test_envs() -> String {
    workspace_root().join("tests/envs").display().to_string()
}

#[test]
fn gymnasium_cartpole_through_the_bridge_matches_the_builtin_step_for_step() {
    let mut bridged = EnvSource::plain("gymnasium:CartPole-v1").make().unwrap();
    let mut builtin = env::make("CartPole-v1").unwrap();
    let spec = bridged.spec().clone();
    assert_eq!(spec.observation_space, builtin.spec().observation_space);
    assert_eq!(spec.action_space, Space::Discrete { n: 2 });
    assert_eq!(spec.max_episode_steps, Some(500));
    assert_eq!(spec.reward_threshold, Some(475.0));
    let (mut a, mut b) = (vec![0f32; 4], vec![0f32; 4]);
    let mut steps = 0;
    for episode in 0..20u64 {
        // Gymnasium seeds through NumPy's SeedSequence, the built-in its
        // own way: start both from the bridged env's first state.
        bridged.reset(Some(episode), &mut a);
        builtin.reset(Some(episode), &mut b);
        builtin.set_state(&bridged.state());
        assert_eq!(builtin.state(), bridged.state());
        for t in 0.. {
            // A fixed, varied action sequence (runs of 0s and 1s).
            let action = Action::Discrete((t / 3 + episode as usize) % 2);
            let (sa, sb) = (bridged.step(action, &mut a), builtin.step(action, &mut b));
            steps += 1;
            assert_eq!(a, b, "episode {episode} step {t}");
            assert_eq!(sa, sb, "episode {episode} step {t}");
            if sa.done() {
                break;
            }
        }
    }
    assert!(steps > 200, "{steps}");
}

#[test]
fn a_user_env_reports_its_flattened_shape_and_one_hot_of_any_shape() {
    let source = EnvSource {
        id: "python:rlfleet_test_envs:Corridor".into(),
        kwargs_json: r#"{"length": 6}"#.into(),
        wrappers: vec![],
        python_path: vec![test_envs()],
        frame_stack: 1,
    };
    let mut e = source.make().unwrap();
    let spec = e.spec().clone();
    assert_eq!(spec.obs_shape, vec![2, 3]);
    assert_eq!(spec.obs_dim(), 6);
    let mut obs = vec![0f32; 6];
    e.reset(Some(1), &mut obs);
    assert_eq!(obs, vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let mut ret = 0.0;
    for _ in 0..5 {
        let s = e.step(Action::Discrete(1), &mut obs);
        ret += s.reward;
        assert_eq!(s.terminated, obs[5] == 1.0);
    }
    assert!((ret - 0.6).abs() < 1e-9, "{ret}");
}

#[test]
fn a_non_finite_observation_or_reward_is_the_env_s_fault() {
    let source = EnvSource {
        id: "python:rlfleet_test_envs:Diverging".into(),
        python_path: vec![test_envs()],
        ..EnvSource::default()
    };
    let mut e = source.make().unwrap();
    let mut obs = vec![0f32; 8];
    e.try_reset(Some(0), &mut obs).unwrap();
    e.try_step(Action::Discrete(0), &mut obs).unwrap();
    e.try_step(Action::Discrete(0), &mut obs).unwrap();
    let fault = e.try_step(Action::Discrete(0), &mut obs).unwrap_err();
    assert!(
        fault
            .0
            .starts_with("ValueError: the env returned a non-finite observation (value 0 is NaN)"),
        "{fault}"
    );
    let fault = e.try_step(Action::Discrete(0), &mut obs).unwrap_err();
    assert_eq!(
        fault.0,
        "ValueError: the env returned a non-finite reward (inf)"
    );
}

#[test]
fn unknown_ids_unsupported_spaces_and_misplaced_options_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "env = \"gymnasium:NoSuchEnv-v9\"",
            "NameNotFound: Environment `NoSuchEnv` doesn't exist",
        ),
        (
            "env = \"python:rlfleet_test_envs:DictObservation\"",
            "observation space Dict",
        ),
        (
            "env = \"python:no_such_module:Env\"",
            "ModuleNotFoundError: No module named 'no_such_module'",
        ),
        (
            "env = \"CartPole-v1\"\nenv_wrappers = [\"gymnasium.wrappers:FlattenObservation\"]",
            "apply to Python envs only",
        ),
    ];
    let d = Daemon::start("", "");
    for (env_line, expected) in cases {
        let text = format!(
            "name = \"refused\"\n{env_line}\npython_path = [\"{}\"]\nagent = \"dqn\"\n\
             workflow = \"async\"\ntransport = \"quic\"\noutput_dir = \"{}\"\n[stop]\nmax_episodes = 5\n",
            test_envs(),
            dir.path().join("out").display()
        );
        let path = dir.path().join("refused.toml");
        std::fs::write(&path, &text).unwrap();
        let out = rlfleet_tests::output_within(
            Command::new(binary("learner-server"))
                .args(["run", "--no-progress"])
                .arg(&path),
            Duration::from_secs(120),
            "learner-server run of a refused env",
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{env_line}: {stderr}");
        assert!(stderr.contains(expected), "{env_line}: {stderr}");
        // The same config through the control API: 400, the same text.
        let cfg: toml::Value = toml::from_str(&text).unwrap();
        let (status, body) = d.post("/v1/runs", &serde_json::to_string(&cfg).unwrap());
        assert_eq!(status, 400, "{env_line}: {body}");
        assert!(body.contains(expected), "{env_line}: {body}");
    }
    let (status, _) = d.get("/healthz");
    assert_eq!(status, 200, "the daemon is still up");
    assert_eq!(d.json("/v1/runs"), serde_json::json!([]), "nothing started");
}

/// Starts a [`corridor_config`] run on `d` that stops after `episodes`
/// (or two minutes); its config and id.
pub(crate) fn start_corridor_run(
    d: &Daemon,
    name: &str,
    env: &str,
    workflow: &str,
    episodes: u64,
) -> (RunConfig, String) {
    let stop = format!("[stop]\nmax_episodes = {episodes}\nmax_wall_secs = 120.0");
    let cfg = corridor_config(name, env, workflow, &stop, d.dir.path());
    let id = d.start_run(&cfg);
    (cfg, id)
}

/// A DQN run of `env` (a Corridor of length 8 unless `kwargs` says
/// otherwise) for `workflow` over QUIC (`single`: in process).
pub(crate) fn corridor_config(
    name: &str,
    env: &str,
    workflow: &str,
    extra: &str,
    dir: &Path,
) -> RunConfig {
    let text = format!(
        r#"
name = "{name}"
env = "python:rlfleet_test_envs:{env}"
python_path = ["{envs}"]
agent = "dqn"
workflow = "{workflow}"
transport = "{transport}"
seed = 3
output_dir = "{out}"
{extra}
[eval]
period_steps = 500
episodes = 5
[distributed]
batch_step_frequency = 8
[dqn]
hidden = [32]
lr = 0.002
batch_size = 32
buffer_size = 20000
learning_starts = 300
target_update_interval = 200
eps_decay_steps = 3000
"#,
        envs = test_envs(),
        out = dir.join(name).display(),
        transport = if workflow == "single" {
            "inproc"
        } else {
            "quic"
        },
    );
    RunConfig::from_toml(&text, name).unwrap()
}

#[test]
fn a_user_env_trains_to_its_optimal_return_through_async_and_seed() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    for workflow in ["async", "seed"] {
        let name = format!("corridor-{workflow}");
        let stop = "[stop]\ntarget_eval_return = 0.39\nmax_env_steps = 40000\n\
                    max_episodes = 20000\nmax_wall_secs = 240.0";
        let cfg = corridor_config(&name, "Corridor", workflow, stop, dir.path());
        let out = run_embedded(&cfg, dir.path(), &[]);
        assert!(out.success, "{name}: {}\n{}", out.stdout, out.stderr);
        // The optimum of a length-8 corridor: 6 steps at -0.1, then +1.
        assert!(
            out.stdout
                .starts_with("target reached (evaluation mean 0.4"),
            "{name}: {}",
            out.stdout
        );
        let reports: Vec<_> = out.stderr.lines().filter_map(actor_counts).collect();
        assert_eq!(reports.len(), 4, "{name}: {}", out.stderr);
        assert!(reports.iter().all(|r| r.env_steps > 0), "{reports:?}");
        eprintln!("{name}: {}", out.stdout.trim());
    }
}

/// Runs `FaultyCorridor` (raises on the 25th step of each actor process)
/// with 4 actor processes on the daemon; checks the exact books.
fn faults_are_contained(workflow: &str) {
    const EPISODES: u64 = 60;
    const FAIL_AT: u64 = 25;
    let d = Daemon::start("", "");
    let stop = format!("[stop]\nmax_episodes = {EPISODES}\nmax_wall_secs = 120.0");
    let mut cfg = corridor_config(
        &format!("faulty-{workflow}"),
        "FaultyCorridor",
        workflow,
        &stop,
        d.dir.path(),
    );
    cfg.env_kwargs
        .insert("fail_at".into(), serde_json::json!(FAIL_AT));
    let id = d.start_run(&cfg);
    let actors: Vec<_> = (0..4)
        .map(|i| d.actor(&format!("a{i}"), 1, &["--once"]))
        .collect();
    let status = d.wait_finished(&id, Duration::from_secs(120));
    assert_eq!(status["state"], "finished", "{workflow}: {status}");
    let mut faulted = 0;
    for a in actors {
        let (ok, err) = finish_actor(a);
        assert!(ok, "{workflow}: {err}");
        let r = actor_counts(&err).unwrap();
        assert!(r.env_steps > 0, "{workflow}: {r:?}");
        // Each process raises once, on its 25th step, if it got that far;
        // the actor logs it.
        faulted += err
            .matches("RuntimeError: simulator diverged at step 25")
            .count() as u64;
    }
    assert!(faulted >= 1, "{workflow}: no actor reached step {FAIL_AT}");
    assert_eq!(status["env_errors"], faulted, "{workflow}: {status}");
    assert_eq!(d.metric("rlfleet_env_errors_total"), faulted as f64);
    assert!(
        status["episodes_reissued"].as_u64().unwrap() >= faulted,
        "{workflow}: {status}"
    );
    // Every id finished exactly once; every step is in a finished episode
    // or counted abandoned (the broken episodes' steps sent before the
    // fault).
    let eps = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    let ids: Vec<u64> = eps.iter().map(|e| e.episode).collect();
    assert_eq!(ids.len() as u64, EPISODES, "{workflow}");
    assert_eq!(
        ids.iter().copied().collect::<BTreeSet<_>>(),
        (0..EPISODES).collect(),
        "{workflow}"
    );
    let lengths: u64 = eps.iter().map(|e| u64::from(e.length)).sum();
    assert_eq!(
        lengths + status["env_steps_abandoned"].as_u64().unwrap(),
        status["env_steps"].as_u64().unwrap(),
        "{workflow}: {status}"
    );
    let log = d.log();
    assert!(
        log.contains("an actor's env raised RuntimeError: simulator diverged at step 25")
            && log.contains("rlfleet_test_envs.py"),
        "{workflow}: the learner logs the exception and its frame"
    );
    let summary = std::fs::read_to_string(cfg.output_dir.join("summary.toml")).unwrap();
    assert!(
        summary.contains(&format!("env_errors = {faulted}\n")),
        "{summary}"
    );
}

#[test]
fn an_env_that_raises_loses_its_episode_which_is_played_again_async() {
    let _heavy = heavy();
    faults_are_contained("async");
}

#[test]
fn an_env_that_raises_loses_its_episode_which_is_played_again_seed() {
    let _heavy = heavy();
    faults_are_contained("seed");
}

#[test]
fn mujoco_reacher_td3_over_quic_keeps_every_action_inside_its_box() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
name = "reacher-td3"
env = "gymnasium:Reacher-v5"
env_wrappers = ["rlfleet_test_envs:ActionsInBox"]
python_path = ["{envs}"]
agent = "td3"
workflow = "async"
transport = "quic"
seed = 1
output_dir = "{out}"
[stop]
max_env_steps = 4000
max_episodes = 1000
max_wall_secs = 120.0
[eval]
period_steps = 2000
episodes = 2
[distributed]
batch_step_frequency = 25
[td3]
hidden = [64, 64]
batch_size = 64
learning_starts = 500
"#,
        envs = test_envs(),
        out = dir.path().join("reacher").display()
    );
    let cfg = RunConfig::from_toml(&text, "reacher").unwrap();
    let spec = cfg.env_source().spec().unwrap();
    assert_eq!(spec.action_space.flat_dim(), 2, "Reacher has 2-D actions");
    let out = run_embedded(&cfg, dir.path(), &[]);
    assert!(out.success, "{}\n{}", out.stdout, out.stderr);
    let summary = rlfleet_tests::read_summary(&cfg.output_dir);
    // An action outside the box would have raised in the wrapper.
    assert_eq!(summary["env_errors"].as_integer(), Some(0), "{summary}");
    assert!(
        summary["env_steps"].as_integer().unwrap() >= 4000,
        "{summary}"
    );
    assert!(
        summary["train_steps"].as_integer().unwrap() > 1000,
        "{summary}"
    );
    // Reacher's episodes are 50 steps (its registered time limit).
    let eps = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    assert!(eps.len() >= 70, "{}", eps.len());
    assert!(eps.iter().all(|e| e.length == 50));
}

#[test]
fn single_plays_an_episode_again_when_its_env_raises() {
    let dir = tempfile::tempdir().unwrap();
    let stop = "[stop]\nmax_episodes = 20\nmax_wall_secs = 60.0";
    let mut cfg = corridor_config(
        "faulty-single",
        "FaultyCorridor",
        "single",
        stop,
        dir.path(),
    );
    cfg.eval.period_steps = 1_000_000;
    let out = rlfleet_tests::run_single(&cfg, dir.path());
    assert!(out.success, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("RuntimeError: simulator diverged at step 25"),
        "{}",
        out.stderr
    );
    let summary = rlfleet_tests::read_summary(&cfg.output_dir);
    assert_eq!(summary["env_errors"].as_integer(), Some(1), "{summary}");
    assert_eq!(summary["episodes"].as_integer(), Some(20), "{summary}");
    let eps = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    let ids: Vec<u64> = eps.iter().map(|e| e.episode).collect();
    assert_eq!(ids, (0..20).collect::<Vec<_>>());
}

#[test]
fn uint8_image_observations_stay_uint8_on_the_wire_and_in_replay() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    for workflow in ["async", "seed"] {
        let d = Daemon::start("", "");
        let name = format!("pixels-{workflow}");
        // The target is optimal play; runs here reach it at 10,000 to
        // 19,000 env steps (a CI run once missed it at 20,000).
        let stop = "[stop]\ntarget_eval_return = 0.39\nmax_env_steps = 60000\n\
                    max_episodes = 60000\nmax_wall_secs = 120.0";
        let cfg = corridor_config(&name, "PixelCorridor", workflow, stop, dir.path());
        let spec = cfg.env_source().spec().unwrap();
        assert_eq!(spec.obs_dtype, env::ObsDtype::U8);
        assert_eq!(
            (spec.obs_shape.clone(), spec.obs_dim()),
            (vec![1, 4, 8], 32)
        );
        let id = d.start_run(&cfg);
        let actors: Vec<_> = (0..4)
            .map(|i| d.actor(&format!("a{i}"), 1, &["--once"]))
            .collect();
        let status = d.wait_finished(&id, Duration::from_secs(120));
        for a in actors {
            let (ok, err) = finish_actor(a);
            assert!(ok, "{workflow}: {err}");
        }
        assert_eq!(status["state"], "finished", "{workflow}: {status}");
        assert!(
            status["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("target reached")),
            "{workflow}: the pixel corridor is learned through uint8 observations: {status}"
        );
        eprintln!(
            "{workflow}: {} at {} env steps",
            status["reason"], status["env_steps"]
        );
        // The replay's own accounting: 20,000 slots of two 32-byte
        // observations plus action, reward and discount as f32 — against
        // 2 * 32 * 4 bytes of observations per slot were they f32.
        let buffer = u64::from(cfg.dqn.buffer_size);
        assert_eq!(
            status["replay_bytes"],
            buffer * (2 * 32 + 4 * 3),
            "{status}"
        );
        assert_eq!(
            d.metric("rlfleet_replay_bytes"),
            (buffer * (2 * 32 + 12)) as f64
        );
    }
}

#[test]
fn a_lucky_screening_evaluation_does_not_stop_the_run_unconfirmed() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
name = "fluke"
env = "python:rlfleet_test_envs:Fluke"
python_path = ["{envs}"]
agent = "dqn"
workflow = "single"
seed = 4
output_dir = "{out}"
[stop]
target_eval_return = 0.5
max_env_steps = 3000
[eval]
period_steps = 500
episodes = 10
confirm_episodes = 100
[dqn]
hidden = [8]
learning_starts = 100
"#,
        envs = test_envs(),
        out = dir.path().join("fluke").display()
    );
    let cfg = RunConfig::from_toml(&text, "fluke").unwrap();
    let out = rlfleet_tests::run_single(&cfg, dir.path());
    assert!(out.success, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.starts_with("env step limit reached"),
        "{}",
        out.stdout
    );
    let evals = rlfleet_output::read_evals(&cfg.output_dir.join("evals.csv")).unwrap();
    let (confirming, screening): (Vec<_>, Vec<_>) = evals.iter().partition(|e| e.confirming);
    // Every screening evaluation passed (10 lucky starts), every
    // confirming one failed (100 other starts), and there was one at least.
    assert!(
        screening
            .iter()
            .all(|e| e.episodes == 10 && e.mean_return == 1.0),
        "{evals:?}"
    );
    assert!(!confirming.is_empty(), "{evals:?}");
    assert!(
        confirming
            .iter()
            .all(|e| e.episodes == 100 && e.mean_return == 0.0),
        "{evals:?}"
    );
    let summary = rlfleet_tests::read_summary(&cfg.output_dir);
    assert_eq!(summary["target_reached"].as_bool(), Some(false));
    assert_eq!(
        summary["screen_eval_return"].as_float(),
        Some(1.0),
        "{summary}"
    );
    assert_eq!(
        summary["confirm_eval_return"].as_float(),
        Some(0.0),
        "{summary}"
    );
}

/// Learning-to-target tests of this area (selected by `learn::`).
mod learn {
    use super::*;

    #[test]
    fn gymnasium_cartpole_learns_as_the_builtin_does_with_the_same_config() {
        let _heavy = heavy();
        let dir = tempfile::tempdir().unwrap();
        let shipped = workspace_root().join("config/cartpole-dqn-async.toml");
        let mut steps = Vec::new();
        for env in ["CartPole-v1", "gymnasium:CartPole-v1"] {
            let mut cfg = RunConfig::load(&shipped).unwrap();
            cfg.env = env.into();
            cfg.output_dir = dir.path().join(env.replace(':', "-"));
            let out = run_embedded(&cfg, dir.path(), &[]);
            assert!(out.success, "{env}: {}\n{}", out.stdout, out.stderr);
            assert!(
                out.stdout.starts_with("target reached (evaluation mean"),
                "{env}: {}",
                out.stdout
            );
            let summary = rlfleet_tests::read_summary(&cfg.output_dir);
            steps.push(summary["env_steps"].as_integer().unwrap() as f64);
            eprintln!("{env}: {}", out.stdout.trim());
        }
        // The same target within a factor of 20 in env steps: runs of 4 actor
        // processes are not step-for-step reproducible, and one seed of the
        // same config has stopped anywhere from 2,617 (a built-in run of
        // 2026-11-26, against 33,579 through Gymnasium in the same test) to
        // 50,000 steps.
        let ratio = steps[1] / steps[0];
        assert!((0.05..=20.0).contains(&ratio), "{steps:?}");
    }

    #[test]
    fn mujoco_reacher_td3_single_reaches_its_stated_return() {
        let _heavy = heavy();
        let dir = tempfile::tempdir().unwrap();
        let shipped = workspace_root().join("config/reacher-td3-single.toml");
        let mut cfg = RunConfig::load(&shipped).unwrap();
        cfg.output_dir = dir.path().join("reacher-single");
        assert_eq!(cfg.stop.target_eval_return, Some(-7.5));
        assert_eq!(cfg.eval.episodes, 100, "the target holds over 100 episodes");
        let out = rlfleet_tests::run_single(&cfg, dir.path());
        assert!(out.success, "{}\n{}", out.stdout, out.stderr);
        assert!(
            out.stdout.starts_with("target reached (evaluation mean"),
            "{}",
            out.stdout
        );
        let summary = rlfleet_tests::read_summary(&cfg.output_dir);
        assert!(summary["best_eval_return"].as_float().unwrap() >= -7.5);
        assert!(summary["env_steps"].as_integer().unwrap() <= 30_000);
        eprintln!("reacher single: {}", out.stdout.trim());
    }
}
