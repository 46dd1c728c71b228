//! Many runs on one daemon, fed by one fleet of real `actor-client`
//! processes over QUIC: the actors join the daemon, not a run, and the
//! daemon shares them between its active runs by `[fleet] weight`
//! (counted in envs); a run past `[runs] max_active` waits `queued` and
//! starts when a slot frees, taking its share from the others; every
//! run's books stay exact on their own.

use rlfleet_shared::config::{RunConfig, TransportKind};
use rlfleet_tests::counting_probe;
use rlfleet_tests::daemon::{Daemon, check_run_books, kill_all};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Child;
use std::time::{Duration, Instant};

/// A `probe` run on `Counting-v0` over QUIC that plays until stopped.
pub(crate) fn endless(name: &str, weight: f64, dir: &std::path::Path) -> RunConfig {
    let mut cfg = counting_probe(
        name,
        "async",
        TransportKind::Quic,
        1,
        1 << 40,
        &dir.join(name),
    );
    cfg.stop.max_wall_secs = Some(300.0);
    cfg.fleet.weight = weight;
    cfg
}

/// Actors serving each run now, as `GET /v1/actors` shows them.
fn actors_by_run(d: &Daemon) -> BTreeMap<String, u32> {
    let mut by = BTreeMap::new();
    for a in d.json("/v1/actors").as_array().unwrap() {
        if let Some(run) = a["run"].as_str() {
            *by.entry(run.to_string()).or_default() += 1;
        }
    }
    by
}

