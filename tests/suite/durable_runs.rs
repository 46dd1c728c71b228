//! Durable runs: the learner daemon is SIGKILLed in the middle of a run and
//! started again on the same state directory and ports; it resumes the run
//! under its id from the last checkpoint, actors reconnect, and the books
//! close exactly — every episode id finished once, no `(actor, session,
//! seq)` trained twice, env steps and batches consistent with the files,
//! the batches received after the last checkpoint counted lost.

use rlfleet_output::read_episodes;
use rlfleet_run::workflows::remote::BatchLine;
use rlfleet_shared::config::{DataStructure, Overflow, RunConfig, TransportKind};
use rlfleet_tests::daemon::{Daemon, check_episode_books, finish_actor};
use rlfleet_tests::{counting_probe, heavy};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Child;
use std::time::Duration;

/// What happens when the run has finished this many episodes.
#[derive(Debug, Clone, Copy)]
enum Chaos {
    KillActor,
    KillLearner,
}

/// A tiny deterministic generator (which actor dies).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Stops actor processes that are not `--once` with SIGINT; each must
/// exit cleanly.
fn interrupt_actors(actors: Vec<Child>) {
    for a in actors {
        let pid = a.id().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status();
        assert!(sent.unwrap().success());
        let (ok, err) = finish_actor(a);
        assert!(ok, "an actor failed: {err}");
    }
}

/// The rows of a run's `batches.csv`.
fn batch_log(out: &std::path::Path) -> Vec<BatchLine> {
    rlfleet_output::read_csv(&out.join("batches.csv")).expect("read batches.csv")
}

/// `batches.csv` holds no `(actor, session, seq)` trained twice, and as
/// many trained batches and transitions as the status says.
fn check_batch_log(out: &std::path::Path, status: &Value, what: &str) {
    let mut trained = BTreeSet::new();
    let (mut trained_rows, mut transitions) = (0u64, 0u64);
    for b in batch_log(out) {
        if b.outcome == "trained" {
            assert!(
                trained.insert((b.actor.clone(), b.session, b.seq)),
                "batch {b:?} trained twice ({what})"
            );
            trained_rows += 1;
            transitions += b.transitions;
        }
    }
    assert_eq!(status["batches"]["trained"], trained_rows, "{what}");
    assert_eq!(status["transitions_ingested"], transitions, "{what}");
}

