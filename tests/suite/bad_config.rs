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

/// `--set KEY=VALUE` overrides a config's keys (`check` prints the result,
/// `run` runs it); a bad key or value is exit code 2 naming it, with the
/// key that was meant.
#[test]
fn set_overrides_keys_and_a_bad_one_is_named() {
    let check = |sets: &[&str]| {
        let mut cmd = Command::new(binary("learner-server"));
        cmd.arg("check")
            .arg(workspace_root().join("config/cartpole-dqn-async.toml"));
        for s in sets {
            cmd.args(["--set", s]);
        }
        let out = rlfleet_tests::output_within(
            &mut cmd,
            std::time::Duration::from_secs(60),
            "learner-server check --set",
        );
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = check(&[
        "dqn.lr=0.001",
        "seed = 7",
        "dqn.hidden=[64, 64]",
        "name=cp-7",
    ]);
    assert_eq!(code, 0, "{err}");
    let cfg = rlfleet_shared::config::RunConfig::from_toml(&out, "check").unwrap();
    assert_eq!(
        (cfg.dqn.lr, cfg.seed, cfg.name.as_str()),
        (0.001, 7, "cp-7")
    );
    assert_eq!(cfg.dqn.hidden, [64, 64]);
    let (code, _, err) = check(&["dqn.lrr=0.1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("lrr") && err.contains("`lr`"), "{err}");
    let (code, _, err) = check(&["dqn.gamma=2.0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("gamma"), "{err}");
    let (code, _, err) = check(&["dqn.lr"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("KEY=VALUE"), "{err}");
}
