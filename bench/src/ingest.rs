//! `ingest`: experience ingest over QUIC — transitions per second the
//! learner accepts into replay (validated, deduplicated, pushed, acked)
//! from N actor connections sending `Experience` batches in closed loop,
//! against memcpy of the same bytes on this machine. With `--atari`, the
//! steps carry one uint8 84 x 84 frame each into Pong's frame-stacked DQN
//! (frame chains): frames per second.

use crate::loopback::{quiet_run, start_daemon};
use crate::seed::hello;
use rlfleet_quic::{FramedStream, Liveness, Trust, client_endpoint};
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::wire::{self, Experience, Message, Steps};
use serde::Serialize;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What a step's observation is: its values, and whether they travel as
/// bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Obs {
    dim: usize,
    bytes: bool,
}

/// CartPole's four floats.
pub(crate) const CARTPOLE: Obs = Obs {
    dim: 4,
    bytes: false,
};

/// One Atari frame after `AtariPreprocessing`.
const ATARI: Obs = Obs {
    dim: 84 * 84,
    bytes: true,
};

#[derive(Debug, Serialize)]
pub struct Row {
    pub actors: usize,
    pub transitions_per_batch: usize,
    pub frame_bytes: usize,
    pub learner_transitions_per_sec: f64,
    /// What the learner counted into replay during the measurement.
    pub learner_counted: u64,
    pub memcpy_transitions_per_sec: f64,
    pub ratio_vs_memcpy: f64,
}

pub(crate) fn batch(actor: usize, seq: u64, n: usize, episodes: &[u64], o: Obs) -> Message {
    Message::Experience(Experience {
        actor_id: format!("bench-{actor}"),
        session_id: actor as u64,
        seq,
        policy_version: 0,
        steps: {
            // Runs of 16 steps, one per env, as an actor's batch is laid out.
            let mut s = Steps::default();
            let scale = if o.bytes { 1.0 } else { 0.01 };
            let obs = |i: usize| -> Vec<f32> {
                (0..o.dim).map(|d| ((i + d) % 11) as f32 * scale).collect()
            };
            for i in 0..n {
                if i % 16 == 0 {
                    // Batch `seq` (from 1) goes on each env's episode where
                    // the one before left it, as an actor's would: the
                    // learner gives its agent only the next steps of a play.
                    let env = i / 16;
                    let first = (seq.saturating_sub(1) * 16) as u32;
                    let episode = episodes.get(env).or(episodes.last()).copied().unwrap_or(0);
                    s.begin(env as u32, episode, first, &obs(i), o.bytes);
                }
                s.step(&[(i % 2) as f32], 1.0, &obs(i + 1), o.bytes);
            }
            s.into()
        },
        finished: Vec::new(),
        faults: vec![],
        idle_envs: Vec::new(),
        last: false,
    })
}

/// N connections sending batches of `n` transitions for `secs`; returns
/// the transitions acknowledged.
async fn drive(addr: SocketAddr, pin: &str, actors: usize, n: usize, secs: f64, o: Obs) -> u64 {
    let mut tasks = Vec::new();
    for i in 0..actors {
        let pin = pin.to_string();
        tasks.push(tokio::spawn(async move {
            let ep = client_endpoint(&Trust::Pin(pin), Liveness::default()).unwrap();
            let conn = ep.connect(addr, "localhost").unwrap().await.unwrap();
            let (send, recv) = conn.open_bi().await.unwrap();
            let mut fs = FramedStream::new(send, recv, 1 << 24);
            fs.send(&hello(i)).await.unwrap();
            let Ok(Some(Message::Welcome(w))) = fs.recv().await else {
                panic!("no welcome");
            };
            let episodes: Vec<u64> = w.starts.iter().map(|s| s.episode).collect();
            let start = Instant::now();
            let (mut seq, mut acked) = (0, 0u64);
            while start.elapsed().as_secs_f64() < secs {
                seq += 1;
                fs.send(&batch(i, seq, n, &episodes, o)).await.unwrap();
                match fs.recv().await {
                    Ok(Some(Message::Ack(a))) if !a.duplicate => acked += n as u64,
                    other => panic!("expected an ack, got {other:?}"),
                }
            }
            let _ = fs.send.finish();
            conn.close(0u32.into(), b"");
            acked
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total
}

/// Transitions per second that memcpy moves, at `frame` bytes per batch of
/// `n` transitions.
fn memcpy_rate(frame: usize, n: usize, secs: f64) -> f64 {
    let src = vec![7u8; frame];
    let mut dst = vec![0u8; frame];
    let start = Instant::now();
    let mut copies = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..64 {
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&mut dst);
        }
        copies += 64;
    }
    (copies * n as u64) as f64 / start.elapsed().as_secs_f64()
}

pub async fn bench(
    base: RunConfig,
    counts: &[usize],
    per_batch: usize,
    secs: f64,
    o: Obs,
) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir()?;
    let frame = wire::encode(&batch(0, 1, per_batch, &[0; 8], o)).len();
    let mut rows = Vec::new();
    for &actors in counts {
        // An `async` run that ingests and never trains, evaluates or
        // checkpoints before the end.
        let mut cfg = quiet_run(&base, dir.path(), &format!("run-{actors}"));
        cfg.stop.max_episodes = Some(u64::MAX / 2);
        // A replay that fits: a million CartPole slots, or 50,000 frames.
        cfg.dqn.buffer_size = if o.bytes { 50_000 } else { 1 << 20 };
        let (d, shutdown) = start_daemon(dir.path()).await?;
        let name = cfg.name.clone();
        let id = d.hub.start_run(cfg, Default::default())?;
        let run = d.hub.metrics().run(&name, &id);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let before = run.transitions_ingested.get();
        let start = Instant::now();
        let acked = drive(d.actors_addr, &d.fingerprint, actors, per_batch, secs, o).await;
        let wall = start.elapsed().as_secs_f64();
        let counted = run.transitions_ingested.get() - before;
        anyhow::ensure!(
            counted == acked,
            "the learner counted {counted} transitions, the actors had {acked} acknowledged"
        );
        d.hub.stop_run(&id);
        shutdown.cancel();
        d.wait().await;
        let learner = acked as f64 / wall;
        let memcpy = memcpy_rate(frame, per_batch, secs.min(1.0));
        let row = Row {
            actors,
            transitions_per_batch: per_batch,
            frame_bytes: frame,
            learner_transitions_per_sec: learner,
            learner_counted: counted,
            memcpy_transitions_per_sec: memcpy,
            ratio_vs_memcpy: learner / memcpy,
        };
        println!(
            "ingest {actors:>2} actors, {per_batch} transitions ({frame} bytes) per batch: learner {:>9.0} transitions/s = {:.4}x memcpy {:>12.0} transitions/s",
            row.learner_transitions_per_sec, row.ratio_vs_memcpy, row.memcpy_transitions_per_sec,
        );
        rows.push(row);
    }
    Ok(rows)
}

/// `rlfleet-bench ingest`: the shipped `async` config's learner for each
/// connection count.
pub fn command(
    secs: f64,
    actors: &[usize],
    transitions: usize,
    atari: bool,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    let rt = crate::measure::runtime()?;
    let (config, obs, name) = if atari {
        ("config/pong-dqn-async.toml", ATARI, "ingest_atari")
    } else {
        ("config/cartpole-dqn-async.toml", CARTPOLE, "ingest")
    };
    let cfg = RunConfig::load(&crate::workflows::shipped(config))?;
    let rows = rt.block_on(bench(cfg, actors, transitions, secs, obs))?;
    crate::measure::write_json(out, name, &rows)
}
