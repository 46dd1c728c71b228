//! Actors die: an actor process is SIGKILLed in the middle of an `async`
//! and of a `seed` run, and of a `seed-a2c` run whose policy has an LSTM
//! core. The learner notices (idle timeout), re-issues the killed actor's
//! unfinished episode, a restarted actor rejoins, and the run completes
//! with every episode id finished exactly once; with a core, the front
//! started the rejoined actor's envs from zeroed states and zeroed every
//! env's state at each episode's first observation.

use crate::daemon_accounting::short_run;
use rlfleet_output::read_episodes;
use rlfleet_shared::config::RunConfig;
use rlfleet_tests::daemon::{Daemon, actor_counts, finish_actor};
use rlfleet_tests::{heavy, workspace_root};
use std::time::Duration;

const EPISODES: u64 = 200;

fn kill_one_actor(workflow: &str) {
    let d = Daemon::start("", "");
    let cfg = short_run(workflow, EPISODES, d.dir.path());
    kill_one_actor_of(&d, workflow, &cfg);
}

/// Kills one of 4 actors of `cfg`'s run mid-run, restarts it, checks the
/// run's books; returns the run's final status.
fn kill_one_actor_of(d: &Daemon, workflow: &str, cfg: &RunConfig) -> serde_json::Value {
    let episodes = cfg.stop.max_episodes.expect("an episode limit");
    let id = d.start_run(cfg);
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
        status["episodes_finished"], episodes,
        "{workflow}: {status}"
    );
    assert_eq!(status["episodes_issued"], episodes, "{workflow}: {status}");
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
        (0..episodes).collect::<Vec<_>>(),
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
    status
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

/// Recurrent PPO over `seed-a2c`: the front keeps each actor env's LSTM
/// state. The 5 connections (4 actors, then the killed one's restart)
/// each start from zeros, and each of the run's episodes (re-issued ones
/// again) from zeros at its first observation.
#[test]
fn seed_a2c_run_with_a_recurrent_core_zeroes_a_rejoined_actors_states() {
    let _heavy = heavy();
    let d = Daemon::start("", "");
    let shipped = workspace_root().join("config/memory-ppo-lstm-seed-a2c.toml");
    let mut cfg = RunConfig::load(&shipped).unwrap();
    cfg.output_dir = d.dir.path().join("memory-lstm");
    cfg.stop.target_eval_return = None;
    cfg.stop.max_env_steps = None;
    // Enough episodes (about 6,000 env steps; the run is bound by PPO's
    // updates, about 30 s on 2 cores) that the learner notices the killed
    // actor (5 s of silence) and has its episode played again, and the
    // restarted actor plays episodes of its own, before the others finish
    // them. (2,000 episodes took about 125 s, past the 120 s the test
    // waits for the run to finish.)
    let episodes = 500;
    cfg.stop.max_episodes = Some(episodes);
    let status = kill_one_actor_of(&d, "seed-a2c with a core", &cfg);
    let zeroed = |cause: &str| {
        d.metric(&format!(
            "rlfleet_core_states_zeroed_total{{cause=\"{cause}\"}}"
        ))
    };
    assert_eq!(
        zeroed("session"),
        5.0,
        "one env per connection, 5 connections"
    );
    let reissued = status["episodes_reissued"].as_u64().unwrap();
    assert!(
        zeroed("episode") >= episodes as f64 && zeroed("episode") <= (episodes + reissued) as f64,
        "{} episode starts zeroed for {episodes} episodes, {reissued} re-issued",
        zeroed("episode")
    );
}
