//! `seed`: SEED central-inference throughput and round-trip latency over
//! QUIC with N actor connections × 8 envs, for the real learner (DQN
//! forward on every request, no training) against (a) the same transport
//! and framing answering a constant action with no model, (b) a bare QUIC
//! stream echo of the same bytes and (c) the same echo as QUIC datagrams
//! (how much a datagram transport could gain over streams).

use crate::loopback::{quiet_run, start_daemon};
use rlfleet_quic::{
    FramedStream, Liveness, ServerIdentity, Trust, client_endpoint, server_endpoint,
};
use rlfleet_shared::config::RunConfig;
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
    /// CPU time of the whole process (clients, server and learner) per
    /// request, and context switches per request.
    pub cpu_us_per_request: f64,
    pub switches_per_request: f64,
}

/// Process CPU seconds (user + system) and context switches so far, from
/// `/proc` (zeros where it cannot be read).
fn process_usage() -> (f64, u64) {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1.to_string();
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0);
    let mut switches = 0;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            for line in status.lines() {
                if let Some(v) = line
                    .strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
                {
                    switches += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    // Linux reports CPU time in clock ticks of 1/100 s.
    (ticks as f64 / 100.0, switches)
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub actors: usize,
    pub learner: Figure,
    pub constant_action: Figure,
    pub echo: Figure,
    /// The same echo over QUIC datagrams (streams vs datagrams).
    pub datagram_echo: Figure,
    pub ratio_vs_constant: f64,
    pub ratio_vs_echo: f64,
    /// Learner / constant-action in each round, in order.
    pub round_ratios_vs_constant: Vec<f64>,
}

pub(crate) fn obs_msg(seq: u64, first: bool) -> Message {
    Message::Observations(Observations {
        seq,
        obs: (0..ENVS * OBS_DIM).map(|i| (i % 7) as f32 * 0.01).collect(),
        obs_u8: vec![],
        rewards: vec![1.0; ENVS],
        flags: vec![if first { flags::FRESH } else { 0 }; ENVS],
        faults: vec![],
    })
}

pub fn hello(i: usize) -> Message {
    Message::Hello(Hello {
        protocol: wire::PROTOCOL_VERSION,
        software: "bench".into(),
        actor_id: format!("bench-{i}"),
        session_id: i as u64,
        token: String::new(),
        env_capacity: ENVS as u32,
        run: String::new(),
        once: false,
    })
}

/// N client tasks in closed loop for `secs`; `echo` sends raw frames and
/// reads the same number of bytes back.
pub(crate) async fn drive(
    addr: SocketAddr,
    pin: &str,
    actors: usize,
    secs: f64,
    mode: Mode,
) -> Figure {
    let mut tasks = Vec::new();
    let usage_before = process_usage();
    for i in 0..actors {
        let pin = pin.to_string();
        tasks.push(tokio::spawn(async move {
            let ep = client_endpoint(&Trust::Pin(pin), Liveness::default()).unwrap();
            let conn = ep.connect(addr, "localhost").unwrap().await.unwrap();
            let frame = wire::encode(&obs_msg(1, false));
            if mode == Mode::Datagram {
                return datagram_loop(&conn, &frame, secs).await;
            }
            let (send, recv) = conn.open_bi().await.unwrap();
            let mut fs = FramedStream::new(send, recv, 1 << 24);
            let mut lat = Vec::new();
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
    let usage = process_usage();
    let requests = all.len().max(1) as f64;
    all.sort_by(f64::total_cmp);
    let q = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    Figure {
        env_steps_per_sec: (all.len() * ENVS) as f64 / secs,
        p50_us: q(0.5),
        p99_us: q(0.99),
        cpu_us_per_request: (usage.0 - usage_before.0) * 1e6 / requests,
        switches_per_request: (usage.1 - usage_before.1) as f64 / requests,
    }
}

/// Closed-loop echo of `frame` as QUIC datagrams; a datagram not echoed
/// within 50 ms counts as lost (and is not timed).
async fn datagram_loop(conn: &quinn::Connection, frame: &[u8], secs: f64) -> Vec<f64> {
    let mut lat = Vec::new();
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < secs {
        let t = Instant::now();
        conn.send_datagram(frame.to_vec().into()).unwrap();
        if let Ok(Ok(_)) =
            tokio::time::timeout(Duration::from_millis(50), conn.read_datagram()).await
        {
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    conn.close(0u32.into(), b"");
    lat
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    Learner,
    Constant,
    Echo,
    /// The echo over unreliable datagrams instead of a stream.
    Datagram,
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
                if mode == Mode::Datagram {
                    while let Ok(d) = conn.read_datagram().await {
                        if conn.send_datagram(d).is_err() {
                            break;
                        }
                    }
                    return;
                }
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

/// The round with the median throughput.
pub(crate) fn median(mut figs: Vec<Figure>) -> Figure {
    figs.sort_by(|a, b| a.env_steps_per_sec.total_cmp(&b.env_steps_per_sec));
    figs[figs.len() / 2]
}

/// Per actor count: `rounds` rounds of learner, constant-action and echo
/// back to back (so that each comparison sees the same machine load; this
/// machine's throughput drifts by tens of percent), then the median round
/// of each.
pub async fn bench(
    base: RunConfig,
    counts: &[usize],
    secs: f64,
    rounds: usize,
) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();
    for &n in counts {
        // The learner: a seed run that never trains (inference only).
        let mut cfg = quiet_run(&base, dir.path(), &format!("run-{n}"));
        cfg.distributed.max_envs_per_actor = ENVS as u32;
        let (d, shutdown) = start_daemon(dir.path()).await?;
        let id = d.hub.start_run(cfg, Default::default())?;
        let identity = ServerIdentity::load(&d.cert_path, &d.cert_path.with_file_name("key.pem"))?;
        let pin = d.fingerprint.clone();
        let stop = CancellationToken::new();
        let a = baseline_server(&identity, Mode::Constant, stop.clone()).await;
        let e = baseline_server(&identity, Mode::Echo, stop.clone()).await;
        let g = baseline_server(&identity, Mode::Datagram, stop.clone()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (mut l, mut c, mut x, mut dg) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds.max(1) {
            l.push(drive(d.actors_addr, &pin, n, secs, Mode::Learner).await);
            c.push(drive(a, &pin, n, secs, Mode::Constant).await);
            x.push(drive(e, &pin, n, secs, Mode::Echo).await);
            dg.push(drive(g, &pin, n, secs, Mode::Datagram).await);
        }
        stop.cancel();
        d.hub.stop_run(&id);
        shutdown.cancel();
        d.wait().await;
        let round_ratios: Vec<f64> = l
            .iter()
            .zip(&c)
            .map(|(l, c)| l.env_steps_per_sec / c.env_steps_per_sec)
            .collect();
        let (learner, constant_action, echo) = (median(l), median(c), median(x));
        let row = Row {
            actors: n,
            ratio_vs_constant: learner.env_steps_per_sec / constant_action.env_steps_per_sec,
            ratio_vs_echo: learner.env_steps_per_sec / echo.env_steps_per_sec,
            round_ratios_vs_constant: round_ratios,
            learner,
            constant_action,
            echo,
            datagram_echo: median(dg),
        };
        let show = |f: &Figure| {
            format!(
                "{:>8.0} env steps/s (p50 {:>5.0} µs, p99 {:>5.0} µs, {:>3.0} CPU µs and {:.1} switches per request)",
                f.env_steps_per_sec,
                f.p50_us,
                f.p99_us,
                f.cpu_us_per_request,
                f.switches_per_request
            )
        };
        let spread = row
            .round_ratios_vs_constant
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(" ");
        println!(
            "seed {n:>2} actors x {ENVS} envs: learner {} = {:.2}x (rounds: {spread}) constant-action {}, {:.2}x echo {}",
            show(&row.learner),
            row.ratio_vs_constant,
            show(&row.constant_action),
            row.ratio_vs_echo,
            show(&row.echo),
        );
        println!(
            "     streams vs datagrams: stream echo {}, datagram echo {}",
            show(&row.echo),
            show(&row.datagram_echo)
        );
        rows.push(row);
    }
    Ok(rows)
}

/// `rlfleet-bench seed`: the shipped `seed` config (its inference batching
/// overridden when asked) for each actor count.
pub fn command(
    secs: f64,
    actors: &[usize],
    rounds: usize,
    max_wait_us: Option<u64>,
    max_batch: Option<u32>,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    let rt = crate::measure::runtime()?;
    let mut cfg = RunConfig::load(std::path::Path::new("config/cartpole-dqn-seed.toml"))?;
    if let Some(w) = max_wait_us {
        cfg.distributed.inference_max_wait_us = w;
    }
    if let Some(b) = max_batch {
        cfg.distributed.inference_max_batch = b;
    }
    let rows = rt.block_on(bench(cfg, actors, secs, rounds))?;
    crate::measure::write_json(out, "seed", &rows)
}
