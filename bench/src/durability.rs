//! `checkpoint`: what durability costs.
//!
//! - Stall: a DQN learner ingests batches of 64 CartPole transitions with a
//!   gradient step each, in one process, with no checkpoint (the baseline),
//!   then with a checkpoint every second without the replay, with a replay
//!   of 50,000 transitions and of 1,000,000 (`checkpoint.replay = true`).
//!   Reported: ingest latency p50/p99/max per case, as ratios against the
//!   baseline, and the snapshot (the run thread's copy) per checkpoint.
//! - Restart: a recorded run with a 1,000,000-transition replay in its
//!   checkpoint, found `active` by a `learner-server serve` started on its
//!   state directory (as after a SIGKILL): seconds from the process start to
//!   listening, to the run resumed, and to its first gradient step once one
//!   actor is back; against the same with the replay not in the checkpoint.

use crate::soak::Server;
use rlfleet_checkpoint::Checkpoint;
use rlfleet_learning::agents::Dqn;
use rlfleet_learning::agents::{Learn, Persist};
use rlfleet_replay::Transition;
use rlfleet_run::state::StateDir;
use rlfleet_run::workflows::{Desk, RunOptions};
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::{self, Action};
use serde::Serialize;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tch::Device;

#[derive(Debug, Serialize)]
pub struct StallRow {
    pub case: String,
    pub replay_transitions: usize,
    pub checkpoints: usize,
    pub ingest_p50_us: f64,
    pub ingest_p99_us: f64,
    pub ingest_max_us: f64,
    pub p50_ratio: f64,
    pub p99_ratio: f64,
    pub snapshot_mean_ms: f64,
    pub snapshot_max_ms: f64,
    pub checkpoint_bytes: u64,
}

#[derive(Debug, Serialize)]
pub struct RestartRow {
    pub replay_in_checkpoint: bool,
    pub replay_transitions: usize,
    pub checkpoint_bytes: u64,
    pub secs_to_listening: f64,
    pub secs_to_resumed: f64,
    pub secs_to_first_gradient_step: f64,
}

fn config(buffer: usize, dir: &std::path::Path) -> anyhow::Result<RunConfig> {
    let mut cfg = RunConfig::load(std::path::Path::new("config/cartpole-dqn-async.toml"))?;
    cfg.output_dir = dir.to_path_buf();
    cfg.dqn.buffer_size = buffer as u32;
    cfg.dqn.learning_starts = 0;
    cfg.checkpoint.period_steps = 0;
    cfg.eval.period_steps = 1_000_000_000;
    Ok(cfg)
}

