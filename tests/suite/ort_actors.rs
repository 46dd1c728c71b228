//! Actors that infer with ONNX Runtime: an `async` DQN run on CartPole-v1
//! whose 4 `actor-client` processes run the policy the learner shipped as
//! ONNX (`--inference ort`, here through `RLFLEET_ACTOR_INFERENCE`) reaches
//! an evaluation mean >= 475, and while it runs each actor process has
//! `libonnxruntime` mapped and never `libtorch` (read from
//! `/proc/PID/maps`).
//!
//! Budget: the shipped async config (150,000 steps, 600 s cap); measured
//! about as fast as with the plain-Rust backend.

use rlfleet_output::read_evals;
use rlfleet_shared::config::RunConfig;
use rlfleet_tests::{binary, heavy, workspace_root};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The children of `parent` (from /proc/PID/stat).
fn children(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    // pid (comm) state ppid ...
                    let after = s.rsplit_once(')')?.1;
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    samples: u32,
    onnxruntime: bool,
    torch: bool,
}

/// Learning-to-target tests of this area (selected by `learn::`).
mod learn {
    use super::*;

    #[test]
    fn async_with_ort_actors_reaches_475_without_libtorch_in_the_actors() {
        let _heavy = heavy();
        let dir = tempfile::tempdir().unwrap();
        let shipped = workspace_root().join("config/cartpole-dqn-async.toml");
        let mut cfg = RunConfig::load(&shipped).unwrap();
        cfg.output_dir = dir.path().join("out");
        let cfg_path = dir.path().join("run.toml");
        std::fs::write(&cfg_path, cfg.to_resolved_toml()).unwrap();
        let mut learner = Command::new(binary("learner-server"))
            .args(["run", "--no-progress", "--local-actors", "4"])
            .arg(&cfg_path)
            .env("RUST_LOG", "warn")
            .env("RLFLEET_ACTOR_INFERENCE", "ort")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let actor_exe = binary("actor-client");
        let mut seen: BTreeMap<u32, Seen> = BTreeMap::new();
        while learner.try_wait().unwrap().is_none() {
            for pid in children(learner.id()) {
                let is_actor = std::fs::read_link(format!("/proc/{pid}/exe"))
                    .is_ok_and(|exe| exe == actor_exe);
                let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
                    continue;
                };
                if !is_actor {
                    continue;
                }
                let s = seen.entry(pid).or_default();
                s.samples += 1;
                s.onnxruntime |= maps.contains("libonnxruntime.so");
                s.torch |= maps.contains("libtorch");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = rlfleet_tests::wait_output(
            learner,
            rlfleet_tests::run_limit(&cfg),
            "the learner with ort actors",
        );
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(
            stdout.starts_with("target reached (evaluation mean"),
            "{stdout}\n{stderr}"
        );
        eprintln!("ort actors: {}", stdout.trim());
        eprintln!("actor processes and their maps: {seen:?}");
        assert_eq!(seen.len(), 4, "actor processes seen: {seen:?}");
        for (pid, s) in &seen {
            assert!(
                s.onnxruntime,
                "actor {pid} never had libonnxruntime mapped: {s:?}"
            );
            assert!(!s.torch, "actor {pid} had libtorch mapped: {s:?}");
        }
        let evals = read_evals(&cfg.output_dir.join("evals.csv")).unwrap();
        let best = evals.iter().map(|e| e.mean_return).fold(f64::MIN, f64::max);
        assert!(best >= 475.0, "best evaluation {best}");
    }
}
