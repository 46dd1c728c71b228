//! `fleet`: many runs on one daemon (`learner-server serve`), fed by one
//! fleet of `actor-client` processes over QUIC. In one invocation:
//! - 1, 2 and 4 concurrent runs of the same CartPole DQN `async` config:
//!   aggregate env steps/s against one run's (on 2 cores this is the
//!   sharing's overhead, not a speed-up);
//! - the time from a run's end to all its actors acting for the other run,
//!   against the time a fresh actor process takes to connect and join;
//! - the daemon's RSS per idle queued run, against its RSS with one run;
//! - N short runs through one daemon: RSS and `/metrics` size at the
//!   100th and the Nth;
//! - two learner-bound runs of weights 1 and 3 sharing the device, free
//!   and in weighted turns ([`crate::fleet_turns`]).

use crate::endless::{endless, endless_of};
use crate::soak::Server;
use rlfleet_shared::config::{RunConfig, TransportKind};
use serde::Serialize;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Serialize)]
pub struct ShareRow {
    pub runs: usize,
    pub env_steps_per_sec: f64,
    /// Aggregate env steps/s against one run's.
    pub ratio_vs_one_run: f64,
    /// Each run's env steps/s.
    pub per_run: Vec<f64>,
}

#[derive(Debug, Serialize)]
pub struct FleetReport {
    pub actors: usize,
    pub envs_per_actor: u32,
    pub secs: f64,
    pub shares: Vec<ShareRow>,
    /// From a run's end to all its actors serving the other run.
    pub handoff_ms: f64,
    /// From starting an actor process to it serving a run.
    pub fresh_join_ms: f64,
    pub handoff_vs_fresh_join: f64,
    pub rss_one_run_kib: u64,
    pub rss_per_queued_run_kib: f64,
    pub queued_runs: usize,
    pub short_runs: usize,
    pub rss_at_100_kib: u64,
    pub rss_at_end_kib: u64,
    pub metrics_bytes_at_100: usize,
    pub metrics_bytes_at_end: usize,
    pub device_turns: Vec<crate::fleet_turns::TurnsRow>,
}

fn actor(s: &Server, id: &str, envs: u32) -> anyhow::Result<Child> {
    spawn_actor(s.actors, &s.fingerprint, id, envs)
}

/// An `actor-client` process of `envs` envs reaching `addr` (a learner,
/// or a relay in front of one), trusting the certificate `pin`.
pub(crate) fn spawn_actor(
    addr: std::net::SocketAddr,
    pin: &str,
    id: &str,
    envs: u32,
) -> anyhow::Result<Child> {
    let exe = std::env::current_exe()?.with_file_name("actor-client");
    Ok(Command::new(&exe)
        .args(["--server", &addr.to_string(), "--pin", pin])
        .args(["--envs", &envs.to_string(), "--actor-id", id])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?)
}

fn kill_all(actors: &mut Vec<Child>) {
    for a in actors.iter_mut() {
        let _ = a.kill();
        let _ = a.wait();
    }
    actors.clear();
}

fn env_steps(s: &Server, ids: &[String]) -> anyhow::Result<Vec<u64>> {
    ids.iter()
        .map(|id| {
            Ok(s.json(&format!("/v1/runs/{id}"))?["env_steps"]
                .as_u64()
                .unwrap_or(0))
        })
        .collect()
}

fn stop(s: &Server, id: &str) -> anyhow::Result<()> {
    s.post(&format!("/v1/runs/{id}/stop"))?;
    Ok(())
}

