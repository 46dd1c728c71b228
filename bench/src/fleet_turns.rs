//! `fleet`'s device part: two learner-bound runs of weights 1 and 3 on
//! one daemon, two pinned actors each, under `[runs] device_turns =
//! "free"` (the baseline: the threads as the OS schedules them) and
//! `"weighted"`: the heavy run's share of the device's seconds, what each
//! run waited for its turns, and the env steps/s in all against free's.

use crate::soak::Server;
use rlfleet_shared::config::RunConfig;
use serde::Serialize;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[derive(Debug, Serialize)]
pub struct TurnsRow {
    pub device_turns: String,
    /// Seconds each run held the device (weights 1, 3).
    pub device_secs: [f64; 2],
    /// Seconds each run waited for its turns.
    pub device_wait_secs: [f64; 2],
    /// The weight-3 run's share of the device's seconds (0.75 is by
    /// weight; 0.5 is even).
    pub heavy_share: f64,
    pub env_steps_per_sec: f64,
    /// Env steps/s in all against `free`'s.
    pub ratio_vs_free: f64,
}

/// The main job's DQN made learner-bound: a gradient step of batch 256
/// per env step.
fn learner_bound(s: &Server, name: &str, weight: f64) -> anyhow::Result<RunConfig> {
    let mut cfg = crate::endless::endless(s, name)?;
    cfg.eval.period_steps = 1 << 40;
    cfg.dqn.batch_size = 256;
    cfg.dqn.train_freq = 16;
    cfg.dqn.gradient_steps = 16;
    cfg.fleet.weight = weight;
    Ok(cfg)
}

fn pinned(s: &Server, id: &str, run: &str) -> anyhow::Result<Child> {
    let exe = std::env::current_exe()?.with_file_name("actor-client");
    Ok(Command::new(&exe)
        .args(["--server", &s.actors.to_string(), "--pin", &s.fingerprint])
        .args(["--envs", "2", "--actor-id", id, "--run", run])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?)
}

/// (device seconds, device wait seconds, env steps, wall seconds) of a
/// run that has ended.
fn figures(s: &Server, id: &str) -> anyhow::Result<(f64, f64, u64, f64)> {
    let t0 = std::time::Instant::now();
    loop {
        let v = s.json(&format!("/v1/runs/{id}"))?;
        if v["state"] == "finished" {
            let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
            let steps = v["env_steps"].as_u64().unwrap_or(0);
            return Ok((
                f("device_secs"),
                f("device_wait_secs"),
                steps,
                f("wall_secs"),
            ));
        }
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(120),
            "{id} never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Both runs from their start to their stop, `secs` after a 5-s warm-up
/// (their whole lives: a status read mid-run lags by a loop's turn).
fn one(sharing: &str, secs: f64) -> anyhow::Result<TurnsRow> {
    let s = Server::start_with(
        tempfile::tempdir()?,
        &format!("[runs]\ndevice_turns = \"{sharing}\"\n"),
    )?;
    let ids = [
        s.start_run(&learner_bound(&s, "light", 1.0)?)?,
        s.start_run(&learner_bound(&s, "heavy", 3.0)?)?,
    ];
    let mut actors: Vec<Child> = (0..4)
        .map(|i| pinned(&s, &format!("turns-{i}"), &ids[i / 2]))
        .collect::<anyhow::Result<_>>()?;
    std::thread::sleep(Duration::from_secs_f64(5.0 + secs));
    for id in &ids {
        s.post(&format!("/v1/runs/{id}/stop"))?;
    }
    let ends = [figures(&s, &ids[0])?, figures(&s, &ids[1])?];
    for a in &mut actors {
        let _ = a.kill();
        let _ = a.wait();
    }
    let (d, w) = (|i: usize| ends[i].0, |i: usize| ends[i].1);
    Ok(TurnsRow {
        device_turns: sharing.to_string(),
        device_secs: [d(0), d(1)],
        device_wait_secs: [w(0), w(1)],
        heavy_share: d(1) / (d(0) + d(1)),
        env_steps_per_sec: ends.iter().map(|e| e.2 as f64 / e.3).sum(),
        ratio_vs_free: f64::NAN,
    })
}

/// `free`, then `weighted`, each for `secs`.
pub fn turns(secs: f64) -> anyhow::Result<Vec<TurnsRow>> {
    let mut rows: Vec<TurnsRow> = Vec::new();
    for sharing in ["free", "weighted"] {
        let mut row = one(sharing, secs)?;
        let free = rows
            .first()
            .map_or(row.env_steps_per_sec, |r| r.env_steps_per_sec);
        row.ratio_vs_free = row.env_steps_per_sec / free;
        println!(
            "device_turns = {sharing}: runs of weights 1 and 3 held the device {:.1} s and {:.1} s \
             (heavy share {:.2}; waited {:.1} s and {:.1} s); {:.0} env steps/s in all \
             ({:.2}x free's)",
            row.device_secs[0],
            row.device_secs[1],
            row.heavy_share,
            row.device_wait_secs[0],
            row.device_wait_secs[1],
            row.env_steps_per_sec,
            row.ratio_vs_free
        );
        rows.push(row);
    }
    Ok(rows)
}