/// Runs `episodes` of Counting-v0 under `workflow` with 4 actor processes
/// over QUIC, doing `events` at evenly spaced points, and checks the books.
fn chaos_run(workflow: &str, episodes: u64, events: &[Chaos]) {
    let _heavy = heavy();
    let mut d = Daemon::start("", "");
    let out = d.dir.path().join("out");
    let mut cfg = counting_probe("chaos", workflow, TransportKind::Quic, 5, episodes, &out);
    cfg.checkpoint.period_steps = 1_500;
    cfg.distributed.batch_log = true;
    // `rma`: lossless queues (a pool that overflows drops batches, and
    // with them env steps the books could not balance).
    cfg.distributed.data_structure = DataStructure::Queue;
    cfg.distributed.overflow = Overflow::Reject;
    if workflow.starts_with("rma") || workflow == "orchestrated" {
        // Unpaced, these runs play 1,000 episodes a second: one could end
        // between two polls, before the learner kill meant for its middle.
        cfg.probe.train_sleep_ms = 2;
    }
    if workflow == "orchestrated" {
        // The conformance suite's limiter: a gradient step per 2 inserts.
        cfg.distributed.samples_per_insert = 0.5;
        cfg.distributed.min_size_to_sample = 4;
        cfg.distributed.error_buffer = 2.0;
    }
    cfg.stop.max_wall_secs = Some(600.0);
    let id = d.start_run(&cfg);
    // Not `--once`: an actor whose connection dropped with the learner may
    // reconnect after the run ended, and would wait for the next run; each
    // is stopped with SIGINT at the end.
    let spawn = |d: &Daemon, i: usize| d.actor(&format!("chaos-{i}"), 2, &[]);
    let mut actors: Vec<Child> = (0..4).map(|i| spawn(&d, i)).collect();
    let mut rng = Lcg(17);
    let mut learner_kills = 0;
    for (k, event) in events.iter().enumerate() {
        let at = episodes * (k as u64 + 1) / (events.len() as u64 + 1);
        d.wait_until(&id, Duration::from_secs(120), |v| {
            v["episodes_finished"].as_u64().unwrap() >= at
        });
        match event {
            Chaos::KillActor => {
                let i = rng.below(actors.len());
                actors[i].kill().unwrap();
                actors[i].wait().unwrap();
                actors[i] = spawn(&d, i);
            }
            Chaos::KillLearner => {
                d.crash_and_restart();
                learner_kills += 1;
                // The same run, resumed by the new process.
                let v = d.wait_until(&id, Duration::from_secs(30), |v| {
                    !v["resumed_from"].is_null()
                });
                assert_eq!(v["state"], "running", "{v}");
                let from = &v["resumed_from"];
                eprintln!("{workflow}: resumed from {from}");
                assert!(from["env_steps"].as_u64().unwrap() > 0, "{v}");
                assert!(v["episodes_finished"].as_u64().unwrap() < episodes, "{v}");
            }
        }
    }
    let status = d.wait_finished(&id, Duration::from_secs(300));
    let what = format!("{workflow}: {status}");
    assert_eq!(status["state"], "finished", "{what}\n{}", d.log());
    assert_eq!(status["id"], id.as_str());
    assert_eq!(status["episodes_finished"], episodes, "{what}");
    if learner_kills > 0 {
        assert!(!status["resumed_from"].is_null(), "{what}");
    }
    interrupt_actors(actors);

    // Every episode id finished exactly once, in the files; env steps =
    // finished lengths + abandoned (episodes played again).
    check_episode_books(&out, episodes, &status);
    let abandoned = status["env_steps_abandoned"].as_u64().unwrap();

    // No batch trained twice across the restarts; the log and the books
    // agree. (`seed` actors send observations, not batches.)
    if workflow != "seed" {
        check_batch_log(&out, &status, &what);
    }

    // The summary says what the status says, lost batches included.
    let summary: toml::Value =
        toml::from_str(&std::fs::read_to_string(out.join("summary.toml")).unwrap()).unwrap();
    assert_eq!(
        summary["episodes"].as_integer().unwrap() as u64,
        episodes,
        "{workflow}"
    );
    let lost = status["batches_lost"].as_u64().unwrap();
    assert_eq!(
        summary["learner"]["batches_lost"].as_integer().unwrap() as u64,
        lost,
        "{workflow}"
    );
    let record = d.record(&id);
    assert_eq!(record["state"], "finished", "{record}");
    assert_eq!(record["resumes"], learner_kills, "{record}");
    // Checkpoints rotate: at most `checkpoint.keep` stay.
    let kept = std::fs::read_dir(
        d.dir
            .path()
            .join(format!("rlfleet-state/runs/{id}/checkpoints")),
    )
    .unwrap()
    .count();
    assert!(
        (1..=3).contains(&kept),
        "{workflow}: {kept} checkpoints kept"
    );
    let rss = d.rss_bytes();
    assert!(rss < 512 << 20, "{workflow}: the daemon holds {rss} bytes");
    eprintln!(
        "{workflow}: {episodes} episodes, {learner_kills} learner restarts, {lost} batches lost, \
         {abandoned} env steps abandoned, {} re-issued, rss {} MiB",
        status["episodes_reissued"],
        rss >> 20
    );
}

#[test]
fn an_async_run_survives_learner_and_actor_kills_with_exact_books() {
    use Chaos::*;
    chaos_run(
        "async",
        3_000,
        &[
            KillActor,
            KillLearner,
            KillActor,
            KillActor,
            KillLearner,
            KillActor,
        ],
    );
}

#[test]
fn rma_runs_survive_learner_and_actor_kills_with_exact_books() {
    use Chaos::*;
    // Checkpoints are taken under the pools' lock, with what they hold
    // trained first; `rma-queue-pop-all` also waits for its fetcher's set.
    let events = [KillActor, KillLearner, KillActor, KillLearner];
    chaos_run("rma", 2_000, &events);
    chaos_run("rma-queue-pop-all", 2_000, &events);
}

#[test]
fn an_orchestrated_run_survives_learner_and_actor_kills_with_exact_books() {
    use Chaos::*;
    // A checkpoint takes in the inserts the rate limiter holds back and
    // keeps the limiter's counts.
    chaos_run("orchestrated", 1_500, &[KillActor, KillLearner, KillActor]);
}