fn wait_state(s: &Server, id: &str, want: &str) -> anyhow::Result<()> {
    let t0 = Instant::now();
    while s.json(&format!("/v1/runs/{id}"))?["state"] != want {
        anyhow::ensure!(t0.elapsed() < Duration::from_secs(120), "{id} never {want}");
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// Actors serving run `id` now.
fn serving(s: &Server, id: &str) -> anyhow::Result<usize> {
    let actors = s.json("/v1/actors")?;
    Ok(actors.as_array().map_or(0, |a| {
        a.iter().filter(|x| x["run"].as_str() == Some(id)).count()
    }))
}

/// What the concurrent runs are: `levels` runs at a time of `config`,
/// sharing `actors` actors of `envs` envs, measured for `secs` after
/// `warmup_secs`.
#[derive(Debug, Clone)]
pub struct Shares {
    pub config: Option<std::path::PathBuf>,
    pub levels: Vec<usize>,
    pub actors: usize,
    pub envs: u32,
    pub secs: f64,
    pub warmup_secs: f64,
}

fn shares(runs: usize, how: &Shares) -> anyhow::Result<ShareRow> {
    let s = Server::start_with(tempfile::tempdir()?, "[runs]\nmax_active = 8\n")?;
    let ids: Vec<String> = (0..runs)
        .map(|i| {
            let name = format!("share-{runs}-{i}");
            let cfg = match &how.config {
                None => endless(&s, &name)?,
                // A config of the user's plays without evaluations (an
                // Atari evaluation would hold its learner for seconds).
                Some(path) => {
                    let mut cfg = endless_of(path, &s, &name)?;
                    cfg.eval.period_steps = u64::MAX / 4;
                    cfg
                }
            };
            s.start_run(&cfg)
        })
        .collect::<anyhow::Result<_>>()?;
    // Every run active before any actor connects: each actor then goes to
    // the hungriest run at once, rather than to the first run up (a run
    // whose env takes seconds to build, as Pong's, starts late) and being
    // moved later, which waits for its episodes to end.
    for id in &ids {
        wait_state(&s, id, "running")?;
    }
    let mut fleet: Vec<Child> = (0..how.actors)
        .map(|i| actor(&s, &format!("fleet-{i}"), how.envs))
        .collect::<anyhow::Result<_>>()?;
    // Warm up past the replay's learning start.
    std::thread::sleep(Duration::from_secs_f64(how.warmup_secs));
    let before = env_steps(&s, &ids)?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(how.secs));
    let after = env_steps(&s, &ids)?;
    let wall = t0.elapsed().as_secs_f64();
    kill_all(&mut fleet);
    for id in &ids {
        stop(&s, id)?;
    }
    let per_run: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| (a - b) as f64 / wall)
        .collect();
    Ok(ShareRow {
        runs,
        env_steps_per_sec: per_run.iter().sum(),
        ratio_vs_one_run: f64::NAN,
        per_run,
    })
}

