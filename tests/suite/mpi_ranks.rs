//! MPI ranks under real `mpirun` (feature `mpi`), beyond the conformance
//! column: DQN reaches CartPole-v1's target with `async` over MPI, an actor
//! rank that leaves early does not hang the run (its episodes are
//! re-issued and every id finishes once), and a job without a learner
//! rank's config error ends with the reason.

use rlfleet_shared::config::{RunConfig, TransportKind};
use rlfleet_tests::{episode_ids_and_steps, heavy, run_mpi, run_mpi_groups, workspace_root};

#[test]
fn dqn_reaches_475_with_async_over_mpi() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let shipped = workspace_root().join("config/cartpole-dqn-async.toml");
    let mut cfg = RunConfig::load(&shipped).unwrap();
    cfg.output_dir = dir.path().join("async-mpi");
    cfg.transport = TransportKind::Mpi;
    let out = run_mpi(&cfg, dir.path(), 4, &[]);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    assert!(out.success, "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("target reached (evaluation mean"),
        "{stdout}"
    );
    let reports: Vec<_> = stderr
        .lines()
        .filter_map(rlfleet_tests::daemon::actor_counts)
        .collect();
    assert_eq!(reports.len(), 4, "{stderr}");
    assert!(reports.iter().all(|r| r.env_steps > 500), "{reports:?}");
    let resolved = std::fs::read_to_string(cfg.output_dir.join("config.resolved.toml")).unwrap();
    assert!(resolved.contains("transport = \"mpi\""), "{resolved}");
    eprintln!("async over mpi: {}", stdout.trim());
}

fn counting(workflow: &str, dir: &std::path::Path) -> RunConfig {
    let text = format!(
        r#"
name = "mpi-fault"
env = "Counting-v0"
agent = "probe"
workflow = "{workflow}"
transport = "mpi"
seed = 5
output_dir = "{}"
[stop]
max_episodes = 60
max_wall_secs = 120.0
[eval]
period_steps = 1000000
episodes = 1
[distributed]
batch_step_frequency = 3
[probe]
train_every = 5
"#,
        dir.join(workflow).display()
    );
    RunConfig::from_toml(&text, "mpi-fault").unwrap()
}

#[test]
fn an_actor_rank_that_leaves_early_does_not_hang_the_run() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    for workflow in ["async", "rma"] {
        let cfg = counting(workflow, dir.path());
        let out = run_mpi_groups(
            &cfg,
            dir.path(),
            &[
                (2, &["--envs", "2"]),
                (1, &["--envs", "2", "--fail-after-batches", "4"]),
            ],
        );
        let (stdout, stderr) = (&out.stdout, &out.stderr);
        // The failed rank hands its failure to the learner and exits 0
        // (non-zero would make mpirun abort the job); the run finishes.
        assert!(out.success, "{stdout}\n{stderr}");
        assert!(
            stdout.starts_with("episode limit reached"),
            "{workflow}: {stdout}\n{stderr}"
        );
        assert!(
            stderr.contains(
                "error: simulated failure after 4 batches (this actor rank left the run; the \
                 learner carries on)"
            ),
            "{stderr}"
        );
        assert!(
            stderr.contains("left before its run ended (simulated failure after 4 batches)"),
            "{workflow}: the learner names the departure\n{stderr}"
        );
        // Every episode id finished exactly once: the failed rank's
        // unfinished ones were re-issued to the others.
        let (ids, _) = episode_ids_and_steps(&cfg.output_dir);
        assert_eq!(ids, (0..60).collect::<Vec<u64>>(), "{workflow}");
        let reports: Vec<_> = stderr
            .lines()
            .filter_map(rlfleet_tests::daemon::actor_counts)
            .collect();
        assert_eq!(reports.len(), 2, "{workflow}: {stderr}");
        let summary = std::fs::read_to_string(cfg.output_dir.join("summary.toml")).unwrap();
        assert!(summary.contains("episodes = 60"), "{summary}");
    }
}

#[test]
fn a_bad_config_ends_the_whole_job_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = counting("async", dir.path());
    cfg.workflow = rlfleet_shared::config::WorkflowKind::Single;
    cfg.transport = TransportKind::Inproc;
    let out = run_mpi(&cfg, dir.path(), 2, &[]);
    assert!(!out.success);
    assert!(
        out.stderr.contains(
            "mpi-fault-single-mpi.toml: workflow `single` runs in one process: \
             `learner-server run"
        ),
        "{}",
        out.stderr
    );
}
