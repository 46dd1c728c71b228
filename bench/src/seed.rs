//! `seed`: SEED central-inference throughput and round-trip latency over
//! QUIC with N actor connections × 8 envs, for the real learner (DQN
//! forward on every request, no training) against (a) the same transport
//! and framing answering a constant action with no model, and (b) a bare
//! QUIC echo of the same bytes.

use learner_server::daemon;
use learner_server::server_config::ServerConfig;
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::quic::{
    FramedStream, Liveness, ServerIdentity, Trust, client_endpoint, server_endpoint,
};
use rlfleet_shared::wire::{self, Actions, Hello, Message, Observations, flags};
use serde::Serialize;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const ENVS: usize = 8;
const OBS_DIM: usize = 4;

#[derive(Debug, Serialize, Clone, Copy)]
pub struct Figure {
    pub env_steps_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub actors: usize,
    pub learner: Figure,
    pub constant_action: Figure,
    pub echo: Figure,
    pub ratio_vs_constant: f64,
    pub ratio_vs_echo: f64,
}

fn obs_msg(seq: u64, first: bool) -> Message {
    Message::Observations(Observations {
        seq,
        obs: (0..ENVS * OBS_DIM).map(|i| (i % 7) as f32 * 0.01).collect(),
        rewards: vec![1.0; ENVS],
        flags: vec![if first { flags::FRESH } else { 0 }; ENVS],
    })
}

fn hello(i: usize) -> Message {
    Message::Hello(Hello {
        protocol: wire::PROTOCOL_VERSION,
        software: "bench".into(),
        actor_id: format!("bench-{i}"),
        session_id: i as u64,
        token: String::new(),
        env_capacity: ENVS as u32,
    })
}

