//! The GPU check (`scripts/gpu-check.sh`) cannot rot: its `--dry-run` runs
//! every step of the device run against this checkout's CPU build on tiny
//! budgets, and every field the device run reports is there, measured.

use rlfleet_tests::{heavy, output_within, workspace_root};
use std::process::Command;
use std::time::Duration;

#[test]
fn the_gpu_check_dry_run_measures_every_step() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = output_within(
        Command::new("bash")
            .arg(workspace_root().join("scripts/gpu-check.sh"))
            .arg("--dry-run")
            .env("OUT", dir.path()),
        Duration::from_secs(600),
        "the GPU check's dry run",
    );
    let log = std::fs::read_to_string(dir.path().join("gpu.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}\n{}\n{log}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("gpu.json")).unwrap();
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["dry_run"], true, "{r}");
    // Every step ran, in order of value, each timed.
    let order: Vec<&str> = r["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "machine",
            "pong",
            "atari",
            "r2d2",
            "concurrent",
            "cartpole",
            "resume",
            "cnn",
            "cnn_cpu"
        ],
        "{r}"
    );
    for step in &order {
        assert!(
            r[format!("{step}_secs")].as_f64().unwrap() > 0.0,
            "{step}: {r}"
        );
    }
    // Pong learned for its seconds (here 20, on the CPU, episodes cut at
    // 100 steps): the curve, its last point the last episode's, and rates.
    let pong = &r["pong"];
    assert_eq!(pong["exit"], 0, "{pong}");
    assert_eq!(pong["device"], "cpu", "{pong}");
    let episodes = pong["episodes"].as_u64().unwrap();
    assert!(episodes >= 2, "{pong}");
    let curve = pong["curve"].as_array().unwrap();
    assert_eq!(curve.len() as u64, episodes.min(200), "{pong}");
    let last = curve.last().unwrap().as_array().unwrap();
    assert!(
        last[0].as_u64().unwrap() <= pong["env_steps"].as_u64().unwrap(),
        "{pong}"
    );
    let mean = pong["last100_mean_return"].as_f64().unwrap();
    assert!((-21.0..=21.0).contains(&mean), "{pong}");
    assert!(pong["frames_per_sec"].as_f64().unwrap() > 0.0, "{pong}");
    assert!(
        pong["frames_per_sec_per_core"].as_f64().unwrap() > 0.0,
        "{pong}"
    );
    let csv = std::fs::read_to_string(dir.path().join("pong-learn/episodes.csv")).unwrap();
    assert_eq!(csv.lines().count() as u64, episodes + 1);
    // Concurrent Pong runs on one daemon: 1 then 2 (4 on the device).
    let shares = r["concurrent"]["shares"].as_array().expect("shares");
    let runs: Vec<u64> = shares.iter().map(|s| s["runs"].as_u64().unwrap()).collect();
    assert_eq!(runs, [1, 2], "{r}");
    // A rate for each run. (On this CPU a `seed-a2c` run counts its env
    // steps 1,024 at a time, a rollout, so seconds-long windows may see
    // none: the rates are figures only on the device.)
    for s in shares {
        let per_run = s["per_run"].as_array().unwrap();
        assert_eq!(per_run.len() as u64, s["runs"].as_u64().unwrap(), "{s}");
        for r in per_run {
            assert!(r.as_f64().unwrap() >= 0.0, "{s}");
        }
    }
    // The binaries start: nothing they link is missing.
    for bin in ["learner-server", "actor-client", "rlfleet-bench"] {
        assert_eq!(
            r["machine"]["missing_libraries"][bin],
            serde_json::json!([]),
            "{r}"
        );
    }
    // The learner trained CartPole and said where.
    assert_eq!(r["cartpole"]["exit"], 0, "{r}");
    assert_eq!(r["cartpole"]["device"], "cpu", "{r}");
    assert!(r["cartpole"]["env_steps"].as_u64().unwrap() > 1_000, "{r}");
    // A checkpoint resumed (here CPU to CPU) holds the same tensors.
    for way in ["default_to_cpu", "cpu_to_default"] {
        let w = &r["resume"][way];
        assert_eq!(w["second_checkpoint"], true, "{way}: {r}");
        assert_eq!(w["identical"], true, "{way}: {r}");
        assert!(w["tensors"].as_u64().unwrap() >= 2, "{way}: {r}");
    }
    // The Nature-CNN update and seed inference at both batches, twice.
    for run in ["cnn", "cnn_cpu"] {
        let nets = r[run]["nets"].as_array().unwrap();
        let batches: Vec<u64> = nets.iter().map(|n| n["batch"].as_u64().unwrap()).collect();
        assert_eq!(batches, [32, 256], "{run}: {r}");
        for n in nets {
            assert!(n["update_per_sec"].as_f64().unwrap() > 0.0, "{run}: {n}");
            assert!(n["infer_obs_per_sec"].as_f64().unwrap() > 0.0, "{run}: {n}");
        }
    }
    // R2D2's sequence update, three sizes.
    assert_eq!(r["r2d2"]["exit"], 0, "{r}");
    let rows = r["r2d2"]["rows"].as_array().expect("r2d2 rows");
    let cases: Vec<&str> = rows.iter().map(|c| c["case"].as_str().unwrap()).collect();
    assert_eq!(cases, ["memory", "masked-cartpole", "atari-unroll"], "{r}");
    for c in rows {
        assert!(c["rlfleet_updates_per_sec"].as_f64().unwrap() > 0.0, "{c}");
    }
    // Pong end to end, DQN under `async` and `seed` and PPO under
    // `seed-a2c` (again with its front 16 batches ahead of training, and
    // in two lanes per actor), each against `random`.
    let atari = r["atari"]["rows"].as_array().expect("atari rows");
    let workflows: Vec<&str> = atari
        .iter()
        .map(|a| a["workflow"].as_str().unwrap())
        .collect();
    assert_eq!(
        workflows,
        ["async", "seed", "seed-a2c", "seed-a2c", "seed-a2c"],
        "{r}"
    );
    let lanes: Vec<u64> = atari
        .iter()
        .map(|a| a["lanes_per_actor"].as_u64().unwrap())
        .collect();
    assert_eq!(lanes, [1, 1, 1, 1, 2], "{r}");
    let ahead: Vec<u64> = atari
        .iter()
        .map(|a| a["max_batches_ahead"].as_u64().unwrap())
        .collect();
    assert_eq!(ahead, [2, 2, 2, 16, 2], "{r}");
    for a in atari {
        assert_eq!(a["envs_per_actor"], 8, "{a}");
        assert!(a["env_steps"].as_u64().unwrap() >= 300, "{a}");
        assert!(a["frames_per_sec"].as_f64().unwrap() > 0.0, "{a}");
        assert!(a["random_frames_per_sec"].as_f64().unwrap() > 0.0, "{a}");
        assert!(a["gradient_steps_per_sec"].as_f64().unwrap() >= 0.0, "{a}");
        // Every trained batch (or seed step) had a lag: a number, not null.
        assert!(a["policy_lag_mean"].as_f64().unwrap() >= 0.0, "{a}");
        let busy = a["learner_busy_share"].as_f64().unwrap();
        assert!(busy > 0.0 && busy <= 1.0, "{a}");
    }
    // Where a `seed` workflow's time goes: the front's passes, waits and
    // stalls (numbers there; `null` under `async`, which has no front).
    assert!(atari[0]["inference_batch_mean"].is_null(), "{r}");
    for front in &atari[1..] {
        assert!(
            front["inference_batch_mean"].as_f64().unwrap() >= 1.0,
            "{front}"
        );
        assert!(
            front["inference_latency_mean_ms"].as_f64().unwrap() > 0.0,
            "{front}"
        );
        let stall = front["front_stall_share"].as_f64().unwrap();
        assert!((0.0..1.0).contains(&stall), "{front}");
    }
}
