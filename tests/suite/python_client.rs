//! The Python package (`python/`, built with maturin and installed into the
//! cached venv by `scripts/test.sh`): a simulator loop in Python drives a
//! `seed` run through `rlfleet.Client` against `learner-server serve` and
//! sees training happen (the policy version rises, the learner records
//! the returns the simulator reported); `rlfleet.run_actor` plays an
//! `async` run with envs a Python factory builds.

use crate::python_envs::{corridor_config, start_corridor_run};
use rlfleet_output::read_episodes;
use rlfleet_tests::daemon::Daemon;
use rlfleet_tests::{heavy, reference_python, workspace_root};
use std::process::Command;
use std::time::Duration;

/// Runs a script of `tests/python/` with the venv's Python; its stdout.
fn python(script: &str, args: &[&str]) -> String {
    let out = rlfleet_tests::output_within(
        Command::new(reference_python())
            .arg(workspace_root().join("tests/python").join(script))
            .args(args),
        Duration::from_secs(600),
        &format!("tests/python/{script}"),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "{script} failed (is the rlfleet wheel installed? scripts/test.sh builds it):\n{stdout}\n{stderr}"
    );
    stdout.into_owned()
}

fn envs_dir() -> String {
    workspace_root().join("tests/envs").display().to_string()
}

#[test]
fn a_python_simulator_loop_drives_a_seed_run_and_training_happens() {
    let _heavy = heavy();
    const EPISODES: u64 = 40;
    let d = Daemon::start("", "");
    let stop = format!("[stop]\nmax_episodes = {EPISODES}\nmax_wall_secs = 120.0");
    let mut cfg = corridor_config("py-client", "Corridor", "seed", &stop, d.dir.path());
    cfg.dqn.learning_starts = 100;
    let id = d.start_run(&cfg);
    let out = python(
        "drive_client.py",
        &[
            &d.actors,
            &d.fingerprint,
            &EPISODES.to_string(),
            &envs_dir(),
        ],
    );
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let status = d.wait_finished(&id, Duration::from_secs(60));
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(r["run_id"], id.as_str());
    assert_eq!(r["episodes"], EPISODES);
    assert_eq!(r["observation_shape"], serde_json::json!([2, 4]));
    assert!(
        r["after_end"]
            .as_str()
            .unwrap()
            .starts_with("RunEndedError"),
        "{r}"
    );
    // Training happened while the simulator played: the weights that
    // chose its actions moved on.
    let versions: Vec<u64> = serde_json::from_value(r["versions"].clone()).unwrap();
    assert_eq!(versions[0], 0, "{versions:?}");
    assert!(*versions.last().unwrap() > 100, "{versions:?}");
    assert!(status["train_steps"].as_u64().unwrap() > 100, "{status}");
    // The learner recorded exactly the episodes the simulator played,
    // with the returns it reported, in order.
    let reported: Vec<f64> = serde_json::from_value(r["returns"].clone()).unwrap();
    let eps = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    let recorded: Vec<f64> = eps.iter().map(|e| e.ret).collect();
    assert_eq!(recorded.len(), reported.len());
    for (a, b) in recorded.iter().zip(&reported) {
        assert!((a - b).abs() < 1e-5, "{recorded:?} vs {reported:?}");
    }
    assert_eq!(status["env_steps"], r["env_steps"], "{status}");
}

#[test]
fn a_simulator_away_longer_than_the_idle_timeout_keeps_its_connection() {
    let _heavy = heavy();
    const EPISODES: u64 = 5;
    // The test daemon's QUIC idle timeout is 1.5 s; the simulator is away
    // for twice that between two calls.
    let d = Daemon::start("", "");
    let (_, id) = start_corridor_run(&d, "py-slow", "Corridor", "seed", EPISODES);
    let out = python(
        "drive_client.py",
        &[
            &d.actors,
            &d.fingerprint,
            &EPISODES.to_string(),
            &envs_dir(),
            "3",
        ],
    );
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let status = d.wait_finished(&id, Duration::from_secs(60));
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(r["episodes"], EPISODES, "{r}");
    assert_eq!(status["episodes_finished"], EPISODES, "{status}");
    // One connection throughout: it was not lost and made again.
    assert_eq!(status["episodes_reissued"], 0, "{status}");
    assert_eq!(
        d.log().matches("\"actor connected\"").count(),
        1,
        "{}",
        d.log()
    );
}

