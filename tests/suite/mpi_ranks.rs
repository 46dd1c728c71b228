//! MPI ranks under real `mpirun` (feature `mpi`), beyond the conformance
//! column: DQN reaches CartPole-v1's target with `async` over MPI (its
//! weights encoded once per version for every rank), an actor
//! rank that leaves early does not hang the run (its episodes are
//! re-issued and every id finishes once), a QUIC actor joins the run of
//! an MPI job (a mixed fleet), a learner rank's config error ends the
//! job with the reason, `ml-async` and `ml-rma` reach the target with
//! identical learners, the RMA operations stay exact with 3 ranks
//! contending, and a Gymnasium env (Box2D's LunarLander, through the
//! embedded interpreter on every rank) runs with exact episode counts.

use rlfleet_shared::config::{RunConfig, TransportKind, WindowSelector};
use rlfleet_tests::{episode_ids_and_steps, heavy, run_mpi, run_mpi_groups, workspace_root};
use std::time::Duration;

#[test]
fn a_gymnasium_env_runs_over_mpi_ranks_with_exact_episode_counts() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
name = "lunar-mpi"
env = "gymnasium:LunarLander-v3"
agent = "dqn"
workflow = "async"
transport = "mpi"
seed = 2
output_dir = "{}"
[stop]
max_episodes = 40
max_wall_secs = 120.0
[eval]
period_steps = 100000
episodes = 1
[dqn]
learning_starts = 1000
"#,
        dir.path().join("lunar").display()
    );
    let cfg = RunConfig::from_toml(&text, "lunar-mpi").unwrap();
    let out = run_mpi(&cfg, dir.path(), 3, &["--envs", "2"]);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    assert!(out.success, "{stdout}\n{stderr}");
    assert!(stdout.starts_with("episode limit reached"), "{stdout}");
    let (ids, steps) = episode_ids_and_steps(&cfg.output_dir);
    assert_eq!(ids, (0..40).collect::<Vec<u64>>());
    let summary = rlfleet_tests::read_summary(&cfg.output_dir);
    assert_eq!(summary["episodes"].as_integer(), Some(40));
    assert_eq!(summary["env_steps"].as_integer(), Some(steps as i64));
    assert_eq!(summary["env_errors"].as_integer(), Some(0));
    let reports: Vec<_> = stderr
        .lines()
        .filter_map(rlfleet_tests::daemon::actor_counts)
        .collect();
    assert_eq!(reports.len(), 3, "{stderr}");
    assert_eq!(reports.iter().map(|r| r.episodes).sum::<u64>(), 40);
}

fn counting(workflow: &str, dir: &std::path::Path) -> RunConfig {
    rlfleet_tests::counting_probe(
        "mpi-fault",
        workflow,
        TransportKind::Mpi,
        5,
        60,
        &dir.join(workflow),
    )
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
            1,
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
    // The multi-learner `rma` workflows give each learner rank actors of
    // its own.
    let mut cfg = counting("async", dir.path());
    cfg.workflow = rlfleet_shared::config::WorkflowKind::MlRmaQueue;
    let out = run_mpi_groups(&cfg, dir.path(), 2, &[(1, &[])]);
    assert!(!out.success);
    assert!(
        out.stderr.contains(
            "workflow `ml-rma-queue` gives every learner rank actors of its own: it needs at \
             least 2 actor ranks (one per learner rank); this job has 1"
        ),
        "{}",
        out.stderr
    );
}

