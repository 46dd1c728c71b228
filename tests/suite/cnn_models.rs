//! Convolutional torsos (`[model] torso = "nature-cnn"`) on uint8 image
//! observations: ONNX Runtime computes what tch does for CNN policies
//! (before and after a weight update, and from an exported file in
//! Python's onnxruntime); DQN with a small CNN learns bsuite's Catch to its
//! optimum through `async` over QUIC, its actors running the network in
//! ONNX Runtime; Atari Breakout (ale-py, Gymnasium's preprocessing) runs
//! under `seed` (inference in libtorch on the learner) and `async` with 2
//! actors x 2 envs, bytes on the wire and replay memory as stated; a CNN
//! run resumes with every tensor restored.

use crate::onnx_parity::{
    ROWS, TOLERANCE, export, max_diff, python_onnxruntime, run_ort, run_tch, session,
};
use crate::python_envs::test_envs;
use rand::{Rng, SeedableRng};
use rlfleet_learning::agents::build_agent;
use rlfleet_shared::config::{RunConfig, WorkflowKind};
use rlfleet_shared::onnx::PolicyGraph;
use rlfleet_tests::daemon::{Daemon, actor_counts, finish_actor};
use rlfleet_tests::{heavy, workspace_root};
use std::path::Path;
use std::time::Duration;
use tch::Device;

/// A run of `python:rlfleet_test_envs:{env}` with a convolutional torso;
/// `extra` goes at the top level (before the tables), `tables` after.
fn config(name: &str, env: &str, agent: &str, extra: &str, tables: &str, dir: &Path) -> RunConfig {
    let text = format!(
        r#"
name = "{name}"
env = "python:rlfleet_test_envs:{env}"
python_path = ["{envs}"]
agent = "{agent}"
seed = 3
output_dir = "{out}"
{extra}
{tables}
"#,
        envs = test_envs(),
        out = dir.join(name).display(),
    );
    RunConfig::from_toml(&text, name).unwrap()
}

/// The small CNN Catch's 10x5 board takes: two 3x3 convolutions.
const CATCH_MODEL: &str = "[model]\ntorso = \"nature-cnn\"\nchannels = [16, 32]\n\
                           kernels = [3, 3]\nstrides = [1, 1]\n";

#[test]
fn cnn_policies_agree_in_onnx_runtime_and_tch_before_and_after_a_weight_update() {
    let dir = tempfile::tempdir().unwrap();
    let single = "workflow = \"single\"\n[stop]\nmax_env_steps = 1000\n";
    let cases = [
        // Catch's (1, 10, 5) board, channels first, a dueling Q head.
        config(
            "catch-dueling",
            "Catch",
            "dqn",
            single,
            &format!("{CATCH_MODEL}[dqn]\nhidden = [32]\ndueling = true\n"),
            dir.path(),
        ),
        // Atari's (84, 84, 4) stack, channels last, DQN-Nature's torso and
        // its 512 hidden units, a softmax policy.
        config(
            "frames-ppo",
            "Frames",
            "ppo",
            single,
            "[model]\ntorso = \"nature-cnn\"\n[ppo]\nhidden = [512]\n",
            dir.path(),
        ),
        // IMPALA's residual stacks (16, 32, 32) on the channels-last stack,
        // a dueling Q head.
        config(
            "frames-impala",
            "Frames",
            "dqn",
            single,
            "[model]\ntorso = \"impala-cnn\"\n[dqn]\nhidden = [256]\ndueling = true\n",
            dir.path(),
        ),
        // The same frames channels first, Q-values.
        config(
            "frames-dqn",
            "Frames",
            "dqn",
            single,
            "[env_kwargs]\nshape = [4, 84, 84]\n[model]\ntorso = \"nature-cnn\"\n\
             [dqn]\nhidden = [512]\n",
            dir.path(),
        ),
    ];
    let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
    for cfg in &cases {
        let spec = cfg.env_source().spec().unwrap();
        let torso = cfg.torso(&spec).expect("a convolutional torso");
        let graph = PolicyGraph::for_run(cfg, &spec);
        assert_eq!(graph.net.torso(), Some(&torso));
        let head = graph.head.output();
        let agent = build_agent(cfg, &spec, Device::Cpu);
        let mut w = agent.weights().data;
        assert_eq!(w.len(), graph.numel(), "{}", cfg.name);
        let od = spec.obs_dim();
        // Pixels as the env gives them: whole numbers in 0..=255.
        let obs: Vec<f32> = (0..ROWS * od)
            .map(|_| rng.random_range(0..256u32) as f32)
            .collect();
        let mut s = session(&graph.model(None));
        for round in ["initial", "updated"] {
            let (out, h) = run_ort(&mut s, head, &obs, od, Some(&w));
            let (t_out, t_h) = run_tch(cfg, &spec, &graph, &w, &obs);
            let (d_out, d_h) = (max_diff(&out, &t_out), max_diff(&h, &t_h));
            eprintln!(
                "{} ({}), {round} weights: max |ort - tch| out {d_out:.2e}, {head} {d_h:.2e}",
                cfg.name,
                graph.net.describe()
            );
            assert!(
                d_out <= TOLERANCE && d_h <= TOLERANCE,
                "{} {round}: {d_out} {d_h}",
                cfg.name
            );
            let mut standalone = session(&graph.model(Some(&w)));
            let (_, s_h) = run_ort(&mut standalone, head, &obs, od, None);
            assert!(max_diff(&s_h, &t_h) <= TOLERANCE, "{} standalone", cfg.name);
            for v in w.iter_mut() {
                *v += (rng.random::<f32>() - 0.5) * 0.02;
            }
        }
    }
}