#[test]
fn run_actor_plays_a_run_with_envs_a_python_factory_builds() {
    let _heavy = heavy();
    const EPISODES: u64 = 30;
    let d = Daemon::start("", "");
    let (cfg, id) = start_corridor_run(&d, "py-actor", "Corridor", "async", EPISODES);
    let out = python("run_actor.py", &[&d.actors, &d.fingerprint, &envs_dir()]);
    let status = d.wait_finished(&id, Duration::from_secs(60));
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(status["episodes_finished"], EPISODES, "{status}");
    assert!(out.contains(&format!("{EPISODES} episodes")), "{out}");
    assert!(out.contains("built 2 envs"), "{out}");
    let eps = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    assert!(
        eps.iter().all(|e| e.actor == 0),
        "one actor played them all"
    );
}

/// `rlfleet.Control`, the control API from Python, with a token: a run
/// submitted from its TOML file, listed, stopped and resumed; a sweep
/// whose spec names its base file submitted, shown and stopped; an error
/// answer raised with the daemon's message.
#[test]
fn control_submits_stops_and_resumes_runs_and_sweeps_from_python() {
    let d = Daemon::start("", "token = \"tok\"\n[runs]\nmax_active = 1");
    let mut cfg = rlfleet_tests::counting_probe(
        "pyctl",
        "async",
        rlfleet_shared::config::TransportKind::Quic,
        1,
        1 << 40,
        &d.dir.path().join("pyctl"),
    );
    cfg.stop.max_wall_secs = Some(300.0);
    let run_toml = d.dir.path().join("run.toml");
    std::fs::write(&run_toml, cfg.to_resolved_toml()).unwrap();
    let sweep_toml = d.dir.path().join("sweep.toml");
    std::fs::write(
        &sweep_toml,
        "name = \"pysw\"\nbase = \"run.toml\"\nseeds = [1, 2, 3]\n",
    )
    .unwrap();
    let out = python(
        "control.py",
        &[
            &d.api,
            "tok",
            run_toml.to_str().unwrap(),
            sweep_toml.to_str().unwrap(),
        ],
    );
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let rid = r["run_id"].as_str().unwrap();
    assert!(rid.starts_with("pyctl-"), "{r}");
    assert_eq!(r["running"], serde_json::json!([rid]), "{r}");
    assert!(r["resumed"] == "running" || r["resumed"] == "queued", "{r}");
    assert_eq!(r["sweep_id"], "pysw-1", "{r}");
    assert_eq!(r["sweeps"], serde_json::json!(["pysw-1"]), "{r}");
    assert_eq!(r["trials"], 3, "{r}");
    assert_eq!(r["populations"], serde_json::json!([]), "{r}");
    let e = r["error"].as_str().unwrap();
    assert!(e.contains("404") && e.contains("no-such-run"), "{r}");
    // What Python asked for happened: the run and the sweep stopped.
    let run = d.wait_finished(rid, Duration::from_secs(60));
    assert_eq!(run["reason"], "stopped on request", "{run}");
    assert_eq!(d.record(rid)["state"], "stopped");
    let sweep = d.json("/v1/sweeps/pysw-1");
    assert_eq!(sweep["state"], "stopped", "{sweep}");
}

/// The package's type stubs (`python/rlfleet.pyi`, in the wheel with
/// `py.typed`): the example simulator passes `mypy --strict` against the
/// installed package and a call of the wrong type fails it; the example
/// then plays a `seed` run to its end, its server and fingerprint from
/// the environment as `actor-client` reads them.
#[test]
fn the_example_type_checks_under_mypy_strict_and_plays_a_seed_run() {
    let example = workspace_root().join("python/examples/simulator.py");
    let mypy = |file: &std::path::Path| {
        rlfleet_tests::output_within(
            Command::new(reference_python())
                .args(["-m", "mypy", "--strict", "--no-incremental"])
                .arg(file),
            Duration::from_secs(300),
            "mypy --strict (installed by the set-up for the tests)",
        )
    };
    let out = mypy(&example);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.py");
    std::fs::write(
        &bad,
        "import rlfleet\nc = rlfleet.Client(\"h:1\", pin=\"x\")\nc.step(\"no\", True, False, [0.0])\n",
    )
    .unwrap();
    let out = mypy(&bad);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() && said.contains("[arg-type]"),
        "{said}"
    );

    let _heavy = heavy();
    const EPISODES: u64 = 10;
    let d = Daemon::start("", "");
    let (_, id) = start_corridor_run(&d, "py-example", "Corridor", "seed", EPISODES);
    let out = rlfleet_tests::output_within(
        Command::new(reference_python())
            .arg(&example)
            .env("RLFLEET_SERVER", &d.actors)
            .env("RLFLEET_PIN", &d.fingerprint)
            .env("RLFLEET_API", &d.api),
        Duration::from_secs(300),
        "python/examples/simulator.py",
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains(&format!("run {id}: {EPISODES} episodes")),
        "{said}"
    );
    let status = d.wait_finished(&id, Duration::from_secs(60));
    assert_eq!(status["episodes_finished"], EPISODES, "{status}");
}