/// N client tasks in closed loop for `secs`; `echo` sends raw frames and
/// reads the same number of bytes back.
async fn drive(addr: SocketAddr, pin: &str, actors: usize, secs: f64, mode: Mode) -> Figure {
    let mut tasks = Vec::new();
    for i in 0..actors {
        let pin = pin.to_string();
        tasks.push(tokio::spawn(async move {
            let ep = client_endpoint(&Trust::Pin(pin), Liveness::default()).unwrap();
            let conn = ep.connect(addr, "localhost").unwrap().await.unwrap();
            let (send, recv) = conn.open_bi().await.unwrap();
            let mut fs = FramedStream::new(send, recv, 1 << 24);
            let mut lat = Vec::new();
            let frame = wire::encode(&obs_msg(1, false));
            if mode == Mode::Learner {
                fs.send(&hello(i)).await.unwrap();
                let _ = fs.recv().await.unwrap();
                fs.send(&obs_msg(0, true)).await.unwrap();
                let _ = fs.recv().await.unwrap();
            }
            let start = Instant::now();
            let mut buf = vec![0u8; frame.len()];
            let mut seq = 1;
            while start.elapsed().as_secs_f64() < secs {
                let t = Instant::now();
                match mode {
                    Mode::Echo => {
                        fs.send.write_all(&frame).await.unwrap();
                        fs.recv.read_exact(&mut buf).await.unwrap();
                    }
                    _ => {
                        seq += 1;
                        fs.send(&obs_msg(seq, false)).await.unwrap();
                        let _ = fs.recv().await.unwrap();
                    }
                }
                lat.push(t.elapsed().as_secs_f64() * 1e6);
            }
            let _ = fs.send.finish();
            conn.close(0u32.into(), b"");
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_by(f64::total_cmp);
    let q = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    Figure {
        env_steps_per_sec: (all.len() * ENVS) as f64 / secs,
        p50_us: q(0.5),
        p99_us: q(0.99),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Learner,
    Constant,
    Echo,
}

/// The baselines' server: same endpoint settings and framing.
async fn baseline_server(
    identity: &ServerIdentity,
    mode: Mode,
    stop: CancellationToken,
) -> SocketAddr {
    let ep = server_endpoint(([127, 0, 0, 1], 0).into(), identity, Liveness::default()).unwrap();
    let addr = ep.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let incoming = tokio::select! {
                i = ep.accept() => i,
                _ = stop.cancelled() => break,
            };
            let Some(incoming) = incoming else { break };
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                let Ok((send, recv)) = conn.accept_bi().await else {
                    return;
                };
                let mut fs = FramedStream::new(send, recv, 1 << 24);
                if mode == Mode::Echo {
                    let mut buf = vec![0u8; 1 << 16];
                    while let Ok(Some(n)) = fs.recv.read(&mut buf).await {
                        if fs.send.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    return;
                }
                while let Ok(Some(Message::Observations(o))) = fs.recv().await {
                    let reply = Message::Actions(Actions {
                        seq: o.seq,
                        policy_version: 0,
                        actions: vec![0.0; o.flags.len()],
                        starts: Vec::new(),
                    });
                    if fs.send(&reply).await.is_err() {
                        break;
                    }
                }
            });
        }
        ep.close(0u32.into(), b"");
    });
    addr
}

pub async fn bench(
    cfg_path: &std::path::Path,
    counts: &[usize],
    secs: f64,
) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();
    for &n in counts {
        // The learner: a seed run that never trains (inference only).
        let mut cfg = RunConfig::load(cfg_path)?;
        cfg.output_dir = dir.path().join(format!("run-{n}"));
        cfg.stop = Default::default();
        cfg.stop.max_wall_secs = Some(3600.0);
        cfg.dqn.learning_starts = u64::MAX / 2;
        cfg.eval.period_steps = u64::MAX / 2;
        cfg.distributed.max_envs_per_actor = ENVS as u32;
        let mut scfg = ServerConfig::default();
        scfg.actors.listen = ([127, 0, 0, 1], 0).into();
        scfg.actors.tls_dir = dir.path().join("tls");
        scfg.api.listen = ([127, 0, 0, 1], 0).into();
        let shutdown = CancellationToken::new();
        let d = daemon::start(&scfg, shutdown.clone()).await?;
        let id = d.hub.start_run(cfg, Default::default())?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let learner = drive(d.actors_addr, &d.fingerprint, n, secs, Mode::Learner).await;
        d.hub.stop_run(&id);
        let identity = ServerIdentity::load(&d.cert_path, &d.cert_path.with_file_name("key.pem"))?;
        let pin = d.fingerprint.clone();
        shutdown.cancel();
        d.wait().await;
        let stop = CancellationToken::new();
        let a = baseline_server(&identity, Mode::Constant, stop.clone()).await;
        let constant_action = drive(a, &pin, n, secs, Mode::Constant).await;
        let e = baseline_server(&identity, Mode::Echo, stop.clone()).await;
        let echo = drive(e, &pin, n, secs, Mode::Echo).await;
        stop.cancel();
        let row = Row {
            actors: n,
            ratio_vs_constant: learner.env_steps_per_sec / constant_action.env_steps_per_sec,
            ratio_vs_echo: learner.env_steps_per_sec / echo.env_steps_per_sec,
            learner,
            constant_action,
            echo,
        };
        println!(
            "seed {:>2} actors x {ENVS} envs: learner {:>8.0} env steps/s (p50 {:>6.0} µs, p99 {:>6.0} µs) = {:.2}x constant-action {:>8.0} ({:.0}/{:.0} µs), {:.2}x echo {:>8.0} ({:.0}/{:.0} µs)",
            n,
            row.learner.env_steps_per_sec,
            row.learner.p50_us,
            row.learner.p99_us,
            row.ratio_vs_constant,
            row.constant_action.env_steps_per_sec,
            row.constant_action.p50_us,
            row.constant_action.p99_us,
            row.ratio_vs_echo,
            row.echo.env_steps_per_sec,
            row.echo.p50_us,
            row.echo.p99_us,
        );
        rows.push(row);
    }
    Ok(rows)
}
