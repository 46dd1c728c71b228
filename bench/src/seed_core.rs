//! `rlfleet-bench seed-core`: `seed` central-inference throughput over
//! QUIC (N actor connections × 8 CartPole envs, closed loop) with an LSTM
//! core in the policy against the same network without it, in the same
//! run: PPO's `seed-a2c` config (4→64→64→2), and the same with `[model]
//! core = "lstm"` before the output layer, where the front gathers, steps
//! and writes back every env's state for each batch. Training is held off
//! (`ppo.n_steps` at its maximum), so the figure is inference and
//! transport. Each round starts a fresh daemon per variant; medians of the
//! rounds are reported, with the ratio core / plain.

use crate::loopback::{quiet_run, start_daemon};
use crate::seed::{Figure, Mode, drive, median};
use rlfleet_shared::config::{CoreKind, RunConfig};
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Serialize)]
pub struct Row {
    pub actors: usize,
    pub core_size: u32,
    pub plain: Figure,
    pub core: Figure,
    /// Env steps/s with the core over without (< 1: the core costs).
    pub ratio_core_vs_plain: f64,
    pub round_ratios: Vec<f64>,
}

async fn measure(
    cfg: RunConfig,
    dir: &std::path::Path,
    actors: usize,
    secs: f64,
) -> anyhow::Result<Figure> {
    let (d, shutdown) = start_daemon(dir).await?;
    let id = d.hub.start_run(cfg, Default::default())?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let fig = drive(d.actors_addr, &d.fingerprint, actors, secs, Mode::Learner).await;
    d.hub.stop_run(&id);
    shutdown.cancel();
    d.wait().await;
    Ok(fig)
}

pub fn command(
    secs: f64,
    actors: &[usize],
    rounds: usize,
    core_size: u32,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    let rt = crate::measure::runtime()?;
    let base = RunConfig::load(std::path::Path::new("config/cartpole-ppo-seed-a2c.toml"))?;
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();
    for &n in actors {
        let (mut plain, mut core) = (Vec::new(), Vec::new());
        for r in 0..rounds.max(1) {
            let mut cfg = quiet_run(&base, dir.path(), &format!("plain-{n}-{r}"));
            cfg.ppo.n_steps = 1_000_000;
            cfg.distributed.max_envs_per_actor = 8;
            plain.push(rt.block_on(measure(cfg.clone(), dir.path(), n, secs))?);
            cfg.output_dir = dir.path().join(format!("core-{n}-{r}"));
            cfg.model.core = CoreKind::Lstm;
            cfg.model.core_size = core_size;
            core.push(rt.block_on(measure(cfg, dir.path(), n, secs))?);
        }
        let round_ratios: Vec<f64> = core
            .iter()
            .zip(&plain)
            .map(|(c, p)| c.env_steps_per_sec / p.env_steps_per_sec)
            .collect();
        let (plain, core) = (median(plain), median(core));
        let row = Row {
            actors: n,
            core_size,
            ratio_core_vs_plain: core.env_steps_per_sec / plain.env_steps_per_sec,
            round_ratios,
            plain,
            core,
        };
        println!(
            "seed-a2c {n:>2} actors x 8 envs: LSTM {core_size} {:>8.0} env steps/s (p50 {:>5.0} µs) = {:.2}x without it {:>8.0} (p50 {:>5.0} µs); rounds {:?}",
            row.core.env_steps_per_sec,
            row.core.p50_us,
            row.ratio_core_vs_plain,
            row.plain.env_steps_per_sec,
            row.plain.p50_us,
            row.round_ratios
                .iter()
                .map(|r| (r * 100.0).round() / 100.0)
                .collect::<Vec<_>>()
        );
        rows.push(row);
    }
    crate::measure::write_json(out, "seed_core", &rows)
}
