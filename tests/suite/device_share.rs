//! The learner's device shared by a daemon's runs: `[runs]
//! device_memory_mb` admits a run only while the active runs leave room
//! for its footprint (stated or estimated), refuses one that could never
//! fit, and says why a run waits; `[runs] device_turns = "weighted"` gives
//! the gradient steps of runs that contend for the device turns by their
//! `[fleet] weight`.

use crate::many_runs::endless;
use rlfleet_shared::config::{RUN_OVERHEAD_MB, RunConfig};
use rlfleet_tests::daemon::{Daemon, kill_all};
use serde_json::Value;
use std::process::Child;
use std::time::Duration;

fn stop(d: &Daemon, id: &str) -> Value {
    let (status, body) = d.post(&format!("/v1/runs/{id}/stop"), "");
    assert_eq!(status, 202, "{body}");
    d.wait_finished(id, Duration::from_secs(60))
}

fn state(d: &Daemon, id: &str) -> Value {
    d.json(&format!("/v1/runs/{id}"))
}

#[test]
fn a_run_past_the_device_memory_waits_queued_and_one_that_never_fits_is_refused() {
    // A `probe` run trains nothing: it reserves the per-run overhead only.
    let mb = RUN_OVERHEAD_MB;
    let limit = 2 * mb + mb / 2;
    let d = Daemon::start(
        "",
        &format!("[runs]\nmax_active = 4\ndevice_memory_mb = {limit}"),
    );
    let dir = d.dir.path();
    let a = d.start_run(&endless("a", 1.0, dir));
    let b = d.start_run(&endless("b", 1.0, dir));
    for id in [&a, &b] {
        let s = d.wait_until(id, Duration::from_secs(30), |v| v["state"] == "running");
        assert_eq!(s["device_memory_mb"], mb, "{s}");
        assert_eq!(s["queued_reason"], Value::Null, "{s}");
    }
    // A third would pass the limit: queued with the reason, though a
    // slot is free.
    let c = d.start_run(&endless("c", 1.0, dir));
    let s = state(&d, &c);
    assert_eq!(s["state"], "queued", "{s}");
    let want = format!(
        "waiting for device memory: needs {mb} MB, {} of {limit} MB are reserved by active runs",
        2 * mb
    );
    assert!(
        s["queued_reason"].as_str().unwrap().starts_with(&want),
        "{s}"
    );
    // The one after it waits behind it.
    let e = d.start_run(&endless("e", 1.0, dir));
    let s = state(&d, &e);
    assert_eq!(
        s["queued_reason"],
        format!("waiting behind run `{c}`, which waits for device memory"),
        "{s}"
    );
    // A run that states more than the daemon has is refused, by name.
    let mut big = endless("big", 1.0, dir);
    big.fleet.device_memory_mb = Some(limit + 1);
    let (status, body) = d.post("/v1/runs", &serde_json::to_string(&big).unwrap());
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(&format!(
            "run `big` needs {} MB of device memory",
            limit + 1
        )) && body.contains("could never start"),
        "{body}"
    );
    // A run ends: the head of the queue takes its memory; the next waits
    // for memory in turn.
    stop(&d, &a);
    let s = d.wait_until(&c, Duration::from_secs(30), |v| v["state"] == "running");
    assert_eq!(s["queued_reason"], Value::Null, "{s}");
    let s = state(&d, &e);
    assert_eq!(s["state"], "queued", "{s}");
    assert!(
        s["queued_reason"]
            .as_str()
            .unwrap()
            .starts_with("waiting for device memory"),
        "{s}"
    );
    for id in [&b, &c] {
        stop(&d, id);
    }
    d.wait_until(&e, Duration::from_secs(30), |v| v["state"] == "running");
    stop(&d, &e);
}

/// The shipped `async` DQN made learner-bound (a gradient step of batch
/// 256 per env step), played for `secs` with no target.
fn learner_bound(name: &str, weight: f64, secs: f64, dir: &std::path::Path) -> RunConfig {
    let root = rlfleet_tests::workspace_root();
    let mut cfg = RunConfig::load(&root.join("config/cartpole-dqn-async.toml")).unwrap();
    cfg.name = name.into();
    cfg.output_dir = dir.join(name);
    cfg.stop.target_eval_return = None;
    cfg.stop.max_episodes = Some(1_000_000);
    cfg.stop.max_env_steps = Some(1 << 40);
    cfg.stop.max_wall_secs = Some(secs);
    cfg.eval.period_steps = 1 << 40;
    cfg.dqn.batch_size = 256;
    cfg.dqn.train_freq = 16;
    cfg.dqn.gradient_steps = 16;
    cfg.fleet.weight = weight;
    cfg
}

#[test]
fn weighted_device_turns_share_the_learners_time_by_weight() {
    let _heavy = rlfleet_tests::heavy();
    let d = Daemon::start("", "[runs]\ndevice_turns = \"weighted\"");
    let dir = d.dir.path();
    let light = d.start_run(&learner_bound("light", 1.0, 12.0, dir));
    let heavy = d.start_run(&learner_bound("heavy", 3.0, 12.0, dir));
    // Two actors pinned to each run: both learners have more steps than
    // they can train.
    let actors: Vec<Child> = [&light, &light, &heavy, &heavy]
        .iter()
        .enumerate()
        .map(|(i, run)| d.actor(&format!("dev-{i}"), 2, &["--run", run]))
        .collect();
    let ends: Vec<Value> = [&light, &heavy]
        .iter()
        .map(|id| d.wait_finished(id, Duration::from_secs(90)))
        .collect();
    kill_all(actors);
    let secs = |v: &Value, k: &str| v[k].as_f64().unwrap();
    for v in &ends {
        assert_eq!(v["state"], "finished", "{v}");
        assert!(secs(v, "device_secs") > 1.0, "{v}");
        assert!(secs(v, "device_wait_secs") > 0.1, "{v}");
    }
    let ratio = secs(&ends[1], "device_secs") / secs(&ends[0], "device_secs");
    eprintln!(
        "device seconds heavy {:.2}, light {:.2}: {ratio:.2}",
        secs(&ends[1], "device_secs"),
        secs(&ends[0], "device_secs")
    );
    assert!(
        (1.8..4.5).contains(&ratio),
        "device seconds heavy/light {ratio:.2}, expected about 3: {} / {}",
        ends[1],
        ends[0]
    );
    // The loop's series say the same.
    let series = format!(
        "rlfleet_run_loop_seconds_total{{run=\"heavy\",run_id=\"{heavy}\",activity=\"device\"}}"
    );
    assert!(d.metric(&series) > 1.0, "{series}");
}
