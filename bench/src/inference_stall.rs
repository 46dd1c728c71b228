//! `checkpoint`'s inference case: SEED inference latency while the learner
//! checkpoints. Closed-loop simulator clients (8 envs each) over loopback
//! QUIC against a `seed` run that never trains, with no checkpoint (the
//! baseline), then with a checkpoint every 100,000 env steps holding the
//! replay as it fills (a 50,000-transition ring, and a 1,000,000 one).
//! Reported: request latency p50/p99 per case and as ratios against the
//! baseline, the checkpoints taken and their snapshot times.

use crate::loopback::{quiet_run, start_daemon};
use crate::seed::{self, Mode};
use rlfleet_shared::config::RunConfig;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct InferenceRow {
    pub case: String,
    pub replay_capacity: u32,
    /// Transitions in the replay when the case ended.
    pub replay_at_end: u64,
    pub checkpoints: u64,
    pub snapshot_mean_ms: f64,
    pub env_steps_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p50_ratio: f64,
    pub p99_ratio: f64,
}

pub async fn bench(actors: usize, secs: f64) -> anyhow::Result<Vec<InferenceRow>> {
    let base = RunConfig::load(std::path::Path::new("config/cartpole-dqn-seed.toml"))?;
    let cases = [
        ("no checkpoint", 50_000, false),
        ("50k replay", 50_000, true),
        ("1M replay", 1_000_000, true),
    ];
    let mut rows: Vec<InferenceRow> = Vec::new();
    for (case, capacity, checkpoints) in cases {
        let dir = tempfile::tempdir()?;
        let mut cfg = quiet_run(&base, dir.path(), "run");
        cfg.distributed.max_envs_per_actor = 8;
        cfg.dqn.buffer_size = capacity;
        if checkpoints {
            cfg.checkpoint.period_steps = 100_000;
            cfg.checkpoint.replay = true;
        }
        let (d, shutdown) = start_daemon(dir.path()).await?;
        let name = cfg.name.clone();
        let id = d.hub.start_run(cfg, Default::default())?;
        let fig = seed::drive(d.actors_addr, &d.fingerprint, actors, secs, Mode::Learner).await;
        let run = d.hub.metrics().run(&name, &id);
        let snapshots = &run.checkpoint_snapshot;
        let taken = snapshots.get_sample_count();
        let snapshot_mean_ms = snapshots.get_sample_sum() * 1e3 / taken.max(1) as f64;
        let replay_at_end = run.replay_size.get().max(0) as u64;
        d.hub.stop_run(&id);
        shutdown.cancel();
        d.wait().await;
        let (base50, base99) = rows
            .first()
            .map_or((fig.p50_us, fig.p99_us), |b| (b.p50_us, b.p99_us));
        let row = InferenceRow {
            case: case.to_string(),
            replay_capacity: capacity,
            replay_at_end,
            checkpoints: taken,
            snapshot_mean_ms,
            env_steps_per_sec: fig.env_steps_per_sec,
            p50_us: fig.p50_us,
            p99_us: fig.p99_us,
            p50_ratio: fig.p50_us / base50,
            p99_ratio: fig.p99_us / base99,
        };
        println!(
            "inference during checkpoints, {case:<13}: {:>7.0} env steps/s, p50 {:>5.0} µs ({:.2}x), \
             p99 {:>5.0} µs ({:.2}x); {} checkpoints, snapshot {:.1} ms; replay {}",
            row.env_steps_per_sec,
            row.p50_us,
            row.p50_ratio,
            row.p99_us,
            row.p99_ratio,
            row.checkpoints,
            row.snapshot_mean_ms,
            row.replay_at_end
        );
        rows.push(row);
    }
    Ok(rows)
}