/// Starts a run on a fresh daemon with `actors` actor processes of `envs`
/// envs each (their log at info), waits for it to finish, and returns the
/// daemon, the final status and each actor's stderr.
fn run_with_actors(
    cfg: &RunConfig,
    actors: usize,
    envs: u32,
    limit: Duration,
) -> (Daemon, serde_json::Value, Vec<String>) {
    let d = Daemon::start("", "");
    let id = d.start_run(cfg);
    let children: Vec<_> = (0..actors)
        .map(|i| d.actor_with_env(&format!("a{i}"), envs, &["--once"], &[("RUST_LOG", "info")]))
        .collect();
    let status = d.wait_finished(&id, limit);
    let logs = children
        .into_iter()
        .map(|c| {
            let (ok, err) = finish_actor(c);
            assert!(ok, "{}: {err}", cfg.name);
            err
        })
        .collect();
    (d, status, logs)
}

/// DQN with the small CNN on a Catch of `env` under `async` over QUIC,
/// stopped by a confirmed 0.99 (`extra`: more tables).
fn catch_over_quic(name: &str, env: &str, extra: &str, dir: &Path) -> RunConfig {
    config(
        name,
        env,
        "dqn",
        "workflow = \"async\"\ntransport = \"quic\"\n",
        &format!(
            "[stop]\ntarget_eval_return = 0.99\nmax_env_steps = 40000\nmax_episodes = 10000\nmax_wall_secs = 300.0\n\
             [eval]\nperiod_steps = 1000\nepisodes = 10\nconfirm_episodes = 100\n\
             {extra}\
             [distributed]\nbatch_step_frequency = 9\n\
             {CATCH_MODEL}\
             [dqn]\nhidden = [64]\nlr = 0.001\nbatch_size = 32\nbuffer_size = 10000\n\
             learning_starts = 500\ntarget_update_interval = 200\neps_decay_steps = 4000\n\
             eps_end = 0.02\n"
        ),
        dir,
    )
}

/// A third-party image game suite, first try: boolean planes `(10, 5, 2)`
/// channels last (accepted as 0/1 bytes, seen by the network unscaled;
/// `layout = "auto"` reads the 2 as channels), and a `reset` that seeds
/// numpy's legacy `RandomState` (every seed rlfleet hands an env is below
/// 2^32, evaluations' too): DQN with a small CNN learns it through `async`
/// over QUIC, its screening and confirming evaluations run, and the
/// confirmed target stops the run.
#[test]
fn a_bool_image_env_with_legacy_seeding_trains_evaluates_and_stops_on_its_target() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let cfg = catch_over_quic("bool-catch", "BoolCatch", "", dir.path());
    let (d, status, _logs) = run_with_actors(&cfg, 4, 1, Duration::from_secs(360));
    assert_eq!(status["state"], "finished", "{status}");
    assert!(
        status["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("target reached")),
        "BoolCatch is learned and its evaluations stop the run: {status}"
    );
    let evals = rlfleet_output::read_evals(&cfg.output_dir.join("evals.csv")).unwrap();
    assert!(
        evals.iter().any(|e| !e.confirming),
        "screening evaluations ran"
    );
    let confirmed = evals.iter().filter(|e| e.confirming && e.episodes == 100);
    assert!(
        confirmed.clone().any(|e| e.mean_return >= 0.99),
        "a confirming evaluation of 100 episodes held the target: {evals:?}"
    );
    assert!(
        !d.log().contains("Seed must be between"),
        "no env refused its seed"
    );
    // Bytes in the replay: per slot two 100-byte boards, then action,
    // reward and discount as f32.
    assert_eq!(
        status["replay_bytes"],
        u64::from(cfg.dqn.buffer_size) * (2 * 100 + 12),
        "{status}"
    );
}

