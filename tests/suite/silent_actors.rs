//! Actors whose environment stops: a slow step (longer than the QUIC idle
//! timeout) must not cost the connection — the actor's connection is
//! driven by a thread of its own — and a hung one (connection alive,
//! nothing sent) must not stall the run: the learner drops the actor after
//! `[actors] actor_timeout_secs` and its episodes finish elsewhere, each
//! id exactly once. The other way round, an actor whose learner stops
//! answering (`--reply-timeout-secs`) connects again and the run finishes.
//! And an env that hangs past `distributed.env_step_timeout_secs` is an env
//! fault: its episode is played again, the env rebuilt, the actor goes on.

use crate::python_envs::{corridor_config, start_corridor_run};
use rlfleet_output::read_episodes;
use rlfleet_shared::config::TransportKind;
use rlfleet_tests::daemon::{Daemon, actor_counts, check_episode_books, finish_actor};
use rlfleet_tests::{counting_probe, heavy};
use std::time::{Duration, Instant};

/// The test daemon's QUIC idle timeout is 1.5 s; this pause is twice that.
const SLOW_STEP_SECS: &str = "3";

fn stall_env(at: u32, secs: &str) -> [(&'static str, String); 2] {
    [
        ("RLFLEET_TEST_STALL_AT", at.to_string()),
        ("RLFLEET_TEST_STALL_SECS", secs.to_string()),
    ]
}

#[test]
fn an_env_step_longer_than_the_idle_timeout_keeps_the_connection() {
    let _heavy = heavy();
    const EPISODES: u64 = 30;
    let d = Daemon::start("actor_timeout_secs = 60", "");
    let (_, id) = start_corridor_run(&d, "slow-step", "Stalling", "async", EPISODES);
    let env = stall_env(40, SLOW_STEP_SECS);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let actor = d.actor_with_env("slow", 1, &["--once"], &env);
    let status = d.wait_finished(&id, Duration::from_secs(90));
    let (ok, err) = finish_actor(actor);
    assert!(ok, "{err}");
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(status["episodes_finished"], EPISODES, "{status}");
    // One connection from start to end: nothing re-issued, nothing
    // abandoned, no reconnect.
    assert_eq!(status["episodes_reissued"], 0, "{status}\n{err}");
    assert_eq!(status["env_steps_abandoned"], 0, "{status}");
    assert!(!err.contains("reconnecting"), "{err}");
    let counts = actor_counts(&err).expect("the actor's report");
    assert_eq!(counts.sessions, 1, "{err}");
    assert_eq!(
        d.log().matches("\"actor connected\"").count(),
        1,
        "{}",
        d.log()
    );
    assert_eq!(d.metric("rlfleet_actors_timed_out_total"), 0.0);
}

#[test]
fn a_hung_actor_is_dropped_and_its_episodes_finish_elsewhere() {
    let _heavy = heavy();
    const EPISODES: u64 = 60;
    let d = Daemon::start("actor_timeout_secs = 3", "");
    let (cfg, id) = start_corridor_run(&d, "hung", "Stalling", "async", EPISODES);
    // It hangs for an hour at its 30th step, holding its episode, while its
    // connection stays up. The steady actors start once it has hung: started
    // together, they could play all the episodes before it reached its 30th
    // step (a loaded machine's Python start-up is slow).
    let mark = d.dir.path().join("stalled");
    let mut env: Vec<(&str, String)> = stall_env(30, "3600").into();
    env.push(("RLFLEET_TEST_STALL_MARK", mark.display().to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut hung = d.actor_with_env("hung", 1, &["--once"], &env);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !mark.exists() {
        assert!(Instant::now() < deadline, "the actor never hung");
        std::thread::sleep(Duration::from_millis(20));
    }
    let steady: Vec<_> = (0..2)
        .map(|i| d.actor(&format!("steady-{i}"), 1, &["--once"]))
        .collect();
    let status = d.wait_finished(&id, Duration::from_secs(90));
    let log = d.log();
    hung.kill().unwrap();
    hung.wait().unwrap();
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(status["episodes_finished"], EPISODES, "{status}");
    assert_eq!(status["episodes_issued"], EPISODES, "{status}");
    assert!(
        status["episodes_reissued"].as_u64().unwrap() >= 1,
        "{status}"
    );
    assert_eq!(d.metric("rlfleet_actors_timed_out_total"), 1.0, "{log}");
    assert!(log.contains("dropped a silent actor"), "{log}");
    // The hung actor's steps of its unfinished episode were played again.
    check_episode_books(&cfg.output_dir, EPISODES, &status);
    for a in steady {
        let (ok, err) = finish_actor(a);
        assert!(ok, "{err}");
    }
}

#[test]
fn an_env_that_hangs_past_env_step_timeout_secs_is_a_fault_and_is_rebuilt() {
    let _heavy = heavy();
    const EPISODES: u64 = 40;
    let d = Daemon::start("", "");
    let stop = format!("[stop]\nmax_episodes = {EPISODES}\nmax_wall_secs = 120.0");
    let mut cfg = corridor_config("hung-env", "Stalling", "async", &stop, d.dir.path());
    cfg.distributed.env_step_timeout_secs = 1.0;
    let id = d.start_run(&cfg);
    // Its env sleeps for an hour at the actor's 30th step (once).
    let env = stall_env(30, "3600");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let actor = d.actor_with_env("hangs", 1, &["--once"], &env);
    let status = d.wait_finished(&id, Duration::from_secs(90));
    let (ok, err) = finish_actor(actor);
    assert!(ok, "{err}");
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(status["episodes_finished"], EPISODES, "{status}");
    assert_eq!(status["env_errors"], 1, "{status}");
    assert_eq!(status["episodes_reissued"], 1, "{status}");
    assert!(err.contains("TimeoutError"), "{err}");
    // The same connection throughout: the actor was never silent.
    assert_eq!(actor_counts(&err).expect("the report").sessions, 1, "{err}");
    assert_eq!(d.metric("rlfleet_actors_timed_out_total"), 0.0);
    check_episode_books(&cfg.output_dir, EPISODES, &status);
}

#[test]
fn an_actor_whose_learner_stops_answering_connects_again() {
    let _heavy = heavy();
    const EPISODES: u64 = 40;
    let d = Daemon::start("", "");
    let mut cfg = counting_probe(
        "stuck-learner",
        "async",
        TransportKind::Quic,
        1,
        EPISODES,
        &d.dir.path().join("out"),
    );
    // Every 150 transitions the run thread stops for 2.5 s (its QUIC
    // connections stay alive); the actor waits 1 s for a reply.
    cfg.probe.train_every = 150;
    cfg.probe.train_sleep_ms = 2500;
    let id = d.start_run(&cfg);
    let actor = d.actor("patient", 1, &["--once", "--reply-timeout-secs", "1"]);
    let status = d.wait_finished(&id, Duration::from_secs(90));
    let (ok, err) = finish_actor(actor);
    assert!(ok, "{err}");
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(status["episodes_finished"], EPISODES, "{status}");
    assert!(err.contains("no reply from the learner for 1 s"), "{err}");
    let counts = actor_counts(&err).expect("the actor's report");
    assert!(counts.sessions >= 2, "{err}");
    assert_eq!(
        d.log().matches("\"actor connected\"").count() as u64,
        counts.sessions,
        "{}",
        d.log()
    );
    let eps = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    let mut ids: Vec<u64> = eps.iter().map(|e| e.episode).collect();
    ids.sort();
    assert_eq!(ids, (0..EPISODES).collect::<Vec<_>>(), "each id once");
}
