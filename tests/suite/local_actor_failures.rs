//! Embedded mode whose actor processes all fail: `learner-server run
//! --local-actors 2` with actors that cannot start their inference
//! (ONNX Runtime asked for, `ORT_DYLIB_PATH` unset) stops the run and
//! exits with an error naming the failure, where it used to wait for
//! actors forever.

use rlfleet_shared::config::RunConfig;
use rlfleet_tests::{binary, output_within, workspace_root};
use std::process::Command;
use std::time::Duration;

#[test]
fn a_run_whose_local_actors_all_fail_stops_with_their_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg =
        RunConfig::load(&workspace_root().join("config/cartpole-dqn-async.toml")).unwrap();
    cfg.output_dir = dir.path().join("out");
    let cfg_path = dir.path().join("run.toml");
    std::fs::write(&cfg_path, cfg.to_resolved_toml()).unwrap();
    let out = output_within(
        Command::new(binary("learner-server"))
            .args(["run", "--no-progress", "--local-actors", "2"])
            .arg(&cfg_path)
            .current_dir(dir.path())
            .env("RUST_LOG", "warn")
            .env("RLFLEET_ACTOR_INFERENCE", "ort")
            .env_remove("ORT_DYLIB_PATH"),
        Duration::from_secs(60),
        "a learner whose actors all fail",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("ORT_DYLIB_PATH is not set"), "{stderr}");
    assert!(
        stderr.contains(
            "every local actor-client failed before the run ended (the first: exit status: 1"
        ),
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches("an actor-client exited with exit status: 1")
            .count(),
        2,
        "{stderr}"
    );
}
