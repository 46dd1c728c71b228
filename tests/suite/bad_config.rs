//! Bad configs: the binary exits with code 2 and a message that names the
//! problem, before doing any work.

use rlfleet_tests::{binary, workspace_root};
use std::process::Command;

fn run_with(text: Option<&str>) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    if let Some(t) = text {
        std::fs::write(&path, t).unwrap();
    }
    let out = rlfleet_tests::output_within(
        Command::new(binary("learner-server"))
            .args(["run", "--no-progress"])
            .arg(&path),
        std::time::Duration::from_secs(120),
        "learner-server run of a bad config",
    );
    assert!(
        !dir.path().join("out").exists(),
        "no output before the config is valid"
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn shipped() -> String {
    std::fs::read_to_string(workspace_root().join("config/cartpole-dqn-single.toml"))
        .unwrap()
        .replace("runs/cartpole-dqn-single", "out")
}

#[test]
fn missing_file() {
    let (code, err) = run_with(None);
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot read config file")
            && err.contains("run.toml")
            && err.contains("No such file"),
        "{err}"
    );
}

#[test]
fn unknown_key() {
    let (code, err) = run_with(Some(
        &shipped().replace("[dqn]", "[dqn]\nlearning_rate = 0.1"),
    ));
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown field `learning_rate`") && err.contains("`lr`"),
        "{err}"
    );
}

#[test]
fn wrong_type() {
    let (code, err) = run_with(Some(
        &shipped().replace("batch_size = 64", "batch_size = \"sixty-four\""),
    ));
    assert_eq!(code, 2);
    assert!(
        err.contains("batch_size") && err.contains("invalid type: string"),
        "{err}"
    );
}

#[test]
fn out_of_range_value() {
    let (code, err) = run_with(Some(&shipped().replace("gamma = 0.99", "gamma = 1.5")));
    assert_eq!(code, 2);
    assert!(
        err.contains("`dqn.gamma` = 1.5 is out of range: a number in (0, 1]"),
        "{err}"
    );
}
