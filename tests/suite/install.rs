//! The road to a service, as a new user takes it: `scripts/install.sh`
//! puts the binaries and their libraries into a fresh prefix, and an
//! unprivileged user (`nobody`, through `setpriv`, who cannot read root's home, where the
//! build and its libraries live) runs the installed daemon with the
//! `LD_LIBRARY_PATH` the installed unit sets, with a certificate for a
//! name that is not localhost; an actor connects by that name and plays a
//! run to its end, and one that checks another name is refused. And the
//! set-up, run by a user without root, names the packages it lacks and
//! stops without calling sudo. Both need root (`setpriv`), as the set-up's
//! apt does.

use rlfleet_shared::config::RunConfig;
use rlfleet_tests::{output_within, wait_output, workspace_root};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `setpriv` as user `nobody`: it execs what it runs, so a child's pid is
/// that program's (a signal reaches it).
fn setpriv() -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        "env",
        "-i",
        "HOME=/nonexistent",
    ]);
    cmd
}

/// The daemon, stopped however the test ends.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `program` run as user `nobody`, with `env` and nothing else of ours.
fn as_nobody(program: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = setpriv();
    cmd.arg("PATH=/usr/bin:/bin");
    for (k, v) in env {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.arg(program);
    cmd
}

/// The value of `Environment=KEY=...` in a unit file.
fn unit_env(unit: &str, key: &str) -> String {
    unit.lines()
        .find_map(|l| l.strip_prefix(&format!("Environment={key}=")))
        .unwrap_or_else(|| panic!("no Environment={key} in the unit:\n{unit}"))
        .to_string()
}

#[test]
fn the_installed_daemon_runs_as_nobody_and_actors_reach_it_by_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let prefix = root.join("usr");
    let units = root.join("units");
    let out = output_within(
        Command::new("bash")
            .arg(workspace_root().join("scripts/install.sh"))
            .arg("--prefix")
            .arg(&prefix)
            .arg("--units")
            .arg(&units)
            .arg("--link"),
        Duration::from_secs(300),
        "scripts/install.sh",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unit = std::fs::read_to_string(units.join("rlfleet-learner.service")).unwrap();
    let server_bin = prefix.join("bin/learner-server");
    let actor_bin = prefix.join("bin/actor-client");
    assert!(
        unit.contains(&format!("ExecStart={} ", server_bin.display())),
        "{unit}"
    );
    let libs = unit_env(&unit, "LD_LIBRARY_PATH");
    assert_eq!(libs, prefix.join("lib/rlfleet").display().to_string());

    // The daemon's folder, its user's; a certificate naming `learner.test`.
    let home = root.join("var");
    std::fs::create_dir(&home).unwrap();
    assert!(
        Command::new("chown")
            .arg("nobody")
            .arg(&home)
            .status()
            .unwrap()
            .success()
    );
    let server_toml = root.join("server.toml");
    std::fs::write(
        &server_toml,
        format!(
            "state_dir = \"{0}/state\"\n[actors]\nlisten = \"127.0.0.1:0\"\ntls_dir = \"{0}/tls\"\n\
             tls_names = [\"learner.test\"]\n[api]\nlisten = \"127.0.0.1:0\"\n",
            home.display()
        ),
    )
    .unwrap();
    let env = [("LD_LIBRARY_PATH", libs.as_str())];
    let check = output_within(
        as_nobody(&server_bin, &env)
            .args(["check", "--server"])
            .arg(&server_toml),
        Duration::from_secs(60),
        "the installed learner-server check --server, as nobody",
    );
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );

    let ready = home.join("ready.json");
    let mut daemon = Stopped(
        as_nobody(&server_bin, &env)
            .args(["serve", "--config"])
            .arg(&server_toml)
            .arg("--ready-file")
            .arg(&ready)
            .current_dir(&home)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(root.join("daemon.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !ready.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60) && daemon.0.try_wait().unwrap().is_none(),
            "the installed daemon did not get ready as nobody: {}",
            std::fs::read_to_string(root.join("daemon.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(100));
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
    let api = format!("http://{}", info["api"].as_str().unwrap());
    let actors = info["actors"].as_str().unwrap().to_string();
    let cert = home.join("tls/cert.pem");

    let mut cfg =
        RunConfig::load(&workspace_root().join("config/cartpole-dqn-async.toml")).unwrap();
    cfg.transport = rlfleet_shared::config::TransportKind::Quic;
    cfg.output_dir = home.join("out");
    cfg.stop.max_episodes = Some(20);
    cfg.stop.target_eval_return = None;
    let config = root.join("run.toml");
    std::fs::write(&config, cfg.to_resolved_toml()).unwrap();
    let submit = output_within(
        Command::new(&server_bin)
            .env("LD_LIBRARY_PATH", &libs)
            .args(["runs", "--api", &api, "submit"])
            .arg(&config),
        Duration::from_secs(60),
        "learner-server runs submit",
    );
    let said = String::from_utf8_lossy(&submit.stdout).into_owned();
    assert!(
        submit.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&submit.stderr)
    );
    let id = said.split_whitespace().next().unwrap().to_string();

    let actor = |name: &str| {
        as_nobody(&actor_bin, &env)
            .args(["--server", &actors, "--server-name", name, "--ca"])
            .arg(&cert)
            .args(["--once", "--give-up-secs", "5", "--envs", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // A name the certificate does not hold is refused.
    let wrong = wait_output(
        actor("other.test"),
        Duration::from_secs(60),
        "an actor of a wrong name",
    );
    let wrong_err = String::from_utf8_lossy(&wrong.stderr).into_owned();
    assert!(!wrong.status.success(), "{wrong_err}");
    assert!(
        wrong_err.to_lowercase().contains("certificate"),
        "{wrong_err}"
    );
    // Its name is taken, and the run plays to its end.
    let right = wait_output(actor("learner.test"), Duration::from_secs(120), "an actor");
    assert!(
        right.status.success(),
        "{}",
        String::from_utf8_lossy(&right.stderr)
    );
    let show = output_within(
        Command::new(&server_bin)
            .env("LD_LIBRARY_PATH", &libs)
            .args(["runs", "--api", &api, "show", &id]),
        Duration::from_secs(60),
        "learner-server runs show",
    );
    let status: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    // SIGTERM reaches the daemon itself (setpriv execs it): it drains.
    let _ = Command::new("kill")
        .args(["-TERM", &daemon.0.id().to_string()])
        .status();
    let stopped = exits_within(&mut daemon.0, Duration::from_secs(60));
    assert!(stopped, "the daemon did not stop on SIGTERM");
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(status["episodes_finished"], 20, "{status}");
    let eps = rlfleet_output::read_episodes(&home.join("out/episodes.csv")).unwrap();
    assert_eq!(eps.len(), 20);
}

/// Whether `child` exits within `limit`.
fn exits_within(child: &mut std::process::Child, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn the_set_up_without_root_names_what_is_missing_and_calls_no_sudo() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    // A `sudo` first on the PATH that leaves a mark if called.
    let bin = root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let mark = root.join("sudo-was-called");
    std::fs::write(
        bin.join("sudo"),
        format!("#!/bin/sh\ntouch {}\nexit 1\n", mark.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        bin.join("sudo"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let setup = workspace_root().join("scripts/setup.sh");
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let cache = root.join("cache");
    let run = |extra: &[(&str, &str)]| {
        let mut env = vec![
            ("PATH", path.as_str()),
            ("RLFLEET_CACHE", cache.to_str().unwrap()),
        ];
        env.extend_from_slice(extra);
        let mut cmd = setpriv();
        for (k, v) in &env {
            cmd.arg(format!("{k}={v}"));
        }
        cmd.arg("bash").arg(&setup);
        output_within(
            &mut cmd,
            Duration::from_secs(60),
            "scripts/setup.sh as nobody",
        )
    };
    // A Debian package this machine lacks, required.
    let out = run(&[("RLFLEET_SETUP_PACKAGES", "unzip rlfleet-no-such-package")]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("missing: rlfleet-no-such-package")
            && err.contains("apt-get install rlfleet-no-such-package"),
        "{err}"
    );
    assert!(!err.contains("missing: unzip"), "unzip is installed: {err}");
    assert!(!mark.exists(), "the set-up called sudo");
    assert!(
        !cache.join("wheels").exists()
            || std::fs::read_dir(cache.join("wheels")).unwrap().count() == 0,
        "nothing fetched before the packages are there"
    );
    // `none` installs nothing and names what it cannot find.
    let out = run(&[("RLFLEET_SETUP", "none")]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("libtorch (LIBTORCH=") && err.contains("ONNX Runtime"),
        "{err}"
    );
    assert!(!cache.exists(), "`none` wrote nothing");
    assert!(!mark.exists(), "the set-up called sudo");
}
