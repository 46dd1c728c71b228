//! Every env step accounted for, however a run stops: one daemon, two
//! real actors over QUIC, and a `probe` run on `Counting-v0` stopped by
//! each rule in turn — its episode limit, its step limit, its wall limit,
//! its target and the API. Each time `env_steps` = the finished
//! episodes' lengths + the abandoned steps + the steps its stop cut off
//! (`env_steps_in_play`, `summary.toml`'s `env_steps_cut_off`,
//! `rlfleet_env_steps_in_play`).

use rlfleet_shared::config::RunConfig;
use rlfleet_tests::daemon::{Daemon, check_run_books, kill_all};
use std::process::Child;
use std::time::Duration;

fn probe(name: &str, dir: &std::path::Path) -> RunConfig {
    crate::many_runs::endless(name, 1.0, dir)
}

/// `summary.toml`'s `[learner] env_steps_cut_off`.
fn cut_off_in_summary(cfg: &RunConfig) -> u64 {
    let text = std::fs::read_to_string(cfg.output_dir.join("summary.toml")).unwrap();
    let summary: toml::Table = toml::from_str(&text).unwrap();
    summary["learner"]["env_steps_cut_off"]
        .as_integer()
        .unwrap_or_else(|| panic!("no [learner] env_steps_cut_off in {text}")) as u64
}

#[test]
fn every_stop_reason_accounts_for_every_env_step() {
    let d = Daemon::start("", "");
    let dir = d.dir.path();
    let actors: Vec<Child> = (0..2)
        .map(|i| d.actor(&format!("stops-{i}"), 2, &[]))
        .collect();
    let mut episodes = probe("episodes", dir);
    episodes.stop.max_episodes = Some(60);
    let mut steps = probe("steps", dir);
    steps.stop.max_env_steps = Some(700);
    let mut wall = probe("wall", dir);
    wall.stop.max_wall_secs = Some(2.0);
    // Every evaluation of `Counting-v0` returns at least 1.
    let mut target = probe("target", dir);
    target.stop.target_eval_return = Some(1.0);
    target.eval.period_steps = 200;
    target.eval.episodes = 2;
    target.eval.confirm_episodes = 100;
    let api = probe("api", dir);
    let cases: [(&RunConfig, &str); 5] = [
        (&episodes, "episode limit reached"),
        (&steps, "env step limit reached"),
        (&wall, "wall time limit reached"),
        (&target, "target"),
        (&api, "stopped on request"),
    ];
    let mut cut = 0;
    for (cfg, reason) in cases {
        let id = d.start_run(cfg);
        if cfg.name == "api" {
            d.wait_until(&id, Duration::from_secs(60), |v| {
                v["env_steps"].as_u64().unwrap() > 500
            });
            let (status, body) = d.post(&format!("/v1/runs/{id}/stop"), "");
            assert_eq!(status, 202, "{body}");
        }
        let end = d.wait_finished(&id, Duration::from_secs(90));
        assert_eq!(end["state"], "finished", "{end}");
        assert!(
            end["reason"].as_str().unwrap().contains(reason),
            "{} stopped for `{}`, expected `{reason}`",
            cfg.name,
            end["reason"]
        );
        check_run_books(&cfg.output_dir, &end);
        let in_play = end["env_steps_in_play"].as_u64().unwrap();
        assert_eq!(cut_off_in_summary(cfg), in_play, "{}: {end}", cfg.name);
        let series = format!("rlfleet_env_steps_in_play{{run_id=\"{id}\"}}");
        assert_eq!(d.metric(&series), in_play as f64, "{series}");
        cut += in_play;
    }
    kill_all(actors);
    // Two actors of 2 envs each stopped in mid-episode at least once in
    // five stops.
    assert!(cut > 0, "no stop cut an episode off: the sum is not tested");
}