#[test]
fn a_seed_run_survives_learner_and_actor_kills_with_exact_books() {
    use Chaos::*;
    chaos_run("seed", 1_500, &[KillActor, KillLearner, KillActor]);
}

/// Waits (at most `limit`) for an actor process to exit by itself; its
/// exit success and stderr.
fn exits_within(mut actor: Child, limit: Duration, what: &str) -> (bool, String) {
    let t0 = std::time::Instant::now();
    while actor.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = actor.kill();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    finish_actor(actor)
}

/// A `--once` actor plays one run. When the learner dies and its run does
/// not come back (here its record went with the crash), the actor leaves
/// instead of waiting for ever: when no run welcomes it within its
/// `--give-up-secs`, or when another run does.
#[test]
fn once_actors_leave_when_their_run_does_not_come_back() {
    let mut d = Daemon::start("", "");
    let out = d.dir.path().join("out");
    let mut cfg = counting_probe("gone", "async", TransportKind::Quic, 5, 1_000_000, &out);
    cfg.stop.max_wall_secs = Some(600.0);
    let id = d.start_run(&cfg);
    let times_out = d.actor("times-out", 1, &["--once", "--give-up-secs", "5"]);
    let moves_on = d.actor("moves-on", 1, &["--once", "--give-up-secs", "120"]);
    d.wait_until(&id, Duration::from_secs(60), |v| {
        v["actors"].as_array().unwrap().len() == 2 && v["episodes_finished"].as_u64().unwrap() >= 20
    });
    d.crash();
    let _ = std::fs::remove_dir_all(d.dir.path().join("rlfleet-state"));
    d.restart();
    let (ok, err) = exits_within(times_out, Duration::from_secs(30), "times-out");
    assert!(ok, "{err}");
    assert!(
        err.contains("its run did not come back within 5 s"),
        "{err}"
    );
    // The other one still waits; a new run welcomes it, and it leaves.
    cfg.name = "next".into();
    cfg.output_dir = d.dir.path().join("out-next");
    let next = d.start_run(&cfg);
    assert_ne!(next, id);
    let (ok, err) = exits_within(moves_on, Duration::from_secs(30), "moves-on");
    assert!(ok, "{err}");
    assert!(err.contains("its run is over; leaving (--once)"), "{err}");
    assert!(
        err.contains(&format!("next={next}")) || err.contains(&next),
        "{err}"
    );
    let (code, _) = d.post(&format!("/v1/runs/{next}/stop"), "");
    assert_eq!(code, 202);
}

