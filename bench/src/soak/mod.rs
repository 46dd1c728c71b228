//! `soak`: many actor connections against one `learner-server serve`
//! process for a long time, under `seed` (every connection asks for actions
//! for 8 envs in closed loop) and `async` (every connection sends
//! `Experience` batches in closed loop). Reports the daemon's resident
//! memory over time, request latency against the same daemon and run with
//! few connections (the baseline, measured first), and whether anything
//! was lost: every request answered, every acknowledged transition counted
//! by the learner. The load generator is this process (one QUIC endpoint
//! for all connections); connections join in waves, so that the daemon's
//! cap on connections not yet past `Hello` (64) is never hit.

mod server;

pub(crate) use server::Server;

use crate::loopback::quiet_run;
use crate::seed::{hello, obs_msg};
use rlfleet_quic::{FramedStream, Liveness, Trust, client_endpoint};
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::wire::Message;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Transitions per `Experience` batch (16 steps of 8 envs).
const PER_BATCH: usize = 128;
/// Connections that say `Hello` at once.
const WAVE: usize = 32;

#[derive(Debug, Serialize)]
pub struct Phase {
    pub connections: usize,
    pub secs: f64,
    /// Requests answered (`Actions` or `Ack`s) while measuring.
    pub requests: u64,
    pub requests_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

#[derive(Debug, Serialize)]
pub struct RssSample {
    pub secs: f64,
    pub rss_kib: u64,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub workflow: String,
    pub baseline: Phase,
    pub soak: Phase,
    pub p50_ratio_vs_baseline: f64,
    pub p99_ratio_vs_baseline: f64,
    /// The daemon's RSS every few seconds of the soak phase.
    pub rss: Vec<RssSample>,
    pub rss_before_kib: u64,
    pub rss_peak_kib: u64,
    pub rss_end_kib: u64,
    /// Requests sent and answered over both phases (a request is sent and
    /// then awaited; a connection that failed leaves one unanswered).
    pub sent: u64,
    pub answered: u64,
    /// `async`: transitions acknowledged to the connections, and what the
    /// learner counted into replay (`rlfleet_transitions_ingested_total`).
    pub transitions_acked: u64,
    pub transitions_counted: u64,
    pub lost: u64,
    /// Datagrams this machine's UDP sockets dropped for a full receive
    /// buffer during the soak phase (`RcvbufErrors` in `/proc/net/snmp`).
    pub udp_rcvbuf_errors: u64,
}

/// What one connection did.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    sent: u64,
    answered: u64,
    acked_transitions: u64,
}

/// One actor connection: it joins (`Hello`, `Welcome`; `seed`: its first
/// observations), tells `joined`, waits for `go`, then runs in closed loop
/// until `stop`; latencies are kept while `measuring`.
#[allow(clippy::too_many_arguments)]
async fn connection(
    ep: quinn::Endpoint,
    addr: SocketAddr,
    i: usize,
    seed: bool,
    measuring: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    joined: tokio::sync::mpsc::Sender<()>,
    mut go: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Tally> {
    let conn = ep.connect(addr, "localhost")?.await?;
    let (send, recv) = conn.open_bi().await?;
    let mut fs = FramedStream::new(send, recv, 1 << 24);
    fs.send(&hello(i)).await?;
    let Some(Message::Welcome(w)) = fs.recv().await? else {
        anyhow::bail!("connection {i}: no welcome");
    };
    let episodes: Vec<u64> = w.starts.iter().map(|s| s.episode).collect();
    let mut t = Tally::default();
    if seed {
        fs.send(&obs_msg(0, true)).await?;
        t.sent += 1;
        fs.recv().await?;
        t.answered += 1;
    }
    let _ = joined.send(()).await;
    go.wait_for(|g| *g).await?;
    let lost = |e: anyhow::Error| match conn.close_reason() {
        Some(why) => e.context(format!("connection {i} closed: {why}")),
        None => e,
    };
    let mut seq = 0;
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        let started = Instant::now();
        let msg = if seed {
            obs_msg(seq, false)
        } else {
            crate::ingest::batch(i, seq, PER_BATCH, &episodes, crate::ingest::CARTPOLE)
        };
        fs.send(&msg).await.map_err(|e| lost(e.into()))?;
        t.sent += 1;
        match fs.recv().await.map_err(|e| lost(e.into()))? {
            Some(Message::Actions(_)) if seed => {}
            Some(Message::Ack(a)) if !seed && !a.duplicate => {
                t.acked_transitions += PER_BATCH as u64;
            }
            other => anyhow::bail!("connection {i}: unexpected reply {other:?}"),
        }
        t.answered += 1;
        if measuring.load(Ordering::Relaxed) {
            t.latencies_us.push(started.elapsed().as_micros() as u32);
        }
    }
    let _ = fs.send.finish();
    conn.close(0u32.into(), b"");
    Ok(t)
}