/// Waits until the actors serve the runs as `want` (run id → actors),
/// each within one actor; returns what it saw.
fn settle(d: &Daemon, want: &[(&str, u32)], limit: Duration) -> BTreeMap<String, u32> {
    let t0 = Instant::now();
    loop {
        let by = actors_by_run(d);
        let near = want.iter().all(|(id, n)| {
            let got = by.get(*id).copied().unwrap_or(0);
            got.abs_diff(*n) <= 1
        });
        let total: u32 = by.values().sum();
        if near && total == want.iter().map(|w| w.1).sum::<u32>() {
            return by;
        }
        assert!(
            t0.elapsed() < limit,
            "the actors never settled to {want:?}: {by:?}\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A stopped run's books ([`check_run_books`]), every finished episode
/// in `episodes.csv`.
fn check_stopped_books(cfg: &RunConfig, status: &Value) {
    let (ids, _) = rlfleet_tests::episode_ids_and_steps(&cfg.output_dir);
    assert_eq!(
        ids.len() as u64,
        status["episodes_finished"].as_u64().unwrap()
    );
    check_run_books(&cfg.output_dir, status);
}

fn stop(d: &Daemon, id: &str) -> Value {
    let (status, body) = d.post(&format!("/v1/runs/{id}/stop"), "");
    assert_eq!(status, 202, "{body}");
    d.wait_finished(id, Duration::from_secs(60))
}

#[test]
fn eight_actors_follow_the_weights_and_a_queued_run_takes_its_share() {
    let _heavy = rlfleet_tests::heavy();
    let d = Daemon::start("", "[runs]\nmax_active = 2");
    let light = endless("light", 1.0, d.dir.path());
    let heavy = endless("heavy", 3.0, d.dir.path());
    let third = endless("third", 1.0, d.dir.path());
    let light_id = d.start_run(&light);
    let heavy_id = d.start_run(&heavy);
    let actors: Vec<Child> = (0..8)
        .map(|i| d.actor(&format!("fleet-{i}"), 1, &[]))
        .collect();
    // Weights 1 and 3 over 8 envs: 2 and 6, within one actor.
    settle(
        &d,
        &[(light_id.as_str(), 2), (heavy_id.as_str(), 6)],
        Duration::from_secs(60),
    );
    // And it holds while both run: sampled for a second, every sample.
    for _ in 0..10 {
        let runs = d.json("/v1/runs?state=running");
        let envs: BTreeMap<&str, u64> = runs
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["id"].as_str().unwrap(), r["envs"].as_u64().unwrap()))
            .collect();
        assert!(envs[light_id.as_str()].abs_diff(2) <= 1, "{runs}");
        assert_eq!(
            envs[light_id.as_str()] + envs[heavy_id.as_str()],
            8,
            "{runs}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Both are served.
    for id in [&light_id, &heavy_id] {
        let s = d.wait_until(id, Duration::from_secs(30), |v| {
            v["episodes_finished"].as_u64().unwrap() > 20
        });
        assert_eq!(s["state"], "running", "{s}");
    }

    // A third at max_active = 2 waits queued, with its reason visible in
    // its state; the others keep their actors.
    let third_id = d.start_run(&third);
    let queued = d.json("/v1/runs?state=queued");
    assert_eq!(queued.as_array().unwrap().len(), 1, "{queued}");
    assert_eq!(queued[0]["id"], Value::String(third_id.clone()));
    assert_eq!(queued[0]["envs"], 0, "{queued}");
    assert_eq!(d.metric("rlfleet_queued_runs"), 1.0);
    std::thread::sleep(Duration::from_millis(500));
    let still = d.json(&format!("/v1/runs/{third_id}"));
    assert_eq!(still["state"], "queued", "{still}");
    assert_eq!(still["env_steps"], 0, "{still}");

    // The light run ends: the third starts in its slot and takes its
    // share from the heavy one (3:1 over 8 envs: 6 and 2).
    let light_end = stop(&d, &light_id);
    assert_eq!(light_end["reason"], "stopped on request", "{light_end}");
    d.wait_until(&third_id, Duration::from_secs(30), |v| {
        v["state"] == "running"
    });
    assert_eq!(d.metric("rlfleet_queued_runs"), 0.0);
    settle(
        &d,
        &[(heavy_id.as_str(), 6), (third_id.as_str(), 2)],
        Duration::from_secs(60),
    );
    d.wait_until(&third_id, Duration::from_secs(30), |v| {
        v["episodes_finished"].as_u64().unwrap() > 20
    });
    assert!(d.metric("rlfleet_actors_moved_total") >= 1.0);
    let heavy_end = stop(&d, &heavy_id);
    // The heavy run gone, every actor serves the third.
    settle(&d, &[(third_id.as_str(), 8)], Duration::from_secs(60));
    let third_end = stop(&d, &third_id);
    kill_all(actors);
    for (cfg, status) in [
        (&light, &light_end),
        (&heavy, &heavy_end),
        (&third, &third_end),
    ] {
        check_stopped_books(cfg, status);
    }
    // Each run has its own series, labelled with its name and id.
    for (cfg, id) in [
        (&light, &light_id),
        (&heavy, &heavy_id),
        (&third, &third_id),
    ] {
        let status = d.json(&format!("/v1/runs/{id}"));
        let series = format!(
            "rlfleet_episodes_finished_total{{run=\"{}\",run_id=\"{id}\"}}",
            cfg.name
        );
        assert_eq!(
            d.metric(&series),
            status["episodes_finished"].as_f64().unwrap(),
            "{series}"
        );
    }
}

/// SIGKILL with three runs active, one queued and a sweep in progress:
/// the daemon started again on the same state directory resumes the three
/// from their checkpoints, queues the fourth again, takes the sweep back
/// (its trial resumes, the rest start), and every run's episodes finish
/// once.
#[test]
fn a_killed_daemon_takes_back_its_active_and_queued_runs_and_its_sweep() {
    const EPISODES: u64 = 1_500;
    const TRIAL_EPISODES: u64 = 400;
    let _heavy = rlfleet_tests::heavy();
    let mut d = Daemon::start("", "[runs]\nmax_active = 4");
    let spec = crate::studies::probe_sweep("kept-sweep", d.dir.path(), 3, &[1], 1, TRIAL_EPISODES);
    let sweep = crate::studies::start_study(&d, "sweeps", &spec);
    crate::studies::wait_study(&d, "sweeps", &sweep, Duration::from_secs(30), |v| {
        v["trials"][0]["state"] == "running"
    });
    let cfgs: Vec<RunConfig> = (0..4)
        .map(|i| {
            let name = format!("kept-{i}");
            let out = d.dir.path().join(&name);
            let mut cfg = counting_probe(&name, "async", TransportKind::Quic, i, EPISODES, &out);
            cfg.checkpoint.period_steps = 1_000;
            cfg
        })
        .collect();
    let ids: Vec<String> = cfgs.iter().map(|c| d.start_run(c)).collect();
    assert_eq!(d.json(&format!("/v1/runs/{}", ids[3]))["state"], "queued");
    let actors: Vec<Child> = (0..4)
        .map(|i| d.actor(&format!("kept-{i}"), 2, &[]))
        .collect();
    // Each active run past a checkpoint, none finished.
    for id in &ids[..3] {
        d.wait_until(id, Duration::from_secs(60), |v| {
            v["episodes_finished"].as_u64().unwrap() >= 200
        });
    }
    let before = d.json(&format!("/v1/sweeps/{sweep}"));
    assert_eq!(before["state"], "active", "{before}");
    assert!(
        before["trials"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["state"] != "finished"),
        "{before}"
    );
    d.crash_and_restart();
    for id in &ids[..3] {
        let v = d.wait_until(id, Duration::from_secs(30), |v| {
            !v["resumed_from"].is_null()
        });
        assert!(
            v["episodes_finished"].as_u64().unwrap() < EPISODES,
            "{id} had finished before the kill: {v}"
        );
    }
    let fourth = d.json(&format!("/v1/runs/{}", ids[3]));
    assert!(
        fourth["state"] == "queued" || fourth["state"] == "running",
        "{fourth}"
    );
    for (cfg, id) in cfgs.iter().zip(&ids) {
        let status = d.wait_finished(id, Duration::from_secs(300));
        assert_eq!(status["state"], "finished", "{status}\n{}", d.log());
        assert_eq!(status["episodes_finished"], EPISODES, "{status}");
        rlfleet_tests::daemon::check_episode_books(&cfg.output_dir, EPISODES, &status);
        let record = d.record(id);
        assert_eq!(record["state"], "finished", "{record}");
    }
    let end = crate::studies::wait_study(&d, "sweeps", &sweep, Duration::from_secs(300), |v| {
        v["state"] != "active"
    });
    kill_all(actors);
    assert_eq!(end["state"], "finished", "{before}\n{end}");
    for t in end["trials"].as_array().unwrap() {
        assert_eq!(t["state"], "finished", "{end}");
        let run = t["run_id"].as_str().unwrap();
        let out = d
            .dir
            .path()
            .join(format!("kept-sweep/{sweep}/{}", t["trial"]));
        match d.get(&format!("/v1/runs/{run}")) {
            (200, body) => {
                let status: Value = serde_json::from_str(&body).unwrap();
                rlfleet_tests::daemon::check_episode_books(&out, TRIAL_EPISODES, &status);
            }
            // It finished before the kill: its files hold its episodes.
            _ => {
                let (ids, _) = rlfleet_tests::episode_ids_and_steps(&out);
                assert_eq!(ids, (0..TRIAL_EPISODES).collect::<Vec<_>>(), "{t}");
            }
        }
    }
}

/// An ended run's series leave `/metrics` after `[runs]
/// metrics_retention_secs`; the daemon's stay.
#[test]
fn an_ended_runs_series_leave_after_the_retention() {
    let d = Daemon::start("", "[runs]\nmetrics_retention_secs = 3");
    let cfg = counting_probe(
        "brief",
        "async",
        TransportKind::Quic,
        1,
        30,
        &d.dir.path().join("brief"),
    );
    let id = d.start_run(&cfg);
    let actor = d.actor("brief", 1, &["--once"]);
    let status = d.wait_finished(&id, Duration::from_secs(60));
    let series = format!("rlfleet_episodes_finished_total{{run_id=\"{id}\"}}");
    // Still there just after the end (the retention is not over).
    assert_eq!(d.metric(&series), 30.0, "{status}");
    let t0 = Instant::now();
    loop {
        let (_, text) = d.get("/metrics");
        if !text.contains(&format!("run_id=\"{id}\"")) {
            assert!(text.contains("rlfleet_runs_started_total 1"), "{text}");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, err) = rlfleet_tests::daemon::finish_actor(actor);
    assert!(ok, "{err}");
}

/// An actor that cannot build a run's env declines it once; that run is
/// not offered to it again (`GET /v1/actors` says why), it serves another,
/// and the declined run is played by the actors that can.
#[test]
fn an_actor_that_cannot_build_a_runs_env_declines_it_and_serves_another() {
    let d = Daemon::start("", "");
    let stop = "[stop]\nmax_episodes = 150\nmax_wall_secs = 120.0";
    let needy =
        crate::python_envs::corridor_config("needy", "NeedsLicense", "async", stop, d.dir.path());
    let plain =
        crate::python_envs::corridor_config("plain", "Corridor", "async", stop, d.dir.path());
    let needy_id = d.start_run(&needy);
    let mut unlicensed =
        d.actor_with_env("unlicensed", 1, &[], &[("RLFLEET_TEST_NO_LICENSE", "1")]);
    let t0 = Instant::now();
    let why = loop {
        let actors = d.json("/v1/actors");
        if let Some(why) = actors[0]["declined"][needy_id.as_str()].as_str() {
            break why.to_string();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{actors}\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(why.contains("no license here"), "{why}");
    let plain_id = d.start_run(&plain);
    let licensed = d.actor("licensed", 1, &[]);
    let needy_end = d.wait_finished(&needy_id, Duration::from_secs(120));
    let plain_end = d.wait_finished(&plain_id, Duration::from_secs(120));
    for (cfg, status) in [(&needy, &needy_end), (&plain, &plain_end)] {
        assert_eq!(status["state"], "finished", "{status}");
        rlfleet_tests::daemon::check_episode_books(&cfg.output_dir, 150, status);
    }
    // The declined run's episodes were all played by the licensed actor,
    // and the other run was served by the unlicensed one.
    let by_actor = |cfg: &RunConfig| -> std::collections::BTreeSet<u32> {
        rlfleet_output::read_episodes(&cfg.output_dir.join("episodes.csv"))
            .unwrap()
            .iter()
            .map(|e| e.actor)
            .collect()
    };
    assert_eq!(by_actor(&needy).len(), 1, "{needy_end}");
    assert!(!by_actor(&plain).is_empty());
    let _ = unlicensed.kill();
    let out = unlicensed.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("declined").count(), 1, "{err}\n{}", d.log());
    kill_all(vec![licensed]);
}

/// `learner-server runs …`, the control API's command-line client: submit
/// a TOML config, list, show, stop and resume, with the token from the
/// environment; a wrong token and an unknown run are errors that say so.
#[test]
fn the_runs_command_submits_lists_shows_stops_and_resumes() {
    let d = Daemon::start("", "token = \"tok\"");
    let cfg = endless("cli", 1.0, d.dir.path());
    let file = d.dir.path().join("cli.toml");
    std::fs::write(&file, cfg.to_resolved_toml()).unwrap();
    let runs = |args: &[&str], token: &str| {
        let out = std::process::Command::new(rlfleet_tests::binary("learner-server"))
            .arg("runs")
            .args(args)
            .env("RLFLEET_API", &d.api)
            .env("RLFLEET_API_TOKEN", token)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = runs(&["submit", file.to_str().unwrap()], "tok");
    assert!(ok, "{err}");
    let (id, state) = out.trim().split_once(' ').expect("ID STATE");
    assert_eq!(state, "running", "{out}");
    let (ok, out, err) = runs(&["list"], "tok");
    assert!(ok, "{err}");
    assert!(out.starts_with("ID "), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(id) && l.contains("running")),
        "{out}"
    );
    let (ok, out, _) = runs(&["list", "--state", "queued"], "tok");
    assert!(ok && out.lines().count() == 1, "{out}");
    let (ok, out, err) = runs(&["show", id], "tok");
    assert!(ok, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["id"], id);
    let (ok, out, err) = runs(&["stop", id], "tok");
    assert!(ok && out.contains("stopping"), "{out}{err}");
    d.wait_finished(id, Duration::from_secs(60));
    let (ok, out, err) = runs(&["resume", id], "tok");
    assert!(ok, "{err}");
    assert_eq!(out.trim(), format!("{id} running"), "{out}");
    let (ok, _, err) = runs(&["stop", id], "tok");
    assert!(ok, "{err}");
    // Errors name the problem and fail the command.
    let (ok, _, err) = runs(&["list"], "wrong");
    assert!(!ok && err.contains("401"), "{err}");
    let (ok, _, err) = runs(&["show", "no-such-run"], "tok");
    assert!(!ok && err.contains("404"), "{err}");
    d.wait_finished(id, Duration::from_secs(60));
}
