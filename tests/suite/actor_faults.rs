//! Actors die: an actor process is SIGKILLed in the middle of an `async`
//! and of a `seed` run. The learner notices (idle timeout), re-issues the
//! killed actor's unfinished episode, a restarted actor rejoins, and the
//! run completes with every episode id finished exactly once.

use crate::daemon_accounting::short_run;
use learner_server::output::read_episodes;
use rlfleet_tests::daemon::{Daemon, actor_counts, finish_actor};
use rlfleet_tests::heavy;
use std::time::Duration;

const EPISODES: u64 = 200;

fn kill_one_actor(workflow: &str) {
    let d = Daemon::start("", "");
    let cfg = short_run(workflow, EPISODES, d.dir.path());
    let id = d.start_run(&cfg);
    let mut victim = d.actor("victim", 1, &["--once"]);
    let others: Vec<_> = (0..3)
        .map(|i| d.actor(&format!("steady-{i}"), 1, &["--once"]))
        .collect();
    d.wait_until(&id, Duration::from_secs(60), |v| {
        v["episodes_finished"].as_u64().unwrap() >= 20
    });
    victim.kill().unwrap(); // SIGKILL: no goodbye, the learner must notice
    victim.wait().unwrap();
    let restarted = d.actor("victim", 1, &["--once"]);
    let status = d.wait_finished(&id, Duration::from_secs(120));
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(
        status["episodes_finished"], EPISODES,
        "{workflow}: {status}"
    );
    assert_eq!(status["episodes_issued"], EPISODES, "{workflow}: {status}");
    assert!(
        status["episodes_reissued"].as_u64().unwrap() >= 1,
        "{workflow}: the killed actor's episode was not re-issued: {status}\n{}",
        d.log()
            .lines()
            .filter(|l| l.contains("actor") || l.contains("lost"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let eps = read_episodes(&cfg.output_dir.join("episodes.csv")).unwrap();
    // Every env step the learner took is in a finished episode or counted
    // abandoned (the killed actor's unfinished episode, played again).
    let lengths: u64 = eps.iter().map(|e| u64::from(e.length)).sum();
    let abandoned = status["env_steps_abandoned"].as_u64().unwrap();
    assert_eq!(
        lengths + abandoned,
        status["env_steps"].as_u64().unwrap(),
        "{workflow}: {status}"
    );
    assert_eq!(
        d.metric("rlfleet_env_steps_abandoned_total"),
        abandoned as f64,
        "{workflow}"
    );
    let mut ids: Vec<u64> = eps.iter().map(|e| e.episode).collect();
    ids.sort();
    assert_eq!(
        ids,
        (0..EPISODES).collect::<Vec<_>>(),
        "{workflow}: each id once"
    );
    let (ok, err) = finish_actor(restarted);
    assert!(ok, "{workflow}: restarted actor: {err}");
    let r = actor_counts(&err).unwrap();
    assert!(
        r.env_steps > 0,
        "{workflow}: the restarted actor did not play: {r:?}"
    );
    // Its episodes are in the CSV under a new actor index (join order 4).
    assert!(
        eps.iter().any(|e| e.actor == 4),
        "{workflow}: no episode by the rejoined actor"
    );
    for a in others {
        let (ok, err) = finish_actor(a);
        assert!(ok, "{workflow}: {err}");
    }
    assert!(
        d.log().contains("actor left"),
        "{workflow}: no departure logged"
    );
}

#[test]
fn async_run_survives_a_killed_actor() {
    let _heavy = heavy();
    kill_one_actor("async");
}

#[test]
fn seed_run_survives_a_killed_actor() {
    let _heavy = heavy();
    kill_one_actor("seed");
}