/// `learner-server run --continue`, as the systemd unit runs it: a new run
/// the first time; after the process is SIGKILLed, that run, resumed under
/// its id from its latest checkpoint; once it has finished, a new run.
#[test]
fn run_continue_resumes_a_killed_run_and_starts_anew_after_a_finished_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = rlfleet_tests::workspace_root();
    let mut cfg = RunConfig::load(&root.join("config/cartpole-dqn-single.toml")).unwrap();
    cfg.output_dir = dir.path().join("out");
    cfg.stop.target_eval_return = None;
    cfg.stop.max_env_steps = Some(8_000);
    cfg.checkpoint.period_steps = 500;
    cfg.eval.period_steps = 1_000_000;
    let cfg_path = dir.path().join("run.toml");
    std::fs::write(&cfg_path, cfg.to_resolved_toml()).unwrap();
    let state = dir.path().join("state");
    let learner = || {
        let mut c = std::process::Command::new(rlfleet_tests::binary("learner-server"));
        c.args(["run", "--no-progress", "--continue", "--state-dir"])
            .arg(&state)
            .arg(&cfg_path)
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    };
    let record = |id: &str| -> Value {
        let path = state.join(format!("runs/{id}/record.json"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let first_id = format!("{}-1", cfg.name);
    let mut first = learner().spawn().unwrap();
    let checkpoints = state.join(format!("runs/{first_id}/checkpoints"));
    let t0 = std::time::Instant::now();
    while std::fs::read_dir(&checkpoints).map_or(0, |d| d.count()) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "no checkpoint");
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    assert_eq!(record(&first_id)["state"], "active");

    let out = rlfleet_tests::output_within(
        &mut learner(),
        rlfleet_tests::run_limit(&cfg),
        "the resumed run",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = record(&first_id);
    assert_eq!(
        (r["state"].as_str(), r["resumes"].as_u64()),
        (Some("finished"), Some(1)),
        "{r}"
    );
    let summary = rlfleet_tests::read_summary(&cfg.output_dir);
    assert_eq!(summary["env_steps"].as_integer(), Some(8_000), "{summary}");

    let out = rlfleet_tests::output_within(
        &mut learner(),
        rlfleet_tests::run_limit(&cfg),
        "the next run",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = record(&format!("{}-2", cfg.name));
    assert_eq!(
        (second["state"].as_str(), second["resumes"].as_u64()),
        (Some("finished"), Some(0))
    );
}

/// The process of `pattern` (a unique part of its command line).
#[cfg(feature = "mpi")]
fn pid_of(pattern: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        // The learner rank itself, not `mpirun` (whose command line names
        // the same files).
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        (comm.trim() == "learner-server" && cmd.contains(pattern)).then_some(pid)
    })
}

/// The learner rank of an MPI job is SIGKILLed (the job dies with it);
/// `mpirun` starts the job again with `learner-server mpi --resume` on the
/// same state directory, and the run finishes under its id with every
/// episode once.
#[cfg(feature = "mpi")]
#[test]
fn an_mpi_job_started_again_resumes_its_run() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // Long enough (about 400,000 env steps) for the kill to land mid-run.
    let episodes = 40_000;
    let mut cfg = counting_probe("mpichaos", "async", TransportKind::Mpi, 3, episodes, &out);
    cfg.checkpoint.period_steps = 20_000;
    cfg.distributed.batch_log = true;
    cfg.stop.max_wall_secs = Some(600.0);
    let first = rlfleet_tests::mpi_job(&cfg, dir.path(), 1, &[], &[(3, &[])])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait for a checkpoint past 100,000 env steps, then kill the learner.
    let state = dir.path().join("state/runs/mpichaos-1");
    let t0 = std::time::Instant::now();
    loop {
        let past = std::fs::read_dir(state.join("checkpoints"))
            .map(|d| {
                d.flatten().any(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix("ck-")?.strip_suffix(".safetensors"))
                        .and_then(|n| n.parse::<u64>().ok())
                        .is_some_and(|s| s >= 100_000)
                })
            })
            .unwrap_or(false);
        if past {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "no checkpoint");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pattern = "mpichaos-async-mpi.toml";
    let pid = pid_of(pattern).expect("the learner rank");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out1 = rlfleet_tests::wait_output(first, Duration::from_secs(120), "the killed job");
    assert!(!out1.status.success(), "the job survived its learner");
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("record.json")).unwrap()).unwrap();
    assert_eq!(rec["state"], "active", "killed mid-run: {rec}");

    let second = rlfleet_tests::output_within(
        &mut rlfleet_tests::mpi_job(&cfg, dir.path(), 1, &["--resume"], &[(3, &[])]),
        rlfleet_tests::run_limit(&cfg),
        "the resumed MPI job",
    );
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    let eps = read_episodes(&out.join("episodes.csv")).unwrap();
    let mut ids: Vec<u64> = eps.iter().map(|e| e.episode).collect();
    ids.sort();
    assert_eq!(ids, (0..episodes).collect::<Vec<_>>(), "each id once");
    let mut trained = BTreeSet::new();
    for b in batch_log(&out)
        .into_iter()
        .filter(|b| b.outcome == "trained")
    {
        assert!(
            trained.insert((b.actor.clone(), b.session, b.seq)),
            "batch {b:?} trained twice"
        );
    }
    let summary = rlfleet_tests::read_summary(&out);
    assert_eq!(summary["episodes"].as_integer().unwrap() as u64, episodes);
    assert_eq!(
        summary["learner"]["batches_trained"].as_integer().unwrap() as usize,
        trained.len()
    );
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("record.json")).unwrap()).unwrap();
    assert_eq!(rec["state"], "finished", "{rec}");
    assert_eq!(rec["resumes"], 1, "{rec}");
}