#[test]
fn atari_breakout_runs_under_seed_and_async_with_bytes_on_the_wire() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    // AtariPreprocessing and `frame_stack = 4`: observations are uint8
    // [4, 84, 84], frames 84 x 84.
    let (frame, stack) = (84 * 84u64, 4 * 84 * 84u64);
    for (workflow, kind) in [("seed", WorkflowKind::Seed), ("async", WorkflowKind::Async)] {
        let steps = 2_000u64;
        let mut cfg =
            RunConfig::load(&workspace_root().join("config/breakout-dqn-rma.toml")).unwrap();
        cfg.name = format!("breakout-{workflow}");
        cfg.output_dir = dir.path().join(&cfg.name);
        cfg.workflow = kind;
        // A few thousand frames: episodes cut at 1,000 frames (250 steps).
        cfg.env_kwargs
            .insert("max_num_frames_per_episode".into(), 1_000.into());
        cfg.stop.target_eval_return = None;
        cfg.stop.max_env_steps = Some(steps);
        cfg.stop.max_wall_secs = Some(240.0);
        cfg.eval.period_steps = 1_000_000;
        cfg.dqn.buffer_size = 1_000;
        cfg.dqn.learning_starts = 500;
        cfg.dqn.train_freq = 16;
        cfg.validate().unwrap();
        let spec = cfg.env_source().spec().unwrap();
        assert_eq!(spec.obs_shape, vec![4, 84, 84]);
        let (d, status, logs) = run_with_actors(&cfg, 2, 2, Duration::from_secs(300));
        assert_eq!(status["state"], "finished", "{workflow}: {status}");
        let env_steps = status["env_steps"].as_u64().unwrap();
        assert!(env_steps >= steps, "{workflow}: {status}");
        let episodes = status["episodes_finished"].as_u64().unwrap();
        assert!(episodes >= 4, "{workflow}: {status}");
        let eps = rlfleet_output::read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
        assert_eq!(eps.len() as u64, episodes);
        let ids: std::collections::BTreeSet<u64> = eps.iter().map(|e| e.episode).collect();
        assert_eq!(
            ids.len(),
            eps.len(),
            "{workflow}: an episode finished twice"
        );
        assert!(eps.iter().all(|e| e.length <= 250), "{workflow}");
        // Frames travel as bytes, each once: the learner keeps the stacks.
        // `seed` sends one frame a step, `async` one a step and one more
        // per run of steps (a run starts from the frame its first action
        // saw); as whole stacks it would be four times as much, as f32
        // sixteen.
        let per_step = frame;
        let received = d.metric("rlfleet_transport_received_bytes_total{transport=\"quic\"}");
        let floor = (env_steps * per_step) as f64;
        eprintln!(
            "breakout {workflow}: {env_steps} env steps ({} frames), {episodes} episodes, \
             {received} bytes received ({:.3} of the frames' bytes), {} train steps",
            4 * env_steps,
            received / floor,
            status["train_steps"]
        );
        assert!(
            received >= floor && received < 1.2 * floor,
            "{workflow}: {received} bytes for {env_steps} steps of {per_step} frame bytes"
        );
        // The replay keeps each frame once: per slot one frame, the action,
        // reward, how it ended, its episode and two links (25 bytes); per
        // chain (one play of an episode in the ring) the three older frames
        // of its first stack and its last step's next frame, each with a
        // 4-byte key. Kept as stacks it would be `stack + frame + 12`.
        let buffer = u64::from(cfg.dqn.buffer_size);
        let replay = status["replay_bytes"].as_u64().unwrap();
        let slots = buffer * (frame + 25);
        let chains = (replay - slots.min(replay)) as f64 / (4 * frame + 8) as f64;
        eprintln!(
            "breakout {workflow}: replay {replay} bytes, {:.0} per slot (a frame is {frame}; \
             as stacks {}), about {chains:.1} chains",
            replay as f64 / buffer as f64,
            stack + frame + 12
        );
        assert!(
            replay >= slots + 3 * frame + 4 && replay <= slots + (episodes + 8) * (4 * frame + 8),
            "{workflow}: {replay} bytes in a {buffer}-slot replay of {episodes} episodes"
        );
        assert!(status["train_steps"].as_u64().unwrap() > 0, "{status}");
        // The weights the actors got (async: in acknowledgements) went as
        // one shared frame per version, not one encoding per actor.
        let encoded = d.metric("rlfleet_weights_frames_encoded_total");
        let versions = status["train_steps"].as_u64().unwrap() as f64 + 1.0;
        if workflow == "async" {
            let sent = d.metric("rlfleet_weights_sent_total{transport=\"quic\"}");
            assert!(
                encoded >= 1.0 && encoded <= versions && encoded <= sent,
                "{encoded} weights frames for {versions} versions, {sent} sent"
            );
        }
        if workflow == "seed" {
            // The learner answered from libtorch (a convolutional network).
            assert!(
                d.log().contains("seed inference on the learner's device"),
                "{}",
                d.log()
            );
        } else {
            for log in &logs {
                assert!(log.contains("onnx-runtime"), "{log}");
            }
        }
    }
}

