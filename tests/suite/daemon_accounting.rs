//! Exact accounting of runs on a real daemon with 4 real actor processes,
//! read from the control API and `/metrics`: episodes handed out = finished
//! = `max_episodes`, env steps on the learner = steps the actors took = the
//! sum of episode lengths, and batches sent by actors = received = trained
//! + dropped.

use rlfleet_shared::config::RunConfig;
use rlfleet_tests::daemon::{Daemon, actor_counts, finish_actor};
use rlfleet_tests::{episode_ids_and_steps, heavy, workspace_root};
use std::time::Duration;

const EPISODES: u64 = 40;

pub fn short_run(workflow: &str, episodes: u64, dir: &std::path::Path) -> RunConfig {
    let shipped = workspace_root().join(format!("config/cartpole-dqn-{workflow}.toml"));
    let mut cfg = RunConfig::load(&shipped).unwrap();
    cfg.output_dir = dir.join(workflow);
    cfg.stop.target_eval_return = None;
    cfg.stop.max_env_steps = None;
    cfg.stop.max_episodes = Some(episodes);
    cfg.dqn.learning_starts = 200;
    cfg
}

#[test]
fn every_episode_step_and_batch_is_accounted_for() {
    let _heavy = heavy();
    let d = Daemon::start("", "");
    for workflow in ["async", "sync", "seed"] {
        let cfg = short_run(workflow, EPISODES, d.dir.path());
        let id = d.start_run(&cfg);
        let actors: Vec<_> = (0..4)
            .map(|i| d.actor(&format!("{workflow}-{i}"), 2, &["--once"]))
            .collect();
        let status = d.wait_finished(&id, Duration::from_secs(120));
        let reports: Vec<_> = actors
            .into_iter()
            .map(|a| {
                let (ok, err) = finish_actor(a);
                assert!(ok, "{workflow} actor failed: {err}");
                actor_counts(&err).unwrap_or_else(|| panic!("no report: {err}"))
            })
            .collect();
        assert_eq!(status["state"], "finished", "{status}");
        assert_eq!(status["reason"], "episode limit reached", "{status}");
        assert_eq!(status["episodes_issued"], EPISODES, "{workflow}");
        assert_eq!(status["episodes_finished"], EPISODES, "{workflow}");
        assert_eq!(status["episodes_reissued"], 0, "{workflow}");
        let (ids, lengths) = episode_ids_and_steps(&cfg.output_dir);
        assert_eq!(ids, (0..EPISODES).collect::<Vec<_>>(), "{workflow}");
        let actor_steps: u64 = reports.iter().map(|r| r.env_steps).sum();
        assert_eq!(
            status["env_steps"], lengths,
            "{workflow}: learner steps vs episode lengths"
        );
        assert_eq!(
            actor_steps, lengths,
            "{workflow}: actor steps vs episode lengths"
        );
        let episodes_api = d.json(&format!("/v1/runs/{id}/episodes?since=0"));
        assert_eq!(episodes_api.as_array().unwrap().len() as u64, EPISODES);
        let tail = d.json(&format!("/v1/runs/{id}/episodes?since=35"));
        assert_eq!(tail.as_array().unwrap().len(), 5);

        rlfleet_tests::daemon::check_batch_books(&status);
        let b = &status["batches"];
        assert!(b["dropped"].get("duplicate").is_none(), "{workflow}: {b}");
        // This run's series alone (each run of the daemon has its own).
        let of_run = |m: &str| d.metric(&format!("{m}{{run_id=\"{id}\"}}"));
        let received = of_run("rlfleet_batches_received_total");
        let trained = of_run("rlfleet_batches_trained_total");
        let dropped: f64 = ["duplicate", "stale", "invalid", "run_ended"]
            .iter()
            .map(|r| {
                d.metric(&format!(
                    "rlfleet_batches_dropped_total{{reason=\"{r}\",run_id=\"{id}\"}}"
                ))
            })
            .sum::<f64>();
        let sent: u64 = reports.iter().map(|r| r.batches + r.resent).sum();
        assert_eq!(
            received, sent as f64,
            "{workflow}: sent vs received: {status} {reports:?}"
        );
        assert_eq!(
            received,
            trained + dropped,
            "{workflow}: received vs trained + dropped"
        );
        if workflow == "seed" {
            assert_eq!(sent, 0);
            assert!(status["inference_requests"].as_u64().unwrap() > lengths / 8);
        } else {
            assert_eq!(trained, b["trained"].as_u64().unwrap() as f64, "{workflow}");
        }
    }
    assert_eq!(d.metric("rlfleet_runs_started_total"), 3.0);
}
