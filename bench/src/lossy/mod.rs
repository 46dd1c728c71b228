//! `lossy`: experience workflows over a bad link. Actors reach a
//! `learner-server serve` daemon through [`relay::Relay`], a user-space
//! UDP relay on loopback, and a `probe` run of `Counting-v0` plays for a
//! fixed time. In one invocation, per workflow: the episode rate at the
//! link's delay without loss (the baseline), on a milder link (less
//! loss, a shorter delay, no blackout), and at the baseline's delay with
//! datagrams lost each way and a blackout in the middle of the window;
//! the figure is each rate against the clean one. Each run's books are
//! read once it has stopped: every env step in a finished episode, an
//! abandoned one or one cut off, every batch trained or dropped.

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
    /// Episodes finished per batch received (actors on a losing link send
    /// fewer, larger batches).
    pub episodes_per_batch: f64,
    pub batches_dropped: u64,
    pub datagrams_passed: u64,
    pub datagrams_dropped: u64,
    /// Bytes through the relay per episode, both ways.
    pub bytes_per_episode: f64,
    /// Episodes/s against the same workflow's on the clean link.
    pub ratio_vs_clean: f64,
    /// The run's books once stopped: every env step in a finished
    /// episode, an abandoned one or one its stop cut off, every batch
    /// received trained or dropped.
    pub books: Option<Books>,
}

#[derive(Debug, Serialize)]
pub struct Books {
    pub env_steps: u64,
    /// The lengths of `episodes.csv`'s episodes, summed.
    pub episode_lengths: u64,
    pub env_steps_abandoned: u64,
    pub env_steps_cut_off: u64,
    pub batches_received: u64,
    pub batches_trained: u64,
    pub batches_dropped: u64,
    pub exact: bool,
}

/// Waits for the stopped run to finish and reads its books.
fn books(s: &Server, id: &str, output_dir: &std::path::Path) -> anyhow::Result<Books> {
    let path = format!("/v1/runs/{id}");
    let t = Instant::now();
    let end = loop {
        let st = s.json(&path)?;
        if st["state"] == "finished" || st["state"] == "failed" {
            break st;
        }
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(60),
            "the run did not finish within 60 s of its stop: {st}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let episodes = rlfleet_output::read_episodes(&output_dir.join("episodes.csv"))?;
    let b = &end["batches"];
    let env_steps = counter(&end, "env_steps")?;
    let episode_lengths = episodes.iter().map(|e| u64::from(e.length)).sum();
    let env_steps_abandoned = counter(&end, "env_steps_abandoned")?;
    let env_steps_cut_off = counter(&end, "env_steps_in_play")?;
    let batches_received = counter(b, "received")?;
    let batches_trained = counter(b, "trained")?;
    let batches_dropped = dropped_batches(&end);
    Ok(Books {
        exact: episode_lengths + env_steps_abandoned + env_steps_cut_off == env_steps
            && batches_trained + batches_dropped == batches_received,
        env_steps,
        episode_lengths,
        env_steps_abandoned,
        env_steps_cut_off,
        batches_received,
        batches_trained,
        batches_dropped,
    })
}

/// The batches a run's status says were dropped, every reason summed.
fn dropped_batches(status: &serde_json::Value) -> u64 {
    status["batches"]["dropped"]
        .as_object()
        .map_or(0, |m| m.values().filter_map(|v| v.as_u64()).sum())
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
    let cfg = counting(workflow, s.dir());
    let id = s.start_run(&cfg)?;
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
        let dropped = dropped_batches(&last);
        Ok(Row {
            workflow: workflow.to_string(),
            link: if blackout_secs > 0.0 {
                "lossy"
            } else if link.loss > 0.0 {
                "mild"
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
            episodes_per_batch: episodes as f64
                / (counter(&last["batches"], "received")?
                    .saturating_sub(counter(&first["batches"], "received")?))
                .max(1) as f64,
            batches_dropped: dropped,
            datagrams_passed: relay.counts.passed.load(Ordering::Relaxed) - passed0,
            datagrams_dropped: relay.counts.dropped.load(Ordering::Relaxed) - dropped0,
            bytes_per_episode: (relay.counts.bytes.load(Ordering::Relaxed) - bytes0) as f64
                / episodes.max(1) as f64,
            ratio_vs_clean: 1.0,
            books: None,
        })
    })();
    let stopped = s
        .post(&format!("/v1/runs/{id}/stop"))
        .and_then(|()| books(&s, &id, &cfg.output_dir));
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    let mut row = result?;
    row.books = Some(stopped?);
    Ok(row)
}

/// Prints one row of a workflow.
fn print(wf: &str, r: &Row) {
    let books = match &r.books {
        Some(b) if b.exact => "books exact".to_string(),
        b => format!("BOOKS DO NOT CLOSE: {b:?}"),
    };
    println!(
        "{wf}: {} ms each way, {:.0} % lost, a {} s blackout: {:.1} episodes/s, {:.2}x the \
         clean link's ({:.2} episodes a batch, {} reissued, {} batches dropped, {} of {} \
         datagrams lost; {books})",
        r.delay_ms,
        r.loss * 100.0,
        r.blackout_secs,
        r.episodes_per_sec,
        r.ratio_vs_clean,
        r.episodes_per_batch,
        r.episodes_reissued,
        r.batches_dropped,
        r.datagrams_dropped,
        r.datagrams_dropped + r.datagrams_passed
    );
}

/// Per workflow: the clean link (the shape's delay, no loss), the mild
/// link when given, and the shape's lossy link with its blackout; each
/// rate against the clean one.
pub fn bench(
    workflows: &[String],
    shape: Shape,
    mild: Option<Link>,
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
        print(wf, &base);
        let mut others = Vec::new();
        if let Some(mild) = mild {
            others.push(measure(&rt, wf, mild, 0.0, (actors, envs), secs)?);
        }
        others.push(measure(
            &rt,
            wf,
            lossy,
            shape.blackout_secs,
            (actors, envs),
            secs,
        )?);
        rows.push(base);
        let base = rows.last().expect("just pushed").episodes_per_sec;
        for mut r in others {
            r.ratio_vs_clean = r.episodes_per_sec / base.max(f64::MIN_POSITIVE);
            print(wf, &r);
            rows.push(r);
        }
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
