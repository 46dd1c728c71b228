//! A run whose state and output directories fill up (a size-limited
//! tmpfs the test mounts): checkpoints that cannot be written are
//! counted, shown and retried while training goes on, and the rows of
//! `episodes.csv` wait in memory; once space is back the rows and the
//! next checkpoint land, and a daemon killed then resumes the run from it
//! with its books exact (every episode's row once, none cut in half).

use rlfleet_shared::config::RunConfig;
use rlfleet_tests::daemon::{Daemon, check_run_books, kill_all};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// A tmpfs of `mb` MiB at a path, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: &Path, mb: u32) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
            .arg(path)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "this test mounts a {mb} MiB tmpfs at {} (it needs root, as the set-up does)",
            path.display()
        );
        Tmpfs(path.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fills the filesystem of `dir` to the last byte; returns the filler.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![7u8; 64 << 10];
    while f.write_all(&block).is_ok() {}
    while f.write_all(&[7]).is_ok() {}
    let _ = f.sync_all();
    path
}

fn config(output_dir: &Path) -> RunConfig {
    let root = rlfleet_tests::workspace_root();
    let mut cfg = RunConfig::load(&root.join("config/cartpole-dqn-async.toml")).unwrap();
    cfg.name = "full-disk".into();
    cfg.output_dir = output_dir.to_path_buf();
    cfg.stop.target_eval_return = None;
    cfg.stop.max_env_steps = Some(1 << 40);
    cfg.stop.max_episodes = Some(1_000_000);
    cfg.stop.max_wall_secs = Some(600.0);
    cfg.eval.period_steps = 1 << 40;
    cfg.checkpoint.period_steps = 2_000;
    cfg.checkpoint.keep = 2;
    cfg
}

fn get(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no `{k}` in {v}"))
}

#[test]
fn checkpoints_on_a_full_disk_are_retried_while_training_goes_on() {
    let _heavy = rlfleet_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("rlfleet-state");
    let disk = Tmpfs::mount(&state, 12);
    let mut d = Daemon::start_in(dir, "", "", &[]);
    let cfg = config(&disk.0.join("out/run"));
    let id = d.start_run(&cfg);
    let actors: Vec<Child> = (0..2)
        .map(|i| d.actor(&format!("disk-{i}"), 2, &[]))
        .collect();
    let long = Duration::from_secs(120);
    let s = d.wait_until(&id, long, |v| v["checkpoint_env_steps"].is_u64());
    assert_eq!(get(&s, "checkpoint_failures"), 0, "{s}");

    // The disk fills: checkpoints fail, are counted and shown, and the
    // run trains on.
    let filler = fill(&disk.0);
    let full = d.json(&format!("/v1/runs/{id}"));
    let good = get(&full, "checkpoint_env_steps");
    let s = d.wait_until(&id, long, |v| get(v, "checkpoint_failures") >= 2);
    assert_eq!(s["state"], "running", "{s}");
    let error = s["checkpoint_error"].as_str().unwrap_or_default();
    assert!(error.contains("No space left on device"), "{s}");
    assert_eq!(get(&s, "checkpoint_env_steps"), good, "{s}");
    let failures = d.metric(&format!(
        "rlfleet_checkpoint_failures_total{{run_id=\"{id}\"}}"
    ));
    assert!(failures >= 2.0, "{failures}");
    let s = d.wait_until(&id, long, |v| {
        get(v, "env_steps") > get(&full, "env_steps") + 4_000
    });
    assert_eq!(get(&s, "checkpoint_env_steps"), good, "{s}");
    assert!(
        d.log().matches("checkpoint not written").count() == 1,
        "one error line per streak:\n{}",
        d.log()
    );

    assert!(
        d.log()
            .contains("output files not written (rows kept and retried)"),
        "{}",
        d.log()
    );
    // Space comes back: the next checkpoint lands.
    std::fs::remove_file(filler).unwrap();
    let s = d.wait_until(&id, long, |v| {
        v["checkpoint_error"].is_null() && get(v, "checkpoint_env_steps") > good
    });
    let landed = get(&s, "checkpoint_env_steps");

    // Killed now, the daemon resumes the run from that checkpoint (or a
    // later one), and nothing is lost.
    d.crash_and_restart();
    let s = d.wait_until(&id, long, |v| v["resumed_from"].is_object());
    let from = get(&s["resumed_from"], "env_steps");
    assert!(
        from >= landed,
        "resumed from {from}, the checkpoint after the full disk was at {landed}: {s}"
    );
    d.wait_until(&id, long, |v| get(v, "env_steps") > from + 2_000);
    let (status, body) = d.post(&format!("/v1/runs/{id}/stop"), "");
    assert_eq!(status, 202, "{body}");
    let end = d.wait_finished(&id, long);
    kill_all(actors);
    check_run_books(&cfg.output_dir, &end);
    drop(d);
    drop(disk);
}
