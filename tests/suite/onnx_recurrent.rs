//! A recurrent policy exported to ONNX: recurrent PPO is trained on
//! MemoryCorridor-v0 to its confirmed target, `learner-server export`
//! writes the best weights with the LSTM's state as the model's `state`
//! input and `state_out` output, and Python's onnxruntime, stepping each
//! episode from a zero state and feeding `state_out` back, picks the
//! same greedy action at every step as the learner's own policy (the
//! plain-Rust copy the evaluator acts with) — and so names every cue.

use crate::onnx_parity::export;
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::{self, Action};
use rlfleet_shared::policy::ActorPolicy;
use rlfleet_tests::{reference_python, workspace_root};
use std::process::Command;

const EPISODES: u64 = 30;

#[test]
fn exported_recurrent_policy_steps_in_python_onnxruntime_as_the_learner_does() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let shipped = workspace_root().join("config/memory-ppo-lstm-single.toml");
    let mut cfg = RunConfig::load(&shipped).unwrap();
    cfg.output_dir = dir.path().join("memory");
    let run = rlfleet_tests::run_single(&cfg, dir.path());
    assert!(run.success, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("target reached"), "{}", run.stdout);
    let onnx = dir.path().join("memory.onnx");
    let stdout = export(&cfg.output_dir, &onnx);
    assert!(stdout.starts_with("wrote"), "{stdout}");

    // The learner's greedy policy plays episodes; each step's observation
    // and action are kept.
    let spec = env::spec(&cfg.env).unwrap();
    let ck = rlfleet_checkpoint::Checkpoint::load(&cfg.output_dir.join("checkpoint.safetensors"))
        .unwrap();
    let w = ck.best.expect("evaluated").weights;
    let mut policy = ActorPolicy::new(&spec, cfg.agent, cfg.policy_net(&spec), false, 1).greedy();
    policy.load(w.version, &w.data).unwrap();
    let mut e = env::make(&cfg.env).unwrap();
    let (mut all_obs, mut lengths, mut actions) = (Vec::new(), Vec::new(), Vec::new());
    let mut obs = vec![0f32; spec.obs_dim()];
    let mut picked = Vec::new();
    let mut total = 0.0;
    for ep in 0..EPISODES {
        e.reset(Some(1000 + ep), &mut obs);
        policy.reset_slot(0);
        let mut len = 0;
        loop {
            all_obs.extend_from_slice(&obs);
            policy.act_slots(&obs, &[0], &mut picked);
            actions.push(picked[0] as i64);
            len += 1;
            let step = e.step(Action::Discrete(picked[0] as usize), &mut obs);
            total += step.reward;
            if step.done() {
                break;
            }
        }
        lengths.push(len);
    }
    assert_eq!(total, EPISODES as f64, "every cue named");

    let obs_path = dir.path().join("obs.f32");
    std::fs::write(
        &obs_path,
        all_obs
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let lengths_arg: Vec<String> = lengths.iter().map(|l: &i64| l.to_string()).collect();
    let script = format!(
        "import sys, numpy as np, onnxruntime as ort\n\
         s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n\
         width = [i.shape[1] for i in s.get_inputs() if i.name == 'state'][0]\n\
         obs = np.fromfile(sys.argv[2], dtype='<f4').reshape(-1, {od})\n\
         picks, row = [], 0\n\
         for n in map(int, sys.argv[3].split(',')):\n\
         \x20   state = np.zeros((1, width), dtype=np.float32)\n\
         \x20   for t in range(n):\n\
         \x20       logits, state = s.run(['logits', 'state_out'], {{'obs': obs[row:row + 1], 'state': state}})\n\
         \x20       picks.append(int(np.argmax(logits[0])))\n\
         \x20       row += 1\n\
         sys.stdout.write(' '.join(map(str, picks)))\n",
        od = spec.obs_dim()
    );
    let py = rlfleet_tests::output_within(
        Command::new(reference_python())
            .arg("-c")
            .arg(&script)
            .arg(&onnx)
            .arg(&obs_path)
            .arg(lengths_arg.join(",")),
        std::time::Duration::from_secs(120),
        "Python's onnxruntime",
    );
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let got: Vec<i64> = String::from_utf8_lossy(&py.stdout)
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(got.len(), actions.len());
    assert_eq!(got, actions, "onnxruntime's actions against the learner's");
    eprintln!(
        "{} steps of {EPISODES} episodes: onnxruntime picked the learner's action at each",
        got.len()
    );
}