/// `n` connections (ids from `first`), joined in waves, then measured for
/// `secs`; `rss` samples the daemon meanwhile when given.
async fn phase(
    server: &Server,
    first: usize,
    n: usize,
    secs: f64,
    seed: bool,
    mut rss: Option<&mut Vec<RssSample>>,
) -> anyhow::Result<(Phase, Tally)> {
    let ep = client_endpoint(&Trust::Pin(server.fingerprint.clone()), Liveness::default())?;
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (go_tx, go) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    let t0 = Instant::now();
    for wave in (0..n).collect::<Vec<_>>().chunks(WAVE) {
        let (tx, mut rx) = tokio::sync::mpsc::channel(WAVE);
        for &i in wave {
            tasks.push(tokio::spawn(connection(
                ep.clone(),
                server.actors,
                first + i,
                seed,
                measuring.clone(),
                stop.clone(),
                tx.clone(),
                go.clone(),
            )));
        }
        drop(tx);
        for _ in wave {
            let joined = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await;
            if !matches!(joined, Ok(Some(()))) {
                stop.store(true, Ordering::Relaxed);
                let mut errors = Vec::new();
                for task in tasks {
                    if task.is_finished()
                        && let Ok(Err(e)) = task.await
                    {
                        errors.push(e.to_string());
                    }
                }
                anyhow::bail!(
                    "a connection of the wave from {} never got its welcome; failed connections: {errors:?}",
                    first + wave[0]
                );
            }
        }
    }
    println!(
        "  {n} connections joined in {:.1} s; all go, measuring for {secs} s after 2 s",
        t0.elapsed().as_secs_f64()
    );
    go_tx.send_replace(true);
    tokio::time::sleep(Duration::from_secs(2)).await;
    measuring.store(true, Ordering::Relaxed);
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < secs {
        if let Some(samples) = rss.as_deref_mut() {
            samples.push(RssSample {
                secs: start.elapsed().as_secs_f64(),
                rss_kib: server.rss_kib(),
            });
        }
        let left = secs - start.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_secs_f64(left.clamp(0.0, 5.0))).await;
    }
    let measured = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut total = Tally::default();
    let mut failed = 0;
    for task in tasks {
        match task.await? {
            Ok(t) => {
                total.latencies_us.extend(t.latencies_us);
                total.sent += t.sent;
                total.answered += t.answered;
                total.acked_transitions += t.acked_transitions;
            }
            Err(e) => {
                failed += 1;
                eprintln!("  {e:#}");
            }
        }
    }
    anyhow::ensure!(failed == 0, "{failed} of {n} connections failed");
    let mut lat = std::mem::take(&mut total.latencies_us);
    lat.sort_unstable();
    let q = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)));
    let phase = Phase {
        connections: n,
        secs: measured,
        requests: lat.len() as u64,
        requests_per_sec: lat.len() as f64 / measured,
        p50_us: q(0.5).copied().unwrap_or(0) as f64,
        p99_us: q(0.99).copied().unwrap_or(0) as f64,
    };
    Ok((phase, total))
}