#[test]
fn a_cnn_dqn_run_resumes_with_every_tensor_restored() {
    use rlfleet_checkpoint::Checkpoint;
    use rlfleet_run::workflows::{RunOptions, SingleRun, StopReason};
    use tokio_util::sync::CancellationToken;
    let dir = tempfile::tempdir().unwrap();
    let catch = |steps: u64| {
        let mut cfg = config(
            "catch-resume",
            "Catch",
            "dqn",
            "workflow = \"single\"\n",
            &format!(
                "[stop]\nmax_env_steps = {steps}\n[eval]\nperiod_steps = 500\nepisodes = 2\n\
                 {CATCH_MODEL}[dqn]\nhidden = [32]\nbatch_size = 16\nlearning_starts = 200\n"
            ),
            dir.path(),
        );
        cfg.output_dir = dir.path().join("run");
        cfg
    };
    let first = catch(900);
    let summary = SingleRun::new(&first, &RunOptions::default())
        .unwrap()
        .run(&CancellationToken::new())
        .unwrap();
    assert_eq!(summary.reason, StopReason::MaxEnvSteps);
    // One gradient step per env step from learning_starts on.
    assert_eq!(summary.train_steps, 701);
    let ck_path = first.output_dir.join("checkpoint.safetensors");
    let saved = Checkpoint::load(&ck_path).unwrap();
    let spec = first.env_source().spec().unwrap();
    let numel = first.policy_shape(&spec, 3).numel();
    assert!(numel > 16 * 9, "the network has its convolutions: {numel}");

    let second = catch(1_200);
    let run = SingleRun::new(&second, &RunOptions::new(Some(ck_path), false)).unwrap();
    assert_eq!(run.agent().train_steps(), 701);
    // Online and target networks (convolutions included), both Adam
    // moments and the largest |reward| seen: every value as saved.
    let state = run.agent().state();
    assert_eq!(state.tensors.len(), 5);
    for t in &state.tensors {
        let want = saved.agent_state.tensor(&t.name).unwrap();
        let len = if t.name == "reward.max_abs" { 1 } else { numel };
        assert_eq!(t.data.len(), len, "`{}`", t.name);
        assert!(
            t.data == want.data,
            "tensor `{}` differs from the checkpoint",
            t.name
        );
    }
    assert_eq!(state.optimizer_steps, 701);
    let summary = run.run(&CancellationToken::new()).unwrap();
    assert_eq!(summary.counters.env_steps, 1_200, "continues from 900");
}

