//! `lossy`: experience workflows over a bad link. Actors reach a
//! `learner-server serve` daemon through [`relay::Relay`], a user-space
//! UDP relay on loopback, and a `probe` run of `Counting-v0` plays for a
//! fixed time. In one invocation, per workflow: the episode rate at the
//! link's delay without loss (the baseline), and at the same delay with
//! datagrams lost each way and a blackout in the middle of the window;
//! the figure is the lossy rate against the clean one.

pub mod relay;

use crate::fleet::spawn_actor;
use crate::soak::Server;
use relay::{Link, Relay};
use rlfleet_shared::config::{RunConfig, TransportKind};
use serde::Serialize;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The bad link's shape.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Shape {
    pub loss: f64,
    pub delay_ms: u64,
    pub blackout_secs: f64,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub workflow: String,
    /// `clean` (delay only) or `lossy`.
    pub link: String,
    pub loss: f64,
    pub delay_ms: u64,
    pub blackout_secs: f64,
    pub secs: f64,
    pub episodes: u64,
    pub episodes_per_sec: f64,
    pub env_steps_per_sec: f64,
    pub episodes_reissued: u64,
    pub batches_dropped: u64,
    pub datagrams_passed: u64,
    pub datagrams_dropped: u64,
    /// Bytes through the relay per episode, both ways.
    pub bytes_per_episode: f64,
    /// Episodes/s against the same workflow's on the clean link.
    pub ratio_vs_clean: f64,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub actors: usize,
    pub envs_per_actor: u32,
    pub shape: Shape,
    pub rows: Vec<Row>,
}

/// A `probe` run of `Counting-v0` under `workflow` over QUIC, playing
/// until stopped.
fn counting(workflow: &str, dir: &std::path::Path) -> RunConfig {
    let name = format!("lossy-{workflow}");
    let text = format!(
        "name = \"{name}\"\nenv = \"Counting-v0\"\nagent = \"probe\"\nworkflow = \"{workflow}\"\n\
         transport = \"{}\"\noutput_dir = \"{}\"\n[stop]\nmax_episodes = 1000000000\n\
         max_wall_secs = 3600.0\n[eval]\nperiod_steps = 1000000000\nepisodes = 1\n\
         [checkpoint]\nperiod_steps = 0\n",
        TransportKind::Quic,
        dir.join(&name).display()
    );
    RunConfig::from_toml(&text, &name).expect("a valid counting config")
}

fn counter(status: &serde_json::Value, key: &str) -> anyhow::Result<u64> {
    status[key]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("the run's status has no `{key}`: {status}"))
}

/// One workflow on one link for `secs` after its first episode.
fn measure(
    rt: &tokio::runtime::Runtime,
    workflow: &str,
    link: Link,
    blackout_secs: f64,
    (actors, envs): (usize, u32),
    secs: f64,
) -> anyhow::Result<Row> {
    let s = Server::start_in(tempfile::tempdir()?)?;
    let relay = rt.block_on(Relay::start(s.actors, link, 7))?;
    let id = s.start_run(&counting(workflow, s.dir()))?;
    let mut children = (0..actors)
        .map(|i| spawn_actor(relay.addr, &s.fingerprint, &format!("lossy-{i}"), envs))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let result = (|| {
        let path = format!("/v1/runs/{id}");
        let t = Instant::now();
        let first = loop {
            let st = s.json(&path)?;
            let n = counter(&st, "episodes_finished")?;
            if n > 0 {
                break st;
            }
            anyhow::ensure!(
                t.elapsed() < Duration::from_secs(120),
                "no episode finished in 120 s over {workflow}: {st}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let t0 = Instant::now();
        if blackout_secs > 0.0 {
            relay.black_out(t0 + Duration::from_secs_f64(secs / 4.0), blackout_secs);
        }
        let (passed0, dropped0, bytes0) = (
            relay.counts.passed.load(Ordering::Relaxed),
            relay.counts.dropped.load(Ordering::Relaxed),
            relay.counts.bytes.load(Ordering::Relaxed),
        );
        std::thread::sleep(Duration::from_secs_f64(secs));
        let last = s.json(&path)?;
        let wall = t0.elapsed().as_secs_f64();
        let delta = |k: &str| -> anyhow::Result<u64> {
            Ok(counter(&last, k)?.saturating_sub(counter(&first, k)?))
        };
        let episodes = delta("episodes_finished")?;
        let dropped: u64 = last["batches"]["dropped"]
            .as_object()
            .map_or(0, |m| m.values().filter_map(|v| v.as_u64()).sum());
        Ok(Row {
            workflow: workflow.to_string(),
            link: if link.loss > 0.0 || blackout_secs > 0.0 {
                "lossy"
            } else {
                "clean"
            }
            .into(),
            loss: link.loss,
            delay_ms: link.delay_ms,
            blackout_secs,
            secs: wall,
            episodes,
            episodes_per_sec: episodes as f64 / wall,
            env_steps_per_sec: delta("env_steps")? as f64 / wall,
            episodes_reissued: delta("episodes_reissued")?,
            batches_dropped: dropped,
            datagrams_passed: relay.counts.passed.load(Ordering::Relaxed) - passed0,
            datagrams_dropped: relay.counts.dropped.load(Ordering::Relaxed) - dropped0,
            bytes_per_episode: (relay.counts.bytes.load(Ordering::Relaxed) - bytes0) as f64
                / episodes.max(1) as f64,
            ratio_vs_clean: 1.0,
        })
    })();
    let _ = s.post(&format!("/v1/runs/{id}/stop"));
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    result
}

pub fn bench(
    workflows: &[String],
    shape: Shape,
    actors: usize,
    envs: u32,
    secs: f64,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    let rt = crate::measure::runtime()?;
    let mut rows = Vec::new();
    for wf in workflows {
        let clean = Link {
            loss: 0.0,
            delay_ms: shape.delay_ms,
        };
        let lossy = Link {
            loss: shape.loss,
            delay_ms: shape.delay_ms,
        };
        let base = measure(&rt, wf, clean, 0.0, (actors, envs), secs)?;
        println!(
            "{wf}: {} ms each way, no loss: {:.1} episodes/s ({} episodes in {:.1} s)",
            shape.delay_ms, base.episodes_per_sec, base.episodes, base.secs
        );
        let mut bad = measure(&rt, wf, lossy, shape.blackout_secs, (actors, envs), secs)?;
        bad.ratio_vs_clean = bad.episodes_per_sec / base.episodes_per_sec.max(f64::MIN_POSITIVE);
        println!(
            "{wf}: {} ms, {:.0} % lost each way, a {:.0} s blackout: {:.1} episodes/s, \
             {:.2}x the clean link's ({} reissued, {} batches dropped, {} of {} datagrams lost)",
            shape.delay_ms,
            shape.loss * 100.0,
            shape.blackout_secs,
            bad.episodes_per_sec,
            bad.ratio_vs_clean,
            bad.episodes_reissued,
            bad.batches_dropped,
            bad.datagrams_dropped,
            bad.datagrams_dropped + bad.datagrams_passed
        );
        rows.push(base);
        rows.push(bad);
    }
    crate::measure::write_json(
        out,
        "lossy",
        &Report {
            actors,
            envs_per_actor: envs,
            shape,
            rows,
        },
    )
}