pub async fn bench(
    base: &RunConfig,
    workflow: &str,
    connections: usize,
    secs: f64,
    base_connections: usize,
    base_secs: f64,
) -> anyhow::Result<Row> {
    // (The run's folder outlives the daemon, which checkpoints into it when
    // it stops.)
    let dir = tempfile::tempdir()?;
    let server = Server::start()?;
    // A run that answers or ingests and never trains, evaluates or
    // checkpoints before its end.
    let mut cfg = quiet_run(base, dir.path(), workflow);
    cfg.stop.max_episodes = Some(u64::MAX / 2);
    cfg.stop.max_wall_secs = Some(secs + base_secs + 3600.0);
    cfg.dqn.buffer_size = 1 << 20;
    cfg.distributed.max_envs_per_actor = 8;
    let id = server.start_run(&cfg)?;
    let seed = workflow == "seed";
    let ingested0 = server.metric("rlfleet_transitions_ingested_total")?;
    println!("soak {workflow}: baseline, {base_connections} connections");
    let (baseline, b) = phase(&server, 0, base_connections, base_secs, seed, None).await?;
    let rss_before_kib = server.rss_kib();
    println!("soak {workflow}: {connections} connections");
    let mut rss = Vec::new();
    let drops0 = udp_rcvbuf_errors();
    let (soak, s) = phase(
        &server,
        base_connections,
        connections,
        secs,
        seed,
        Some(&mut rss),
    )
    .await?;
    let rss_end_kib = server.rss_kib();
    let udp_rcvbuf_errors = udp_rcvbuf_errors().saturating_sub(drops0);
    let counted = (server.metric("rlfleet_transitions_ingested_total")? - ingested0) as u64;
    let _ = server
        .http
        .post(format!("{}/v1/runs/{id}/stop", server.api))
        .send_empty();
    let sent = b.sent + s.sent;
    let answered = b.answered + s.answered;
    let acked = b.acked_transitions + s.acked_transitions;
    let lost = (sent - answered) + if seed { 0 } else { acked.abs_diff(counted) };
    let row = Row {
        workflow: workflow.to_string(),
        p50_ratio_vs_baseline: soak.p50_us / baseline.p50_us.max(1.0),
        p99_ratio_vs_baseline: soak.p99_us / baseline.p99_us.max(1.0),
        rss_peak_kib: rss
            .iter()
            .map(|r| r.rss_kib)
            .max()
            .unwrap_or(0)
            .max(rss_end_kib),
        baseline,
        soak,
        rss,
        rss_before_kib,
        rss_end_kib,
        sent,
        answered,
        transitions_acked: if seed { 0 } else { acked },
        transitions_counted: if seed { 0 } else { counted },
        lost,
        udp_rcvbuf_errors,
    };
    println!(
        "soak {workflow}: {} connections for {:.0} s: {:.0} requests/s, p50 {:.0} us = {:.2}x and p99 {:.0} us = {:.2}x the {} connections' ({:.0} / {:.0} us); daemon RSS {} -> peak {} -> end {} KiB; sent {sent}, answered {answered}, lost {lost}; UDP receive-buffer drops {udp_rcvbuf_errors}",
        row.soak.connections,
        row.soak.secs,
        row.soak.requests_per_sec,
        row.soak.p50_us,
        row.p50_ratio_vs_baseline,
        row.soak.p99_us,
        row.p99_ratio_vs_baseline,
        row.baseline.connections,
        row.baseline.p50_us,
        row.baseline.p99_us,
        row.rss_before_kib,
        row.rss_peak_kib,
        row.rss_end_kib,
    );
    Ok(row)
}

/// This machine's count of UDP datagrams dropped for a full receive buffer.
fn udp_rcvbuf_errors() -> u64 {
    let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// `rlfleet-bench soak`: each workflow's shipped config in turn.
pub fn command(
    workflows: &[String],
    connections: usize,
    secs: f64,
    base_connections: usize,
    base_secs: f64,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    let rt = crate::measure::runtime()?;
    let mut rows = Vec::new();
    for w in workflows {
        let path = format!("config/cartpole-dqn-{w}.toml");
        let cfg = RunConfig::load(std::path::Path::new(&path))?;
        rows.push(rt.block_on(bench(
            &cfg,
            w,
            connections,
            secs,
            base_connections,
            base_secs,
        ))?);
    }
    crate::measure::write_json(out, "soak", &rows)
}
