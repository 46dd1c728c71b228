//! Two runs learning at once on one daemon, fed by the same actor
//! processes over QUIC: DQN `async` and PPO `seed-a2c` on CartPole each
//! reach their confirmed target with exact books of their own, and the
//! actors of the first to finish go to the other. And isolation: a run
//! whose env cannot reset on any actor fails with that error while
//! another run on the same daemon reaches its target.

use crate::python_envs::corridor_config;
use rlfleet_shared::config::RunConfig;
use rlfleet_tests::daemon::{Daemon, check_run_books, kill_all};
use rlfleet_tests::{heavy, workspace_root};
use serde_json::Value;
use std::process::Child;
use std::time::{Duration, Instant};

fn shipped(name: &str, dir: &std::path::Path) -> RunConfig {
    let mut cfg = RunConfig::load(&workspace_root().join(format!("config/{name}.toml"))).unwrap();
    cfg.output_dir = dir.join(name);
    cfg
}

fn state(d: &Daemon, id: &str) -> Value {
    d.json(&format!("/v1/runs/{id}"))
}

fn ended(v: &Value) -> bool {
    v["state"] == "finished" || v["state"] == "failed"
}

#[test]
fn dqn_async_and_ppo_seed_a2c_learn_at_once_on_one_fleet() {
    let _heavy = heavy();
    let d = Daemon::start("", "");
    let dqn = shipped("cartpole-dqn-async", d.dir.path());
    let ppo = shipped("cartpole-ppo-seed-a2c", d.dir.path());
    let ids = [d.start_run(&dqn), d.start_run(&ppo)];
    let actors: Vec<Child> = (0..4)
        .map(|i| d.actor(&format!("both-{i}"), 1, &[]))
        .collect();
    // Until the first ends; then the actors go to the other, if it still
    // runs.
    let t0 = Instant::now();
    let first = loop {
        if let Some(i) = (0..2).find(|&i| ended(&state(&d, &ids[i]))) {
            break i;
        }
        assert!(t0.elapsed() < Duration::from_secs(900), "{}", d.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    let survivor = &ids[1 - first];
    let ended_at = Instant::now();
    let moved = loop {
        let all_there = d
            .json("/v1/actors")
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["run"].as_str() == Some(survivor.as_str()))
            .count()
            == 4;
        if all_there {
            break Some(ended_at.elapsed());
        }
        if ended(&state(&d, survivor)) {
            break None;
        }
        assert!(ended_at.elapsed() < Duration::from_secs(10), "{}", d.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("the first run ended; all 4 actors served the other after {moved:?}");
    let mut statuses = Vec::new();
    for id in &ids {
        statuses.push(d.wait_finished(id, Duration::from_secs(900)));
    }
    kill_all(actors);
    for (cfg, status) in [(&dqn, &statuses[0]), (&ppo, &statuses[1])] {
        assert_eq!(status["state"], "finished", "{status}");
        assert_eq!(status["target_reached"], true, "{status}");
        // Each run had actors of its own (both were served at once).
        let actors = check_run_books(&cfg.output_dir, status);
        assert!(actors.len() >= 2, "{}: {actors:?}", cfg.name);
        let evals = rlfleet_output::read_evals(&cfg.output_dir.join("evals.csv")).unwrap();
        let confirmed = evals
            .iter()
            .rfind(|e| e.confirming)
            .expect("a confirming evaluation");
        assert!(
            confirmed.episodes >= 100 && confirmed.mean_return >= 475.0,
            "{confirmed:?}"
        );
    }
}

#[test]
fn a_run_whose_env_cannot_reset_fails_alone_while_another_reaches_its_target() {
    let _heavy = heavy();
    let d = Daemon::start("", "");
    let stop = "[stop]\ntarget_eval_return = 0.39\nmax_env_steps = 40000\n\
                max_episodes = 20000\nmax_wall_secs = 240.0";
    let good = corridor_config("good", "Corridor", "async", stop, d.dir.path());
    let mut broken = corridor_config(
        "broken",
        "BrokenReset",
        "async",
        "[stop]\nmax_episodes = 1000",
        d.dir.path(),
    );
    broken.distributed.max_env_errors_in_a_row = 20;
    let good_id = d.start_run(&good);
    let broken_id = d.start_run(&broken);
    // Every actor lacks what the broken env needs.
    let env = [("RLFLEET_TEST_BREAK_RESET", "1")];
    let actors: Vec<Child> = (0..2)
        .map(|i| d.actor_with_env(&format!("iso-{i}"), 1, &[], &env))
        .collect();
    let failed = d.wait_finished(&broken_id, Duration::from_secs(120));
    assert_eq!(failed["state"], "failed", "{failed}");
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("20 times in a row"), "{error}");
    assert!(
        error.contains("this simulator cannot start here"),
        "{error}"
    );
    assert_eq!(failed["episodes_finished"], 0, "{failed}");
    let done = d.wait_finished(&good_id, Duration::from_secs(300));
    kill_all(actors);
    assert_eq!(done["state"], "finished", "{done}");
    assert_eq!(done["target_reached"], true, "{done}");
    assert_eq!(done["env_errors"], 0, "{done}");
    check_run_books(&good.output_dir, &done);
}