/// A mixed fleet: while the MPI job (its actor an env group of 2 ranks)
/// runs, an `actor-client` process over
/// QUIC joins the learner rank's run and plays some of its episodes.
#[test]
fn a_quic_actor_joins_the_run_of_an_mpi_job() {
    use std::process::{Command, Stdio};
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = counting("async", dir.path());
    cfg.stop.max_episodes = Some(3000);
    // The MPI side is one env group of 2 ranks (issue 31).
    cfg.ranks_per_env = 2;
    let cfg_path = dir.path().join("mixed.toml");
    std::fs::write(&cfg_path, cfg.to_resolved_toml()).unwrap();
    let ready = dir.path().join("ready.json");
    let job = rlfleet_tests::mpirun()
        .args(["-n", "1"])
        .arg(rlfleet_tests::binary("learner-server"))
        .arg("mpi")
        .arg(&cfg_path)
        .arg("--ready-file")
        .arg(&ready)
        .args([":", "-n", "2"])
        .arg(rlfleet_tests::binary("actor-client"))
        .args(["mpi", "--actor-id", "rank-actor", "--ranks-per-env", "2"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !ready.exists() {
        assert!(
            t0.elapsed().as_secs() < 30,
            "the learner rank never got ready"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
    let quic = rlfleet_tests::output_within(
        Command::new(rlfleet_tests::binary("actor-client"))
            .args(["--server", info["actors"].as_str().unwrap()])
            .args(["--pin", info["fingerprint"].as_str().unwrap()])
            .args(["--actor-id", "quic-actor", "--once"])
            .env("RUST_LOG", "warn"),
        rlfleet_tests::run_limit(&cfg),
        "the QUIC actor of the MPI job",
    );
    let out = rlfleet_tests::wait_output(job, rlfleet_tests::run_limit(&cfg), "the MPI job");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("episode limit reached"), "{stdout}");
    let quic_report = rlfleet_tests::daemon::actor_counts(&String::from_utf8_lossy(&quic.stderr))
        .expect("the QUIC actor's report");
    let rank_report = rlfleet_tests::daemon::actor_counts(&stderr).expect("the rank's report");
    assert!(quic_report.episodes > 0, "{quic_report:?}");
    assert!(rank_report.episodes > 0, "{rank_report:?}");
    assert_eq!(quic_report.episodes + rank_report.episodes, 3000);
    let (ids, _) = episode_ids_and_steps(&cfg.output_dir);
    assert_eq!(ids, (0..3000).collect::<Vec<u64>>());
    // The group's second rank stepped every step its leader did.
    let follower = format!(
        "env rank 2: 1 env builds, {} steps, 0 raised, 0 abandoned",
        rank_report.env_steps
    );
    assert!(
        stderr.lines().any(|l| l == follower),
        "{follower}: {stderr}"
    );
    eprintln!(
        "mixed fleet: {} episodes by the MPI rank, {} by the QUIC actor",
        rank_report.episodes, quic_report.episodes
    );
}

/// Trains the shipped config `file` on 2 learner ranks and 4 actor ranks:
/// it must reach the target with bit-identical, gradient-averaging
/// learners and 4 actor reports. Returns the run's `metrics.prom`.
fn reaches_475_on_two_learner_ranks(file: &str, check: impl Fn(&RunConfig)) -> String {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RunConfig::load(&workspace_root().join("config").join(file)).unwrap();
    check(&cfg);
    cfg.output_dir = dir.path().join(cfg.workflow.to_string());
    let out = run_mpi_groups(&cfg, dir.path(), 2, &[(4, &[])]);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    assert!(out.success, "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("target reached (evaluation mean"),
        "{stdout}"
    );
    let learners = std::fs::read_to_string(cfg.output_dir.join("learners.toml")).unwrap();
    assert!(learners.contains("learners = 2"), "{learners}");
    assert!(learners.contains("gradient_reduce = true"), "{learners}");
    assert!(learners.contains("identical = true"), "{learners}");
    let reports: Vec<_> = stderr
        .lines()
        .filter_map(rlfleet_tests::daemon::actor_counts)
        .collect();
    assert_eq!(reports.len(), 4, "{stderr}");
    eprintln!("{} over mpi: {}", cfg.workflow, stdout.trim());
    std::fs::read_to_string(cfg.output_dir.join("metrics.prom")).unwrap()
}

/// The RMA wrapper under contention: 3 ranks at once on rank 0's window —
/// fetch-and-add, accumulate and compare-and-swap counts come out exact
/// (no lost update), and each rank's put reads back as written.
#[test]
fn rma_operations_are_exact_under_contention() {
    let out = rlfleet_tests::output_within(
        rlfleet_tests::mpirun()
            .args(["-n", "4"])
            .arg(rlfleet_tests::binary("rlfleet-bench"))
            .args(["rma-check", "--ops", "2000"]),
        Duration::from_secs(300),
        "rma-check under mpirun",
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(
            "rma check ok: 3 ranks x 2000 fetch-and-adds = 6000, accumulates of 2 = 12000, \
             compare-and-swap increments = 6000"
        ),
        "{stdout}"
    );
}

/// Learning-to-target tests of this area (selected by `learn::`).
mod learn {
    use super::*;

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
        assert!(
            rlfleet_tests::daemon::each_took_a_share(&reports),
            "{reports:?}"
        );
        let resolved =
            std::fs::read_to_string(cfg.output_dir.join("config.resolved.toml")).unwrap();
        assert!(resolved.contains("transport = \"mpi\""), "{resolved}");
        // The weights went to the 4 actor ranks as one shared frame per
        // version: fewer encodings than sends, at most one per version.
        let prom = std::fs::read_to_string(cfg.output_dir.join("metrics.prom")).unwrap();
        let metric = |name| rlfleet_tests::metric_value(&prom, name);
        let sent = metric("rlfleet_weights_sent_total{transport=\"mpi\"}");
        let encoded = metric("rlfleet_weights_frames_encoded_total");
        let versions = metric("rlfleet_train_steps_total") + 1.0;
        assert!(
            encoded >= 1.0 && encoded < sent && encoded <= versions,
            "{encoded} weights frames encoded for {sent} sent, {versions} versions"
        );
        eprintln!(
            "async over mpi: {} ({sent} weights sent, {encoded} encoded)",
            stdout.trim()
        );
    }

    /// `ml-async`: 2 learner ranks train one DQN data-parallel (gradients
    /// averaged with `MPI_Allreduce`) from 4 actor ranks, reach the target, and
    /// end with bit-identical weights.
    #[test]
    fn dqn_reaches_475_with_ml_async_on_two_learner_ranks() {
        reaches_475_on_two_learner_ranks("cartpole-dqn-ml-async.toml", |_| {});
    }

    /// `ml-rma` with `bin` selection: actor ranks deposit into queues in the
    /// lead learner's RMA window, each of the 2 learner ranks takes from its own
    /// range of actors, the learners step together, reach the target and end
    /// with bit-identical weights.
    #[test]
    fn dqn_reaches_475_with_ml_rma_on_two_learner_ranks() {
        let prom = reaches_475_on_two_learner_ranks("cartpole-dqn-ml-rma.toml", |cfg| {
            assert_eq!(cfg.distributed.window_selector, WindowSelector::Bin);
        });
        assert!(
            prom.lines()
                .any(|l| l.starts_with("rlfleet_rma_deposits_total ") && !l.ends_with(" 0")),
            "no deposits: {prom}"
        );
    }
}
