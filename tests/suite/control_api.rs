//! The control API over real HTTP on a real daemon: create, list, get and
//! stop runs; 400 (naming the field), 401, 404 and 409; open `/metrics` and
//! `/healthz` with a token configured; an OpenAPI document that validates.

use crate::daemon_accounting::short_run;
use rlfleet_tests::daemon::Daemon;
use rlfleet_tests::reference_python;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

#[test]
fn runs_can_be_created_listed_read_and_stopped_with_clear_errors() {
    let d = Daemon::start("", "token = \"s3cret\"");
    // 401 without the token, except on the open routes.
    let (status, body) = d.get_as("/v1/runs", false);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("Authorization: Bearer"), "{body}");
    assert_eq!(d.get_as("/healthz", false).0, 200);
    assert_eq!(d.get_as("/readyz", false).0, 200);
    let (status, metrics) = d.get_as("/metrics", false);
    assert_eq!(status, 200);
    assert!(metrics.contains("rlfleet_connected_actors 0"), "{metrics}");
    let (status, _) = d.post_as("/v1/runs", "{}", false);
    assert_eq!(status, 401);

    // 400 naming the problem.
    let mut cfg = short_run("async", 1_000_000, d.dir.path());
    cfg.stop.max_wall_secs = Some(60.0);
    let mut v: Value = serde_json::to_value(&cfg).unwrap();
    v["dqn"]["gamma"] = 1.5.into();
    let (status, body) = d.post("/v1/runs", &v.to_string());
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("`dqn.gamma` = 1.5 is out of range"), "{body}");
    let mut v: Value = serde_json::to_value(&cfg).unwrap();
    v["learning_rate"] = 0.1.into();
    let (status, body) = d.post("/v1/runs", &v.to_string());
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("unknown field `learning_rate`"), "{body}");
    let (status, body) = d.post("/v1/runs", "not json");
    assert_eq!(status, 400, "{body}");

    // Create; a second while it runs is accepted too (and stopped here);
    // resuming the active one is a conflict.
    let id = d.start_run(&cfg);
    let second = d.start_run(&cfg);
    assert_ne!(second, id);
    let (status, body) = d.post(&format!("/v1/runs/{second}/stop"), "");
    assert_eq!(status, 202, "{body}");
    let stopped = d.wait_finished(&second, Duration::from_secs(30));
    assert_eq!(stopped["reason"], "stopped on request", "{stopped}");
    let (status, body) = d.post(&format!("/v1/runs/{id}/resume"), "");
    assert_eq!(status, 409, "{body}");
    assert!(body.contains(&id), "{body}");
    let actor = d.actor("api-actor", 1, &["--once"]);
    let running = d.wait_until(&id, Duration::from_secs(30), |v| {
        v["env_steps"].as_u64().unwrap() > 100
    });
    assert_eq!(running["state"], "running");
    assert_eq!(running["workflow"], "async");
    assert_eq!(running["actors"], serde_json::json!(["api-actor"]));
    let actors = d.json("/v1/actors");
    assert_eq!(actors.as_array().unwrap().len(), 1, "{actors}");
    assert_eq!(actors[0]["actor_id"], "api-actor");
    assert_eq!(actors[0]["run"], Value::String(id.clone()));
    assert_eq!(d.metric("rlfleet_connected_actors"), 1.0);

    // 404s.
    assert_eq!(d.get("/v1/runs/no-such-run").0, 404);
    assert_eq!(d.post("/v1/runs/no-such-run/stop", "").0, 404);
    assert_eq!(d.get("/v1/runs/no-such-run/episodes").0, 404);

    // Stop: the run checkpoints and ends; its actor sees a clean stop.
    let (status, body) = d.post(&format!("/v1/runs/{id}/stop"), "");
    assert_eq!(status, 202, "{body}");
    let done = d.wait_finished(&id, Duration::from_secs(30));
    assert_eq!(done["reason"], "stopped on request", "{done}");
    let (ok, err) = rlfleet_tests::daemon::finish_actor(actor);
    assert!(ok, "the actor did not stop cleanly: {err}");
    assert!(cfg.output_dir.join("checkpoint.safetensors").exists());
    let list = d.json("/v1/runs");
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
    assert_eq!(list[0]["id"], Value::String(id.clone()));
    assert_eq!(list[1]["id"], Value::String(second));
    // Filtered by state; a state that is none is named in the 400.
    let finished = d.json("/v1/runs?state=finished");
    assert_eq!(finished.as_array().unwrap().len(), 2, "{finished}");
    let running = d.json("/v1/runs?state=running");
    assert_eq!(running, serde_json::json!([]));
    let (status, body) = d.get("/v1/runs?state=sleeping");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("`sleeping`"), "{body}");

    // The OpenAPI document is valid OpenAPI.
    let (status, doc) = d.get("/openapi.json");
    assert_eq!(status, 200);
    let path = d.dir.path().join("openapi.json");
    std::fs::write(&path, &doc).unwrap();
    let out = rlfleet_tests::output_within(
        Command::new(reference_python())
            .args([
                "-c",
                "import json,sys; from openapi_spec_validator import validate; validate(json.load(open(sys.argv[1]))); print('valid')",
            ])
            .arg(&path),
        Duration::from_secs(120),
        "the OpenAPI validator",
    );
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for route in [
        "/v1/runs",
        "/v1/runs/{id}",
        "/v1/runs/{id}/stop",
        "/v1/runs/{id}/episodes",
        "/v1/actors",
        "/metrics",
    ] {
        assert!(
            doc.contains(&format!("\"{route}\"")),
            "{route} missing from the document"
        );
    }
}

