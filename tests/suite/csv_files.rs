//! The run's CSV files hold what a user's values are, whatever they
//! contain: an actor id with a comma, a quote and a newline reaches
//! `batches.csv` and reads back exactly, next to its episodes in
//! `episodes.csv`.

use rlfleet_output::{read_csv, read_episodes};
use rlfleet_run::workflows::remote::BatchLine;
use rlfleet_shared::config::TransportKind;
use rlfleet_tests::counting_probe;
use rlfleet_tests::daemon::{Daemon, actor_counts, finish_actor};
use std::time::Duration;

const EPISODES: u64 = 12;

#[test]
fn an_actor_id_with_a_comma_a_quote_and_a_newline_reads_back_exactly() {
    let d = Daemon::start("", "");
    let out = d.dir.path().join("out");
    let mut cfg = counting_probe("odd-id", "async", TransportKind::Quic, 3, EPISODES, &out);
    cfg.distributed.batch_log = true;
    let id = d.start_run(&cfg);
    let actor_id = "east,\"rack 7\"\nnode 2";
    let actor = d.actor(actor_id, 2, &["--once"]);
    let status = d.wait_finished(&id, Duration::from_secs(120));
    let (ok, err) = finish_actor(actor);
    assert!(ok, "the actor failed: {err}");
    let report = actor_counts(&err).unwrap_or_else(|| panic!("no report: {err}"));
    assert_eq!(status["state"], "finished", "{status}");

    let batches: Vec<BatchLine> = read_csv(&out.join("batches.csv")).expect("read batches.csv");
    assert_eq!(
        batches.len() as u64,
        report.batches + report.resent,
        "one row per batch sent"
    );
    assert!(
        batches.iter().all(|b| b.actor == actor_id),
        "an actor id came back changed: {:?}",
        batches.iter().find(|b| b.actor != actor_id)
    );
    let steps: u64 = batches.iter().map(|b| b.transitions).sum();
    assert_eq!(
        steps, report.env_steps,
        "the batches' steps are the actor's"
    );

    let episodes = read_episodes(&out.join("episodes.csv")).expect("read episodes.csv");
    let mut ids: Vec<u64> = episodes.iter().map(|e| e.episode).collect();
    ids.sort();
    assert_eq!(ids, (0..EPISODES).collect::<Vec<_>>());
    // The only actor is the run's actor 0.
    assert!(episodes.iter().all(|e| e.actor == 0));
}
