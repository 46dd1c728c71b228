//! The in-process transport: `learner-server run CONFIG --local-actors 4`
//! with `transport = "inproc"` runs the actors as tasks in the learner's
//! process, through the same sessions and workflow events as QUIC. For each
//! of `async`, `sync` and `seed`: the run ends on exactly `max_episodes`
//! finished episodes, ids 0..N each once, and the env steps the actors took
//! = the learner's count = the sum of episode lengths.

use crate::daemon_accounting::short_run;
use rlfleet_shared::config::TransportKind;
use rlfleet_tests::daemon::actor_counts;
use rlfleet_tests::{episode_ids_and_steps, heavy, run_embedded};

const EPISODES: u64 = 40;

#[test]
fn async_sync_and_seed_account_exactly_over_inproc() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    for workflow in ["async", "sync", "seed"] {
        let mut cfg = short_run(workflow, EPISODES, dir.path());
        cfg.transport = TransportKind::Inproc;
        let out = run_embedded(&cfg, dir.path(), &["--envs-per-actor", "2"]);
        let stderr = &out.stderr;
        assert!(out.success, "{workflow}: {}\n{stderr}", out.stdout);
        let reports: Vec<_> = stderr
            .lines()
            .filter(|l| l.starts_with("actor done:"))
            .map(|l| actor_counts(l).unwrap())
            .collect();
        assert_eq!(reports.len(), 4, "{workflow}: {stderr}");
        assert!(reports.iter().all(|r| r.sessions == 1), "{reports:?}");

        let summary: toml::Value =
            toml::from_str(&std::fs::read_to_string(cfg.output_dir.join("summary.toml")).unwrap())
                .unwrap();
        assert_eq!(summary["reason"].as_str(), Some("episode limit reached"));
        assert_eq!(summary["episodes"].as_integer(), Some(EPISODES as i64));
        let (ids, lengths) = episode_ids_and_steps(&cfg.output_dir);
        assert_eq!(ids, (0..EPISODES).collect::<Vec<_>>(), "{workflow}");
        let actor_steps: u64 = reports.iter().map(|r| r.env_steps).sum();
        let actor_episodes: u64 = reports.iter().map(|r| r.episodes).sum();
        assert_eq!(actor_steps, lengths, "{workflow}: actor steps vs lengths");
        assert_eq!(actor_episodes, EPISODES, "{workflow}");
        assert_eq!(
            summary["env_steps"].as_integer(),
            Some(lengths as i64),
            "{workflow}: learner steps vs lengths"
        );
        let batches: u64 = reports.iter().map(|r| r.batches + r.resent).sum();
        let requests: u64 = reports.iter().map(|r| r.inference_requests).sum();
        if workflow == "seed" {
            assert_eq!(batches, 0);
            assert!(requests > lengths / 8, "{requests} requests");
        } else {
            assert_eq!(requests, 0);
            assert!(batches > 0, "{workflow}: no batches");
            assert_eq!(
                summary["learner"]["batches_received"].as_integer(),
                Some(batches as i64),
                "{workflow}: batches sent vs received"
            );
        }
    }
}