/// (handoff, fresh join) in ms.
fn handoff(actors: usize, envs: u32) -> anyhow::Result<(f64, f64)> {
    let s = Server::start_with(tempfile::tempdir()?, "")?;
    let a = s.start_run(&endless(&s, "handoff-a")?)?;
    let t0 = Instant::now();
    let mut fleet = vec![actor(&s, "first", envs)?];
    while serving(&s, &a)? < 1 {
        anyhow::ensure!(t0.elapsed() < Duration::from_secs(60), "no actor joined");
        std::thread::sleep(Duration::from_millis(1));
    }
    let fresh = t0.elapsed().as_secs_f64() * 1e3;
    for i in 1..actors {
        fleet.push(actor(&s, &format!("fleet-{i}"), envs)?);
    }
    let b = s.start_run(&endless(&s, "handoff-b")?)?;
    let t1 = Instant::now();
    while serving(&s, &a)? + serving(&s, &b)? < actors {
        anyhow::ensure!(
            t1.elapsed() < Duration::from_secs(60),
            "the fleet never settled"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_secs(2));
    stop(&s, &a)?;
    wait_state(&s, &a, "finished")?;
    let ended = Instant::now();
    while serving(&s, &b)? < actors {
        anyhow::ensure!(ended.elapsed() < Duration::from_secs(60), "no hand-off");
        std::thread::sleep(Duration::from_millis(1));
    }
    let handoff = ended.elapsed().as_secs_f64() * 1e3;
    kill_all(&mut fleet);
    stop(&s, &b)?;
    Ok((handoff, fresh))
}

/// (RSS with one run, per queued run), in KiB.
fn queued_rss(queued: usize) -> anyhow::Result<(u64, f64)> {
    let s = Server::start_with(tempfile::tempdir()?, "[runs]\nmax_active = 1\n")?;
    let active = s.start_run(&endless(&s, "rss-active")?)?;
    wait_state(&s, &active, "running")?;
    std::thread::sleep(Duration::from_secs(1));
    let base = s.rss_kib();
    for i in 0..queued {
        s.start_run(&endless(&s, &format!("rss-queued-{i}"))?)?;
    }
    std::thread::sleep(Duration::from_secs(1));
    let with = s.rss_kib();
    Ok((base, with.saturating_sub(base) as f64 / queued as f64))
}

/// RSS and `/metrics` bytes at the 100th and the `n`th short run.
fn short_runs(n: usize) -> anyhow::Result<(u64, u64, usize, usize)> {
    let s = Server::start_with(
        tempfile::tempdir()?,
        "[runs]\nmax_active = 4\nmetrics_retention_secs = 0\n",
    )?;
    let mut fleet: Vec<Child> = (0..2)
        .map(|i| actor(&s, &format!("short-{i}"), 1))
        .collect::<anyhow::Result<_>>()?;
    let mut at_100 = (0, 0);
    for i in 1..=n {
        let cfg = counting(&format!("short-{i}"), s.dir());
        let id = s.start_run(&cfg)?;
        wait_state(&s, &id, "finished")?;
        if i == 100 || i == n {
            std::thread::sleep(Duration::from_millis(200));
            let at = (s.rss_kib(), s.metrics_text()?.len());
            if i == 100 {
                at_100 = at;
            }
            if i == n {
                kill_all(&mut fleet);
                return Ok((at_100.0, at.0, at_100.1, at.1));
            }
        }
    }
    anyhow::bail!("no runs")
}

/// A `probe` run of 5 `Counting-v0` episodes over QUIC.
fn counting(name: &str, dir: &std::path::Path) -> RunConfig {
    let text = format!(
        "name = \"{name}\"\nenv = \"Counting-v0\"\nagent = \"probe\"\nworkflow = \"async\"\n\
         transport = \"{}\"\noutput_dir = \"{}\"\n[stop]\nmax_episodes = 5\n\
         [eval]\nperiod_steps = 1000000\nepisodes = 1\n",
        TransportKind::Quic,
        dir.join(name).display()
    );
    RunConfig::from_toml(&text, name).expect("a valid counting config")
}

/// Each level's row, against the first level's aggregate.
fn share_rows(how: &Shares) -> anyhow::Result<Vec<ShareRow>> {
    let mut rows = Vec::new();
    for &runs in &how.levels {
        let mut row = shares(runs, how)?;
        let one = rows
            .first()
            .map_or(row.env_steps_per_sec, |r: &ShareRow| r.env_steps_per_sec);
        row.ratio_vs_one_run = row.env_steps_per_sec / one;
        println!(
            "{runs} concurrent run(s), {} actors x {} envs: {:.0} env steps/s in all \
             ({:.2}x the first level's), per run {:?}",
            how.actors,
            how.envs,
            row.env_steps_per_sec,
            row.ratio_vs_one_run,
            row.per_run.iter().map(|r| r.round()).collect::<Vec<_>>()
        );
        rows.push(row);
    }
    Ok(rows)
}

#[derive(Debug, Serialize)]
pub struct SharesReport {
    pub config: String,
    pub actors: usize,
    pub envs_per_actor: u32,
    pub secs: f64,
    pub warmup_secs: f64,
    pub shares: Vec<ShareRow>,
}

/// Only the concurrent runs: `fleet_shares.json`.
pub fn shares_only(how: &Shares, out: &std::path::Path) -> anyhow::Result<()> {
    let shares = share_rows(how)?;
    let report = SharesReport {
        config: how.config.as_ref().map_or_else(
            || "config/cartpole-dqn-async.toml".to_string(),
            |c| c.display().to_string(),
        ),
        actors: how.actors,
        envs_per_actor: how.envs,
        secs: how.secs,
        warmup_secs: how.warmup_secs,
        shares,
    };
    crate::measure::write_json(out, "fleet_shares", &report)
}

pub fn bench(how: &Shares, short: usize, out: &std::path::Path) -> anyhow::Result<()> {
    let (secs, actors, envs) = (how.secs, how.actors, how.envs);
    let rows = share_rows(how)?;
    let (handoff_ms, fresh_join_ms) = handoff(actors, envs)?;
    println!(
        "hand-off: all {actors} actors serve the other run {handoff_ms:.0} ms after one ends \
         ({:.2}x a fresh actor's connect-and-join, {fresh_join_ms:.0} ms)",
        handoff_ms / fresh_join_ms
    );
    let queued = 20;
    let (rss_one, per_queued) = queued_rss(queued)?;
    println!(
        "RSS: {rss_one} KiB with one run; {per_queued:.0} KiB per idle queued run \
         ({:.4}x, {queued} queued)",
        per_queued / rss_one as f64
    );
    let (rss100, rss_end, m100, m_end) = short_runs(short)?;
    println!(
        "{short} short runs: RSS {rss100} KiB at the 100th, {rss_end} KiB at the last ({:.2}x); \
         /metrics {m100} bytes at the 100th, {m_end} at the last ({:.2}x)",
        rss_end as f64 / rss100 as f64,
        m_end as f64 / m100 as f64
    );
    let device_turns = crate::fleet_turns::turns(secs)?;
    let report = FleetReport {
        actors,
        envs_per_actor: envs,
        secs,
        shares: rows,
        handoff_ms,
        fresh_join_ms,
        handoff_vs_fresh_join: handoff_ms / fresh_join_ms,
        rss_one_run_kib: rss_one,
        rss_per_queued_run_kib: per_queued,
        queued_runs: queued,
        short_runs: short,
        rss_at_100_kib: rss100,
        rss_at_end_kib: rss_end,
        metrics_bytes_at_100: m100,
        metrics_bytes_at_end: m_end,
        device_turns,
    };
    crate::measure::write_json(out, "fleet", &report)
}
