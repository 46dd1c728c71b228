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

/// `check --server` checks a server config and hides its tokens; a server
/// config given to plain `check` is named for what it is; a bad server
/// config is exit code 2 naming the key.
#[test]
fn a_server_config_is_checked_with_server() {
    let check = |args: &[&std::ffi::OsStr]| {
        let out = rlfleet_tests::output_within(
            Command::new(binary("learner-server"))
                .arg("check")
                .args(args),
            std::time::Duration::from_secs(60),
            "learner-server check --server",
        );
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let shipped = workspace_root().join("config/server.toml");
    let (code, out, err) = check(&["--server".as_ref(), shipped.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    let parsed: learner_server::server_config::ServerConfig = toml::from_str(&out).unwrap();
    assert_eq!(parsed.actors.listen.port(), 7000);
    assert!(
        !parsed.actors.tls_names.is_empty(),
        "the example shows tls_names"
    );

    let (code, _, err) = check(&[shipped.as_os_str()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("is a server config") && err.contains("--server"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("server.toml");
    std::fs::write(
        &secret,
        "[api]\ntoken = \"s3cret\"\n[runs]\nmax_active = 0\n",
    )
    .unwrap();
    let (code, _, err) = check(&["--server".as_ref(), secret.as_os_str()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("runs.max_active"), "{err}");
    std::fs::write(&secret, "[api]\ntoken = \"s3cret\"\n").unwrap();
    let (code, out, err) = check(&["--server".as_ref(), secret.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("s3cret") && out.contains("(set)"), "{out}");
}