#[test]
fn a_torso_that_does_not_fit_the_env_or_agent_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |env: &str, agent: &str, tables: &str| {
        let path = if env.starts_with("python:") {
            format!("python_path = [\"{}\"]\n", test_envs())
        } else {
            String::new()
        };
        let text = format!(
            "name = \"bad\"\nenv = \"{env}\"\n{path}agent = \"{agent}\"\n\
             workflow = \"single\"\noutput_dir = \"{}\"\n[stop]\nmax_env_steps = 10\n{tables}",
            dir.path().display()
        );
        RunConfig::from_toml(&text, "bad.toml")
            .unwrap_err()
            .to_string()
    };
    let nature = "[model]\ntorso = \"nature-cnn\"\n";
    let e = refused("CartPole-v1", "dqn", nature);
    assert!(
        e.contains("needs image observations") && e.contains("CartPole-v1") && e.contains("[4]"),
        "{e}"
    );
    // DQN-Nature's 8x8 kernel on Catch's 10x5 board.
    let e = refused("python:rlfleet_test_envs:Catch", "dqn", nature);
    assert!(e.contains("8x8 kernel does not fit its 10x5 input"), "{e}");
    let e = refused(
        "python:rlfleet_test_envs:Catch",
        "dqn",
        "[model]\ntorso = \"nature-cnn\"\nchannels = [8]\nkernels = [3, 3]\nstrides = [1]\n",
    );
    assert!(e.contains("one entry per convolution"), "{e}");
    let e = refused(
        "python:rlfleet_test_envs:Catch",
        "dqn",
        "[model]\ntorso = \"impala-cnn\"\nkernels = [3]\n",
    );
    assert!(e.contains("takes model.channels only"), "{e}");
    let e = refused("Pendulum-v1", "td3", nature);
    assert!(
        e.contains("model.torso") && e.contains("`td3` takes"),
        "{e}"
    );
    let e = refused(
        "python:rlfleet_test_envs:Catch",
        "dqn",
        "[model]\ntorso = \"resnet\"\n",
    );
    assert!(e.contains("model.torso") || e.contains("resnet"), "{e}");
}

/// Learning-to-target tests of this area (selected by `learn::`).
mod learn {
    use super::*;

    #[test]
    fn a_cnn_dqn_learns_catch_through_async_over_quic_and_exports_to_python() {
        let _heavy = heavy();
        let dir = tempfile::tempdir().unwrap();
        // Catch is deterministic but for the ball's column: a greedy policy that
        // catches from all five columns scores 1.0 on every episode, one that
        // misses one scores at most 0.6 over 100.
        let cfg = catch_over_quic(
            "catch-async",
            "Catch",
            "[checkpoint]\nperiod_steps = 5000\n",
            dir.path(),
        );
        let (d, status, logs) = run_with_actors(&cfg, 4, 1, Duration::from_secs(360));
        assert_eq!(status["state"], "finished", "{status}");
        assert!(
            status["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("target reached")),
            "Catch is learned by the CNN: {status}"
        );
        eprintln!(
            "catch: {} at {} env steps",
            status["reason"], status["env_steps"]
        );
        // The actors ran the CNN in ONNX Runtime (chosen for a convolutional
        // network), and each played.
        for log in &logs {
            assert!(
                log.contains("backend=\"onnx-runtime\"") || log.contains("backend=onnx-runtime"),
                "{log}"
            );
            let counts = actor_counts(log).expect("an actor done line");
            assert!(counts.env_steps > 0 && counts.sessions == 1, "{counts:?}");
        }
        let (ids, _) = rlfleet_tests::episode_ids_and_steps(&cfg.output_dir);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "an id twice");
        assert_eq!(
            ids.len() as u64,
            status["episodes_finished"].as_u64().unwrap(),
            "each finished episode once: {status}"
        );
        // The replay holds bytes: per slot two 50-byte boards, then action,
        // reward and discount as f32.
        assert_eq!(
            status["replay_bytes"],
            u64::from(cfg.dqn.buffer_size) * (2 * 50 + 12),
            "{status}"
        );
        drop(d);

        // The trained policy, exported, plays in Python's onnxruntime as tch
        // computes it.
        let onnx = dir.path().join("catch.onnx");
        let stdout = export(&cfg.output_dir, &onnx);
        assert!(stdout.starts_with("wrote "), "{stdout}");
        let spec = cfg.env_source().spec().unwrap();
        let graph = PolicyGraph::for_run(&cfg, &spec);
        let ck =
            rlfleet_checkpoint::Checkpoint::load(&cfg.output_dir.join("checkpoint.safetensors"))
                .unwrap();
        let w = ck.best.expect("evaluated").weights.data;
        // Every start column, the ball at every height, the paddle everywhere.
        let mut obs = Vec::new();
        for ball in 0..50 {
            for paddle in 0..5 {
                let mut board = [0f32; 50];
                board[ball] = 255.0;
                board[45 + paddle] = 255.0;
                obs.extend_from_slice(&board);
            }
        }
        let (_, want) = run_tch(&cfg, &spec, &graph, &w, &obs);
        let got = python_onnxruntime(&onnx, graph.head.output(), &obs, 50);
        let diff = max_diff(&got, &want);
        eprintln!("catch export: python onnxruntime vs tch, max |diff| {diff:.2e}");
        assert!(diff <= TOLERANCE, "{diff}");
    }
}
