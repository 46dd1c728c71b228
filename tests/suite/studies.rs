//! Sweeps and population-based training on one daemon, fed by real
//! `actor-client` processes over QUIC: a sweep's trials are ordinary runs,
//! at most `max_concurrent` at once, each with exact books and a row of
//! `sweep.csv`; a population's worst member copies a better one's
//! checkpoint bit for bit and perturbs its hyperparameters, and a daemon
//! killed mid-population takes every member and the lineage back.

use rlfleet_checkpoint::Checkpoint;
use rlfleet_shared::config::{RunConfig, TransportKind};
use rlfleet_tests::daemon::{Daemon, check_episode_books, check_run_books, kill_all};
use rlfleet_tests::{counting_probe, heavy, workspace_root};
use serde_json::{Value, json};
use std::process::Child;
use std::time::{Duration, Instant};

/// Submits a study (`sweeps` or `populations`); returns its id.
pub(crate) fn start_study(d: &Daemon, kind: &str, spec: &Value) -> String {
    let (status, body) = d.post(&format!("/v1/{kind}"), &spec.to_string());
    assert_eq!(status, 201, "POST /v1/{kind}: {body}");
    serde_json::from_str::<Value>(&body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Polls a study until `done` says so (or panics after `limit`).
pub(crate) fn wait_study(
    d: &Daemon,
    kind: &str,
    id: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let t0 = Instant::now();
    loop {
        let v = d.json(&format!("/v1/{kind}/{id}"));
        if done(&v) {
            return v;
        }
        assert!(
            t0.elapsed() < limit,
            "{kind}/{id} not done: {v}\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A sweep of the counting probe: `probe.epsilon` at `points` values ×
/// `seeds`, `episodes` each.
pub(crate) fn probe_sweep(
    name: &str,
    dir: &std::path::Path,
    points: usize,
    seeds: &[u64],
    concurrent: u32,
    episodes: u64,
) -> Value {
    let base = counting_probe(
        name,
        "async",
        TransportKind::Quic,
        1,
        episodes,
        &dir.join(name),
    );
    let eps: Vec<f64> = (0..points).map(|i| 0.1 + 0.2 * i as f64).collect();
    json!({
        "name": name,
        "base": base,
        "params": { "probe.epsilon": eps },
        "seeds": seeds,
        "max_concurrent": concurrent,
    })
}

#[test]
fn a_sweep_of_eight_trials_runs_four_at_a_time_and_fills_its_csv() {
    let _heavy = heavy();
    let d = Daemon::start("", "");
    // A spec that cannot run is refused whole, naming the problem.
    let mut bad = probe_sweep("bad", d.dir.path(), 2, &[1], 2, 10);
    bad["params"]["probe.epsilonn"] = json!([0.1]);
    let (status, body) = d.post("/v1/sweeps", &bad.to_string());
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("epsilonn") && body.contains("`epsilon`"),
        "{body}"
    );
    bad["params"] = json!({ "probe.epsilon": { "min": 0.1, "max": 0.5 } });
    let (status, body) = d.post("/v1/sweeps", &bad.to_string());
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("count"), "{body}");
    assert_eq!(d.json("/v1/sweeps"), json!([]));

    let spec = probe_sweep("eps", d.dir.path(), 4, &[1, 2], 4, 120);
    let id = start_study(&d, "sweeps", &spec);
    let states = |v: &Value| -> Vec<String> {
        v["trials"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["state"].as_str().unwrap().to_string())
            .collect()
    };
    // With no actors yet: the first 4 run, the other 4 wait, and stay so.
    wait_study(&d, "sweeps", &id, Duration::from_secs(30), |v| {
        states(v)[..4].iter().all(|s| s == "running")
    });
    std::thread::sleep(Duration::from_millis(600));
    let v = d.json(&format!("/v1/sweeps/{id}"));
    assert_eq!(states(&v)[4..], ["pending"; 4], "{v}");
    assert_eq!(d.json("/v1/runs").as_array().unwrap().len(), 4);
    let actors: Vec<Child> = (0..4)
        .map(|i| d.actor(&format!("sw-{i}"), 2, &[]))
        .collect();
    // Never more than 4 trials active or queued at once.
    let t0 = Instant::now();
    let mut most = 0;
    let end = loop {
        let v = d.json(&format!("/v1/sweeps/{id}"));
        let live = v["trials"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| matches!(t["state"].as_str(), Some("queued" | "running" | "stopping")))
            .count();
        most = most.max(live);
        if v["state"] != "active" {
            break v;
        }
        assert!(t0.elapsed() < Duration::from_secs(300), "{v}\n{}", d.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    kill_all(actors);
    assert_eq!(end["state"], "finished", "{end}");
    assert!(most <= 4, "{most} trials at once");
    let trials = end["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 8);
    let csv = std::fs::read_to_string(end["csv"].as_str().unwrap()).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 9, "{csv}");
    assert!(
        lines[0].starts_with("trial,run_id,seed,probe.epsilon,state,env_steps"),
        "{csv}"
    );
    for (i, t) in trials.iter().enumerate() {
        // Points vary slowest, seeds fastest.
        assert_eq!(t["trial"], i + 1);
        assert_eq!(t["seed"], [1, 2][i % 2]);
        let run_id = t["run_id"].as_str().unwrap();
        assert!(run_id.starts_with(&format!("{id}-{}-", i + 1)), "{t}");
        assert_eq!(t["state"], "finished", "{t}");
        // The trial's run was given its point and seed.
        let cfg = RunConfig::from_toml(
            &std::fs::read_to_string(
                d.dir
                    .path()
                    .join(format!("rlfleet-state/runs/{run_id}/run.toml")),
            )
            .unwrap(),
            run_id,
        )
        .unwrap();
        assert_eq!(cfg.seed, t["seed"].as_u64().unwrap());
        assert_eq!(
            cfg.probe.epsilon,
            t["params"]["probe.epsilon"].as_f64().unwrap()
        );
        let status = d.json(&format!("/v1/runs/{run_id}"));
        check_episode_books(&cfg.output_dir, 120, &status);
        assert_eq!(t["env_steps"], status["env_steps"], "{t}");
        let cells: Vec<&str> = lines[i + 1].split(',').collect();
        assert_eq!(cells[1], run_id, "{csv}");
        assert_eq!(cells[4], "finished", "{csv}");
        assert_eq!(cells[5], status["env_steps"].to_string(), "{csv}");
    }
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(
            d.dir
                .path()
                .join(format!("rlfleet-state/sweeps/{id}/study.json")),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(record["state"], "finished");
}

/// A small CartPole DQN for a population: every member finishes at
/// 6,000 env steps, a generation is 2,000, the replay is checkpointed.
fn cartpole_base(dir: &std::path::Path) -> RunConfig {
    let mut cfg =
        RunConfig::load(&workspace_root().join("config/cartpole-dqn-async.toml")).unwrap();
    cfg.name = "pbt".into();
    cfg.output_dir = dir.join("pbt");
    cfg.stop.target_eval_return = None;
    cfg.stop.max_env_steps = Some(6_000);
    cfg.stop.max_wall_secs = Some(600.0);
    cfg.eval.period_steps = 500;
    cfg.eval.episodes = 3;
    cfg.checkpoint.period_steps = 1_000;
    cfg.checkpoint.replay = true;
    cfg.dqn.hidden = vec![32, 32];
    cfg.dqn.learning_starts = 500;
    cfg.dqn.train_freq = 64;
    cfg.dqn.gradient_steps = 8;
    cfg.dqn.buffer_size = 10_000;
    cfg
}

/// The f32 tensors' bits, by name.
fn bits(ck: &Checkpoint) -> Vec<(String, Vec<u32>)> {
    ck.agent_state
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.data.iter().map(|x| x.to_bits()).collect()))
        .collect()
}

#[test]
fn a_population_copies_its_best_bit_for_bit_and_survives_a_sigkill() {
    let _heavy = heavy();
    let mut d = Daemon::start("", "");
    let spec = json!({
        "name": "cp",
        "base": cartpole_base(d.dir.path()),
        "size": 4,
        "interval_env_steps": 2_000,
        "params": { "dqn.lr": { "min": 0.0001, "max": 0.003, "log": true } },
        "seed": 5,
    });
    let id = start_study(&d, "populations", &spec);
    let actors: Vec<Child> = (0..4)
        .map(|i| d.actor(&format!("pbt-{i}"), 1, &[]))
        .collect();
    // The first generation's exploit, then a SIGKILL while the members
    // train on into the second.
    let first = wait_study(&d, "populations", &id, Duration::from_secs(600), |v| {
        !v["exploits"].as_array().unwrap().is_empty()
    });
    d.crash_and_restart();
    let end = wait_study(&d, "populations", &id, Duration::from_secs(900), |v| {
        v["state"] != "active"
    });
    kill_all(actors);
    assert_eq!(end["state"], "finished", "{end}\n{}", d.log());
    let exploits = end["exploits"].as_array().unwrap();
    // One exploit a generation (a quarter of 4), at 2,000 and 4,000, the
    // lineage of before the kill kept.
    assert_eq!(exploits.len(), 2, "{end}");
    assert_eq!(exploits[0], first["exploits"][0], "{end}");
    let generations: Vec<u64> = exploits
        .iter()
        .map(|e| e["generation"].as_u64().unwrap())
        .collect();
    assert_eq!(generations, [1, 2], "{end}");
    let kept = d
        .dir
        .path()
        .join(format!("rlfleet-state/populations/{id}/exploits"));
    for e in exploits {
        let (g, m) = (&e["generation"], &e["member"]);
        let donor = Checkpoint::load(&kept.join(format!("g{g}-m{m}-donor.safetensors"))).unwrap();
        let copy = Checkpoint::load(&kept.join(format!("g{g}-m{m}.safetensors"))).unwrap();
        // The learner is the donor's, bit for bit (its replay too); the
        // books and counters stay the member's own.
        assert_eq!(bits(&copy), bits(&donor), "{e}");
        assert!(copy.replay.is_some() && copy.replay == donor.replay, "{e}");
        assert_eq!(
            donor.counters.env_steps,
            e["donor_env_steps"].as_u64().unwrap()
        );
        assert_eq!(copy.counters.env_steps, e["env_steps"].as_u64().unwrap());
        assert!(
            copy.counters.env_steps >= 2_000 * g.as_u64().unwrap(),
            "{e}"
        );
        assert_ne!(copy.books, donor.books, "{e}");
        assert!(
            e["donor_metric"].as_f64() >= e["member_metric"].as_f64(),
            "{e}"
        );
        // The explore: the donor's lr ×0.8 or ×1.2 (or drawn again),
        // what the member's run resumed with.
        let new = e["changes"][0]["new"].as_f64().unwrap();
        assert!((0.0001..=0.003).contains(&new), "{e}");
        let run = e["member_run"].as_str().unwrap();
        assert!(run.starts_with(&format!("{id}-{m}-")), "{e}");
    }
    // Every member's books are exact on their own, over the exploits and
    // the kill; each ran its 6,000 env steps.
    for m in end["members"].as_array().unwrap() {
        let run = m["run_id"].as_str().unwrap();
        let status = d.json(&format!("/v1/runs/{run}"));
        assert_eq!(status["state"], "finished", "{status}");
        assert!(status["env_steps"].as_u64().unwrap() >= 6_000, "{status}");
        let dir = d.dir.path().join(format!("pbt/{id}/{}", m["member"]));
        check_run_books(&dir, &status);
        let cfg = RunConfig::from_toml(
            &std::fs::read_to_string(
                d.dir
                    .path()
                    .join(format!("rlfleet-state/runs/{run}/run.toml")),
            )
            .unwrap(),
            run,
        )
        .unwrap();
        assert_eq!(json!(cfg.dqn.lr), m["params"]["dqn.lr"], "{m}");
    }
    let csv = std::fs::read_to_string(end["csv"].as_str().unwrap()).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(
        csv.starts_with("generation,env_steps,member,member_run,donor,donor_run,"),
        "{csv}"
    );
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with("dqn.lr_old,dqn.lr_new"),
        "{csv}"
    );
    // The counter restarted with the daemon: the second exploit only.
    assert_eq!(
        d.metric(&format!(
            "rlfleet_pbt_exploits_total{{population=\"{id}\"}}"
        )),
        1.0
    );
}

/// Runs `learner-server ARGS` to its end (at most three minutes).
fn learner(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let child = std::process::Command::new(rlfleet_tests::binary("learner-server"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = rlfleet_tests::wait_output(child, Duration::from_secs(180), "learner-server");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `learner-server sweep` and `pbt`: a spec whose `base` names a config
/// file, run embedded with local actors to its end, the CSV printed; and
/// `learner-server sweeps …`/`populations …`, the API's client.
#[test]
fn the_sweep_and_pbt_commands_and_their_clients() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let mut base = counting_probe("cli", "async", TransportKind::Quic, 1, 60, &p.join("out"));
    std::fs::write(p.join("base.toml"), base.to_resolved_toml()).unwrap();
    std::fs::write(
        p.join("sweep.toml"),
        "name = \"cli\"\nbase = \"base.toml\"\nmax_concurrent = 2\n[params]\n\"probe.epsilon\" = [0.2, 0.6]\n",
    )
    .unwrap();
    let state = p.join("state");
    let sweep = |state: &std::path::Path| {
        let spec = p.join("sweep.toml");
        let args = ["sweep", spec.to_str().unwrap(), "--local-actors", "2"];
        learner(
            &[&args[..], &["--state-dir", state.to_str().unwrap()]].concat(),
            &[],
        )
    };
    let (ok, out, err) = sweep(&state);
    assert!(ok, "{err}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with(char::is_numeric))
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows.iter().all(|r| r.contains(",finished,")), "{out}");
    assert!(out.starts_with("cli-1 Finished: "), "{out}");
    // Run again on a fresh state directory: the sweep takes the same id,
    // and its trials and CSV go to a sibling of the first one's folder,
    // which stays as it was.
    let first_csv = std::fs::read_to_string(p.join("out/cli-1/sweep.csv")).unwrap();
    let (ok, again, err) = sweep(&p.join("state2"));
    assert!(ok, "{err}");
    assert!(again.starts_with("cli-1 Finished: "), "{again}");
    assert!(again.contains("out/cli-1-2/sweep.csv"), "{again}");
    let second_csv = std::fs::read_to_string(p.join("out/cli-1-2/sweep.csv")).unwrap();
    assert_eq!(second_csv.lines().count(), 3, "{second_csv}");
    assert!(
        second_csv.lines().skip(1).all(|r| r.contains(",finished,")),
        "{second_csv}"
    );
    for n in ["1", "2"] {
        let episodes =
            std::fs::read_to_string(p.join("out/cli-1-2").join(n).join("episodes.csv")).unwrap();
        assert_eq!(episodes.lines().count(), 61, "trial {n}: {episodes}");
        assert!(!p.join("out/cli-1").join(format!("{n}-2")).exists());
    }
    assert_eq!(
        std::fs::read_to_string(p.join("out/cli-1/sweep.csv")).unwrap(),
        first_csv
    );

    // A population of the probe: 2 members, a generation of 300 env steps,
    // 900 each; ranked by their training returns.
    base.stop.max_episodes = Some(1 << 40);
    base.stop.max_env_steps = Some(900);
    std::fs::write(p.join("base.toml"), base.to_resolved_toml()).unwrap();
    std::fs::write(
        p.join("pop.toml"),
        "name = \"clipop\"\nbase = \"base.toml\"\nsize = 2\ninterval_env_steps = 300\nmetric = \"train_mean\"\n[params]\n\"probe.epsilon\" = { min = 0.1, max = 0.9 }\n",
    )
    .unwrap();
    let (ok, out, err) = learner(
        &[
            "pbt",
            p.join("pop.toml").to_str().unwrap(),
            "--local-actors",
            "2",
            "--state-dir",
            state.to_str().unwrap(),
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert!(out.starts_with("clipop-1 Finished: "), "{out}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with(char::is_numeric))
        .collect();
    // One exploit at each of 300 and 600 env steps.
    assert_eq!(rows.len(), 2, "{out}");
    assert!(
        rows[0].starts_with("1,") && rows[1].starts_with("2,"),
        "{out}"
    );
    // A bad spec is refused with what is wrong, exit code 2.
    std::fs::write(
        p.join("bad.toml"),
        "name = \"x\"\nbase = \"base.toml\"\nsize = 2\n",
    )
    .unwrap();
    let (ok, _, err) = learner(&["pbt", p.join("bad.toml").to_str().unwrap()], &[]);
    assert!(!ok && err.contains("interval_env_steps"), "{err}");

    // The client, against a daemon with a token.
    let d = Daemon::start("", "token = \"tok\"\n[runs]\nmax_active = 1");
    let env = [
        ("RLFLEET_API", d.api.as_str()),
        ("RLFLEET_API_TOKEN", "tok"),
    ];
    let spec = p.join("sweep.toml");
    let (ok, out, err) = learner(&["sweeps", "submit", spec.to_str().unwrap()], &env);
    assert!(ok, "{err}");
    let id = out.trim().to_string();
    assert_eq!(id, "cli-1", "{out}");
    let (ok, out, err) = learner(&["sweeps", "list"], &env);
    assert!(
        ok && out
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("active")),
        "{out}{err}"
    );
    let (ok, out, err) = learner(&["sweeps", "show", &id], &env);
    assert!(ok, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["trials"].as_array().unwrap().len(), 2, "{shown}");
    let (ok, out, err) = learner(&["sweeps", "stop", &id], &env);
    assert!(ok && out.contains("stopping"), "{out}{err}");
    let v = wait_study(&d, "sweeps", &id, Duration::from_secs(30), |v| {
        v["state"] == "stopped"
    });
    assert_eq!(v["state"], "stopped");
    let (ok, out, err) = learner(&["populations", "list"], &env);
    assert!(ok && out.starts_with("ID "), "{out}{err}");
    let (ok, _, err) = learner(&["populations", "show", "nope-1"], &env);
    assert!(!ok && err.contains("404"), "{err}");
}