/// `actors.max_actors` caps the actors connected at once (it also bounds
/// every run's inboxes): one more is refused with `too_many_actors` and
/// exits 3, and the run goes on with the actor it has. The run is long
/// enough that it cannot end before the second actor arrives (an ended
/// `--once` actor would leave room, and the second would wait for a run).
#[test]
fn an_actor_past_max_actors_is_refused_and_the_run_goes_on() {
    let _heavy = rlfleet_tests::heavy();
    let d = Daemon::start("max_actors = 1", "");
    let mut cfg = short_run("async", 1_000_000, d.dir.path());
    cfg.stop.max_wall_secs = Some(90.0);
    let id = d.start_run(&cfg);
    let first = d.actor("first", 1, &["--once"]);
    d.wait_until(&id, Duration::from_secs(30), |v| {
        v["env_steps"].as_u64().unwrap() > 50
    });
    let second = d.actor("second", 1, &["--once"]);
    let out = rlfleet_tests::wait_output(second, Duration::from_secs(30), "the refused actor");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("at most 1 actors"), "{stderr}");
    assert_eq!(
        d.metric("rlfleet_protocol_errors_total{code=\"too_many_actors\"}"),
        1.0
    );
    assert_eq!(d.metric("rlfleet_connected_actors"), 1.0);
    // The run goes on: ten more episodes finish after the refusal.
    let at_refusal = d.json(&format!("/v1/runs/{id}"))["episodes_finished"]
        .as_u64()
        .unwrap();
    d.wait_until(&id, Duration::from_secs(60), |v| {
        v["episodes_finished"].as_u64().unwrap() >= at_refusal + 10
    });
    let (status, body) = d.post(&format!("/v1/runs/{id}/stop"), "");
    assert_eq!(status, 202, "{body}");
    let done = d.wait_finished(&id, Duration::from_secs(30));
    assert_eq!(done["state"], "finished", "{done}");
    assert_eq!(done["reason"], "stopped on request", "{done}");
    assert_eq!(done["actors"], serde_json::json!(["first"]), "{done}");
    let (ok, err) = rlfleet_tests::daemon::finish_actor(first);
    assert!(ok, "{err}");
}

/// Every metric the shipped dashboards query exists in `/metrics` once a
/// run has started, before it has counted anything (a healthy server shows
/// 0, not "no data"); the daemon-wide ones before any run.
#[test]
fn a_daemon_with_a_new_run_exports_every_metric_the_dashboards_query() {
    let d = Daemon::start("", "");
    let (status, fresh) = d.get("/metrics");
    assert_eq!(status, 200);
    assert!(fresh.contains("rlfleet_connected_actors 0"), "{fresh}");
    assert!(!fresh.contains("run_id="), "{fresh}");
    let dir = rlfleet_tests::workspace_root().join("dashboards");
    let mut queried = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let dashboard = std::fs::read_to_string(&path).unwrap();
        for name in rlfleet_run::metrics::dashboard_metrics(&dashboard) {
            queried.push((path.display().to_string(), name));
        }
    }
    let checked = queried.len();
    let cfg = short_run("async", 1_000_000, d.dir.path());
    let id = d.start_run(&cfg);
    // A run's series are created one after another as it starts: a scrape
    // in between sees some of them, so the check waits for the whole set.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, text) = d.get("/metrics");
        let missing: Vec<String> = queried
            .iter()
            .filter(|(_, name)| !text.lines().any(|l| l.starts_with(name.as_str())))
            .map(|(path, name)| format!("{path} queries `{name}`"))
            .collect();
        if text.contains(&format!("run_id=\"{id}\"")) && missing.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a daemon with a new run does not export what the dashboards query: {missing:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(checked >= 15, "only {checked} metrics checked");
}