/// Plays `n` CartPole steps (actions alternating) into the agent's replay.
pub fn fill(agent: &mut Dqn, n: usize) {
    let mut e = env::make("CartPole-v1").expect("built-in");
    let (mut obs, mut next) = (vec![0f32; 4], vec![0f32; 4]);
    e.reset(Some(0), &mut obs);
    for i in 0..n {
        let a = [(i % 2) as f32];
        let s = e.step(Action::Discrete(i % 2), &mut next);
        agent.observe(&Transition {
            episode: 0,
            step: 0,
            obs: &obs,
            action: &a,
            reward: s.reward as f32,
            next_obs: &next,
            terminated: s.terminated,
            logp: None,
        });
        if s.done() {
            e.reset(None, &mut obs);
        } else {
            obs.copy_from_slice(&next);
        }
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// One stall case: ingest for `secs`, a checkpoint each `every` (if any).
fn stall_case(
    case: &str,
    replay: bool,
    transitions: usize,
    every: Option<Duration>,
    secs: f64,
) -> anyhow::Result<StallRow> {
    let dir = tempfile::tempdir()?;
    let mut cfg = config(transitions.max(50_000), dir.path())?;
    cfg.checkpoint.replay = replay;
    let spec = env::spec("CartPole-v1")?;
    let mut agent = Dqn::new(&cfg.dqn, &spec, None, 0, Device::Cpu);
    fill(&mut agent, transitions);
    let (mut book, mut desk) = Desk::open(&cfg, &RunOptions::default(), &mut agent)?;
    let batch: Vec<(Vec<f32>, f32)> = (0..64).map(|i| (vec![0.01 * i as f32; 4], 1.0)).collect();
    let (mut lat, mut snaps) = (Vec::new(), Vec::new());
    let start = Instant::now();
    let mut last = Instant::now();
    let mut steps = transitions as u64;
    while start.elapsed().as_secs_f64() < secs {
        let t = Instant::now();
        for (obs, r) in &batch {
            agent.observe(&Transition {
                episode: 1,
                step: 0,
                obs,
                action: &[0.0],
                reward: *r,
                next_obs: obs,
                terminated: false,
                logp: None,
            });
        }
        steps += 64;
        agent.train(steps);
        if every.is_some_and(|e| last.elapsed() >= e) {
            last = Instant::now();
            book.counters.env_steps = steps;
            let snapshot = Instant::now();
            book.checkpoint(&agent, None, false);
            snaps.push(snapshot.elapsed().as_secs_f64() * 1e3);
            desk.perform(&mut book)?;
        }
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    book.checkpoint(&agent, None, true);
    desk.perform(&mut book)?;
    let bytes = std::fs::metadata(dir.path().join("checkpoint.safetensors"))?.len();
    let mut sorted = lat;
    sorted.sort_by(f64::total_cmp);
    let mean = |v: &[f64]| v.iter().fold(0.0, |a, b| a + b) / v.len().max(1) as f64;
    Ok(StallRow {
        case: case.to_string(),
        replay_transitions: if replay { transitions } else { 0 },
        checkpoints: snaps.len(),
        ingest_p50_us: percentile(&sorted, 0.5),
        ingest_p99_us: percentile(&sorted, 0.99),
        ingest_max_us: *sorted.last().unwrap_or(&0.0),
        p50_ratio: 1.0,
        p99_ratio: 1.0,
        snapshot_mean_ms: mean(&snaps),
        snapshot_max_ms: snaps.iter().copied().fold(0.0, f64::max),
        checkpoint_bytes: bytes,
    })
}

pub fn stall(secs: f64) -> anyhow::Result<Vec<StallRow>> {
    tch::set_num_threads(1);
    let every = Some(Duration::from_secs(1));
    let cases = [
        ("no checkpoint", false, 50_000, None),
        ("checkpoint, no replay", false, 50_000, every),
        ("checkpoint, replay 50k", true, 50_000, every),
        ("checkpoint, replay 1M", true, 1_000_000, every),
    ];
    let mut rows: Vec<StallRow> = Vec::new();
    for (case, replay, n, every) in cases {
        let mut row = stall_case(case, replay, n, every, secs)?;
        if let Some(base) = rows.first() {
            row.p50_ratio = row.ingest_p50_us / base.ingest_p50_us;
            row.p99_ratio = row.ingest_p99_us / base.ingest_p99_us;
        }
        println!(
            "{:<24} p50 {:>7.1} us ({:.2}x)  p99 {:>7.1} us ({:.2}x)  max {:>9.1} us  snapshot {:.1} ms mean, {:.1} max ({} checkpoints, {} bytes)",
            row.case,
            row.ingest_p50_us,
            row.p50_ratio,
            row.ingest_p99_us,
            row.p99_ratio,
            row.ingest_max_us,
            row.snapshot_mean_ms,
            row.snapshot_max_ms,
            row.checkpoints,
            row.checkpoint_bytes
        );
        rows.push(row);
    }
    Ok(rows)
}

/// A recorded run whose latest checkpoint holds `transitions` of replay
/// (or none), marked active as a killed daemon leaves it; then a daemon
/// started on it, timed.
fn restart_case(replay: bool, transitions: usize) -> anyhow::Result<RestartRow> {
    let dir = tempfile::tempdir()?;
    let mut cfg = config(transitions, &dir.path().join("out"))?;
    cfg.checkpoint.replay = replay;
    cfg.stop.max_env_steps = None;
    cfg.stop.max_episodes = Some(1_000_000_000);
    cfg.stop.max_wall_secs = Some(3600.0);
    cfg.stop.target_eval_return = None;
    let spec = env::spec("CartPole-v1")?;
    let mut agent = Dqn::new(&cfg.dqn, &spec, None, 0, Device::Cpu);
    fill(&mut agent, transitions);
    let train_steps = 1_000;
    let mut state = agent.state();
    state.train_steps = train_steps;
    state.version = train_steps;
    agent.load_state(&state)?;
    let record = StateDir::open(&dir.path().join("state"))?.create_run(&cfg)?;
    std::fs::create_dir_all(&cfg.output_dir)?;
    let ck = Checkpoint {
        env: cfg.env.clone(),
        agent: cfg.agent.to_string(),
        counters: rlfleet_checkpoint::RunCounters {
            env_steps: transitions as u64,
            episodes: 0,
            wall_secs: 0.0,
        },
        agent_state: agent.state(),
        best: None,
        books: None,
        replay: if replay { agent.replay_image() } else { None },
    };
    let path = record.checkpoint_path(transitions as u64);
    ck.save(&path)?;
    let bytes = std::fs::metadata(&path)?.len();
    drop(agent);
    let id = record.id.clone();
    let t0 = Instant::now();
    let server = Server::start_in(dir)?;
    let listening = t0.elapsed().as_secs_f64();
    let actor = std::env::current_exe()?.with_file_name("actor-client");
    let mut child = Command::new(&actor)
        .args([
            "--server",
            &server.actors.to_string(),
            "--pin",
            &server.fingerprint,
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let (mut resumed, mut first) = (None, None);
    while first.is_none() {
        anyhow::ensure!(t0.elapsed() < Duration::from_secs(300), "no gradient step");
        let v = server.json(&format!("/v1/runs/{id}"))?;
        anyhow::ensure!(
            v["state"] != "failed"
                && (v["error"].is_null() || t0.elapsed() < Duration::from_secs(10)),
            "the run did not resume: {v}"
        );
        if resumed.is_none() && !v["resumed_from"].is_null() {
            resumed = Some(t0.elapsed().as_secs_f64());
        }
        if v["train_steps"].as_u64().unwrap_or(0) > train_steps {
            first = Some(t0.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(RestartRow {
        replay_in_checkpoint: replay,
        replay_transitions: transitions,
        checkpoint_bytes: bytes,
        secs_to_listening: listening,
        secs_to_resumed: resumed.unwrap_or(f64::NAN),
        secs_to_first_gradient_step: first.unwrap_or(f64::NAN),
    })
}

pub fn restart(transitions: usize) -> anyhow::Result<Vec<RestartRow>> {
    let mut rows = Vec::new();
    for replay in [false, true] {
        let r = restart_case(replay, transitions)?;
        println!(
            "restart, replay {} in the checkpoint ({} bytes): listening {:.2} s, resumed {:.2} s, first gradient step {:.2} s",
            if replay { "of 1M" } else { "not" },
            r.checkpoint_bytes,
            r.secs_to_listening,
            r.secs_to_resumed,
            r.secs_to_first_gradient_step
        );
        rows.push(r);
    }
    if let [base, with] = &rows[..] {
        println!(
            "first gradient step after a restart: {:.2}x the time without the replay",
            with.secs_to_first_gradient_step / base.secs_to_first_gradient_step
        );
    }
    Ok(rows)
}

/// `rlfleet-bench checkpoint`: ingest and inference latency during
/// checkpoints, and the restart time, in one JSON file.
pub fn command(
    secs: f64,
    restart_transitions: usize,
    inference_actors: usize,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    #[derive(Serialize)]
    struct Durability {
        stall: Vec<StallRow>,
        inference: Vec<crate::inference_stall::InferenceRow>,
        restart: Vec<RestartRow>,
    }
    let stall = stall(secs)?;
    let inference = crate::measure::runtime()?
        .block_on(crate::inference_stall::bench(inference_actors, secs))?;
    let restart = restart(restart_transitions)?;
    crate::measure::write_json(
        out,
        "checkpoint",
        &Durability {
            stall,
            inference,
            restart,
        },
    )
}