/// A run stopped through the API resumes through it under its id and
/// finishes with every episode once and nothing lost; a finished run is
/// not resumed (409), an unknown one is 404.
#[test]
fn a_stopped_run_resumes_through_the_api_under_its_id() {
    let _heavy = heavy();
    let d = Daemon::start("", "");
    let out = d.dir.path().join("out");
    let episodes = 2_000;
    let mut cfg = counting_probe("resumable", "async", TransportKind::Quic, 9, episodes, &out);
    cfg.checkpoint.period_steps = 1_000;
    cfg.distributed.batch_log = true;
    let id = d.start_run(&cfg);
    let actors: Vec<Child> = (0..2).map(|i| d.actor(&format!("r-{i}"), 2, &[])).collect();
    d.wait_until(&id, Duration::from_secs(60), |v| {
        v["episodes_finished"].as_u64().unwrap() >= 300
    });
    let (code, body) = d.post(&format!("/v1/runs/{id}/stop"), "");
    assert_eq!(code, 202, "{body}");
    let stopped = d.wait_finished(&id, Duration::from_secs(60));
    assert!(
        stopped["episodes_finished"].as_u64().unwrap() < episodes,
        "{stopped}"
    );
    let (code, body) = d.post(&format!("/v1/runs/{id}/resume"), "");
    assert_eq!(code, 202, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["id"],
        id.as_str()
    );
    let status = d.wait_until(&id, Duration::from_secs(120), |v| {
        v["state"] == "finished" && !v["resumed_from"].is_null()
    });
    let what = status.to_string();
    assert_eq!(status["episodes_finished"], episodes, "{what}");
    assert_eq!(
        status["resumed_from"]["env_steps"], stopped["env_steps"],
        "{what}"
    );
    assert_eq!(
        status["batches_lost"], 0,
        "a clean stop loses nothing: {what}"
    );
    let eps = read_episodes(&out.join("episodes.csv")).unwrap();
    let mut ids: Vec<u64> = eps.iter().map(|e| e.episode).collect();
    ids.sort();
    assert_eq!(ids, (0..episodes).collect::<Vec<_>>(), "each id once");
    check_batch_log(&out, &status, &what);
    let (code, body) = d.post(&format!("/v1/runs/{id}/resume"), "");
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("finished"), "{body}");
    let (code, body) = d.post("/v1/runs/nothing-7/resume", "");
    assert_eq!(code, 404, "{body}");
    interrupt_actors(actors);
}

/// A planned restart (SIGTERM, as `systemctl restart` sends): the daemon
/// checkpoints and tells its actors to reconnect rather than exit; started
/// again, it resumes the run with nothing lost and the same actor
/// processes finish it.
#[test]
fn a_sigterm_restart_resumes_the_run_with_the_same_actors() {
    let _heavy = heavy();
    let mut d = Daemon::start("", "");
    let out = d.dir.path().join("out");
    // Enough for several seconds after the restart: an actor reconnects
    // after a back-off of up to 5 s, and 2,000 episodes were once all
    // played by the first one back in under a second.
    let episodes = 20_000;
    let mut cfg = counting_probe("restarted", "async", TransportKind::Quic, 4, episodes, &out);
    cfg.checkpoint.period_steps = 1_000;
    cfg.distributed.batch_log = true;
    let id = d.start_run(&cfg);
    let actors: Vec<Child> = (0..2).map(|i| d.actor(&format!("s-{i}"), 2, &[])).collect();
    d.wait_until(&id, Duration::from_secs(60), |v| {
        v["episodes_finished"].as_u64().unwrap() >= 300
    });
    d.terminate_and_restart();
    let status = d.wait_until(&id, Duration::from_secs(120), |v| {
        v["state"] == "finished" && !v["resumed_from"].is_null()
    });
    let what = status.to_string();
    assert_eq!(status["episodes_finished"], episodes, "{what}");
    assert_eq!(
        status["batches_lost"], 0,
        "a drained daemon loses nothing: {what}"
    );
    check_episode_books(&out, episodes, &status);
    check_batch_log(&out, &status, &what);
    // Both actor processes came back to the restarted daemon.
    let log = d.log();
    for a in ["s-0", "s-1"] {
        let connected = log
            .lines()
            .filter(|l| {
                l.contains("\"actor connected\"") && l.contains(&format!("\"actor\":\"{a}\""))
            })
            .count();
        assert!(connected >= 2, "{a} connected {connected} times:\n{log}");
    }
    interrupt_actors(actors);
}
