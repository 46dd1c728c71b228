//! MPI benchmarks (feature `mpi`), each under real `mpirun`:
//!
//! - `rma`: the one-sided operations of [`rlfleet_shared::mpi::Window`] —
//!   each a whole passive-target epoch (lock, the operation, flush, unlock)
//!   from rank 1 on rank 0's window — and a mailbox deposit, against an
//!   8-byte two-sided ping-pong measured in the same job.
//! - `transports`: `async` and `rma` with 4 actors over MPI and over QUIC on
//!   this machine, the transport alone (DQN never trains: `learning_starts`
//!   is past the run's end): transitions/s and env steps/s, MPI against QUIC.
//! - `learners`: DQN trained by the multi-learner workflows on 2 learner
//!   ranks against their single-learner counterparts on 1: env steps/s
//!   and gradient steps/s.

use rlfleet_shared::config::{RunConfig, TransportKind, WorkflowKind};
use rlfleet_shared::mpi::rsmpi::traits::{
    Communicator, CommunicatorCollectives, Destination, Source,
};
use rlfleet_shared::mpi::{self, Geometry, Layout, Role, Window};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// One operation's mean latency.
#[derive(Debug, Serialize, Deserialize)]
pub struct RmaRow {
    pub operation: String,
    pub bytes: usize,
    pub micros: f64,
    /// Against the two-sided ping-pong's round trip.
    pub ratio_vs_ping_pong: f64,
}

pub(crate) fn mpirun() -> Command {
    let mut c = Command::new("mpirun");
    c.arg("--oversubscribe")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    c
}

/// Starts `mpirun -n 2 rlfleet-bench rma-ranks` and reads its rows.
pub fn rma(iters: u32, out: &Path) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let o = mpirun()
        .args(["-n", "2"])
        .arg(&exe)
        .args(["rma-ranks", "--iters", &iters.to_string()])
        .output()?;
    anyhow::ensure!(
        o.status.success(),
        "mpirun failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows: Vec<RmaRow> = serde_json::from_slice(&o.stdout)?;
    for r in &rows {
        println!(
            "{:<28} {:>6} B {:>8.2} µs  {:>5.2}× the ping-pong",
            r.operation, r.bytes, r.micros, r.ratio_vs_ping_pong
        );
    }
    crate::measure::write_json(out, "mpi_rma", &rows)
}

/// The two ranks of the `rma` benchmark (run by `mpirun`): rank 0 times
/// the ping-pong and hands its figure to rank 1, which times the window
/// operations on rank 0 and prints every row as JSON.
pub fn rma_ranks(iters: u32) -> anyhow::Result<()> {
    mpi::steer_components();
    let universe = mpi::init().map_err(anyhow::Error::msg)?;
    let world = universe.world();
    let (me, peer) = (world.rank(), 1 - world.rank());
    anyhow::ensure!(world.size() == 2, "run with mpirun -n 2");
    let payload = vec![7u8; 1800];
    // Rank 0's window: the mailbox of the "actor" (rank 1), one slot of
    // 2 kB, then scratch space for the other operations.
    let layout = Layout {
        rank: me,
        ranks: vec![(Role::Learner, 0), (Role::Actor, 1)],
        announced: vec![0, 1],
        groups: Vec::new(),
    };
    let geometry = Geometry::plan(&layout, 1, |_| 2048);
    let scratch = geometry.total_bytes().next_multiple_of(8);
    let window = Window::allocate(&world, if me == 0 { scratch + 2048 } else { 0 });
    let time = |f: &mut dyn FnMut()| {
        for _ in 0..iters / 10 {
            f();
        }
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        t.elapsed().as_secs_f64() * 1e6 / f64::from(iters)
    };
    let p = world.process_at_rank(peer);
    let mut buf = [0u8; 8];
    if me == 0 {
        // Rank 1 echoes 8 bytes; rank 0 times the round trip.
        let base = time(&mut || {
            p.send(&buf[..]);
            p.receive_into(&mut buf[..]);
        });
        p.send(&base);
    } else {
        for _ in 0..iters + iters / 10 {
            p.receive_into(&mut buf[..]);
            p.send(&buf[..]);
        }
        let (base, _) = p.receive::<f64>();
        let mut got = vec![0u8; payload.len()];
        let mb = geometry.mailbox(0, 1).expect("rank 1 has a mailbox");
        let mut frames = Vec::new();
        let mut rows = vec![("ping-pong (two-sided)", 8, base)];
        rows.push((
            "get",
            got.len(),
            time(&mut || window.lock(0, true).get(scratch, &mut got)),
        ));
        rows.push((
            "put",
            payload.len(),
            time(&mut || window.lock(0, true).put(scratch, &payload)),
        ));
        rows.push((
            "accumulate (u64 sum)",
            8,
            time(&mut || window.lock(0, true).accumulate_u64s(scratch, &[1])),
        ));
        rows.push((
            "fetch-and-add (u64)",
            8,
            time(&mut || {
                window.lock(0, true).fetch_add_u64(scratch + 8, 1);
            }),
        ));
        rows.push((
            "compare-and-swap (u64)",
            8,
            time(&mut || {
                window.lock(0, true).compare_and_swap_u64(scratch + 8, 0, 1);
            }),
        ));
        // A deposit and the owner's drain, which frees the slot again.
        rows.push((
            "mailbox deposit + drain",
            payload.len(),
            time(&mut || {
                assert!(mb.deposit(&window, &payload).expect("fits"));
                frames.clear();
                mb.drain(&window.lock(0, true), &mut frames).expect("drain");
            }),
        ));
        let out: Vec<RmaRow> = rows
            .into_iter()
            .map(|(operation, bytes, micros)| RmaRow {
                operation: operation.into(),
                bytes,
                micros,
                ratio_vs_ping_pong: micros / base,
            })
            .collect();
        println!("{}", serde_json::to_string(&out)?);
    }
    world.barrier();
    drop(window);
    Ok(())
}

/// One (workflow, transport) run of the transport benchmark.
#[derive(Debug, Serialize)]
pub struct TransportRow {
    pub workflow: String,
    pub transport: String,
    pub env_steps: u64,
    pub transitions_received: u64,
    pub wall_secs: f64,
    pub env_steps_per_sec: f64,
    pub transitions_per_sec: f64,
    /// env steps/s against QUIC's for the same workflow.
    pub ratio_vs_quic: f64,
}

fn transport_config(workflow: &str, steps: u64, dir: &Path) -> anyhow::Result<RunConfig> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cfg = RunConfig::load(&root.join(format!("config/cartpole-dqn-{workflow}.toml")))?;
    cfg.stop = Default::default();
    cfg.stop.max_env_steps = Some(steps);
    cfg.stop.max_episodes = Some(1_000_000);
    cfg.eval.period_steps = u64::MAX / 2;
    cfg.checkpoint.period_steps = 0;
    cfg.dqn.learning_starts = steps * 10;
    cfg.output_dir = dir.join(workflow);
    Ok(cfg)
}

fn transport_run(cfg: &RunConfig, dir: &Path, actors: usize) -> anyhow::Result<TransportRow> {
    let path = dir.join(format!("{}-{}.toml", cfg.workflow, cfg.transport));
    std::fs::write(&path, cfg.to_resolved_toml())?;
    let bin = std::env::current_exe()?.with_file_name("learner-server");
    let learners = if cfg.workflow.is_multi_learner() {
        2
    } else {
        1
    };
    let out = if cfg.transport == TransportKind::Mpi {
        mpirun()
            .args(["-n", &learners.to_string()])
            .arg(&bin)
            .arg("mpi")
            .arg(&path)
            .args([":", "-n", &actors.to_string()])
            .arg(bin.with_file_name("actor-client"))
            .arg("mpi")
            .env("RUST_LOG", "warn")
            .output()?
    } else {
        Command::new(&bin)
            .args([
                "run",
                "--no-progress",
                "--local-actors",
                &actors.to_string(),
            ])
            .arg(&path)
            .env("RUST_LOG", "warn")
            .output()?
    };
    let s = crate::workflows::finished_summary(
        &out,
        &format!("{} over {}", cfg.workflow, cfg.transport),
        &cfg.output_dir,
    )?;
    let wall = s["wall_secs"].as_float().unwrap_or(0.0);
    let env_steps = s["env_steps"].as_integer().unwrap_or(0) as u64;
    let prom = std::fs::read_to_string(cfg.output_dir.join("metrics.prom"))?;
    let transitions = prom
        .lines()
        .find_map(|l| {
            l.strip_prefix("rlfleet_transitions_ingested_total ")?
                .parse()
                .ok()
        })
        .unwrap_or(0.0) as u64;
    Ok(TransportRow {
        workflow: cfg.workflow.to_string(),
        transport: cfg.transport.to_string(),
        env_steps,
        transitions_received: transitions,
        wall_secs: wall,
        env_steps_per_sec: env_steps as f64 / wall,
        transitions_per_sec: transitions as f64 / wall,
        ratio_vs_quic: 0.0,
    })
}

/// `async` and `rma`, each over QUIC then MPI, with `actors` actors.
pub fn transports(steps: u64, actors: usize, out: &Path) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();
    for workflow in ["async", "rma"] {
        let mut quic = 0.0;
        for transport in [TransportKind::Quic, TransportKind::Mpi] {
            let mut cfg = transport_config(workflow, steps, dir.path())?;
            cfg.transport = transport;
            cfg.output_dir = dir.path().join(format!("{workflow}-{transport}"));
            let mut row = transport_run(&cfg, dir.path(), actors)?;
            if transport == TransportKind::Quic {
                quic = row.env_steps_per_sec;
            }
            row.ratio_vs_quic = row.env_steps_per_sec / quic;
            println!(
                "{:<6} over {:<4}: {:>7} env steps in {:>5.1} s: {:>7.0} env steps/s, {:>7.0} transitions/s received, {:.2}× QUIC",
                row.workflow,
                row.transport,
                row.env_steps,
                row.wall_secs,
                row.env_steps_per_sec,
                row.transitions_per_sec,
                row.ratio_vs_quic
            );
            rows.push(row);
        }
    }
    crate::measure::write_json(out, "mpi_transports", &rows)
}

/// One run of the learners benchmark.
#[derive(Debug, Serialize)]
pub struct LearnersRow {
    pub workflow: String,
    pub learner_ranks: u32,
    pub env_steps: u64,
    pub train_steps: u64,
    pub wall_secs: f64,
    pub env_steps_per_sec: f64,
    pub train_steps_per_sec: f64,
    /// Gradient steps/s against the single-learner workflow of its family
    /// (`async` for `ml-async`, `rma` for the `ml-rma` family).
    pub train_ratio_vs_single: f64,
}

/// DQN trained over MPI (learning from the config's `learning_starts`, no
/// evaluations) for `steps` env steps: `async` then `ml-async`, `rma` then
/// `ml-rma` (`bin`) and `ml-rma-queue`, each with `actors` actor ranks.
pub fn learners(steps: u64, actors: usize, out: &Path) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
    let runs = [
        ("async", WorkflowKind::Async),
        ("ml-async", WorkflowKind::MlAsync),
        ("rma", WorkflowKind::Rma),
        ("ml-rma", WorkflowKind::MlRma),
        ("ml-rma", WorkflowKind::MlRmaQueue),
    ];
    let mut rows = Vec::new();
    let (mut base, mut single) = (0.0, String::new());
    for (file, workflow) in runs {
        let mut cfg = transport_config(file, steps, dir.path())?;
        // It trains, from the shipped config's `learning_starts`.
        let shipped = RunConfig::load(&root.join(format!("cartpole-dqn-{file}.toml")))?;
        cfg.dqn.learning_starts = shipped.dqn.learning_starts;
        cfg.workflow = workflow;
        cfg.transport = TransportKind::Mpi;
        cfg.output_dir = dir.path().join(workflow.to_string());
        let t = transport_run(&cfg, dir.path(), actors)?;
        let s: toml::Value = toml::from_str(&std::fs::read_to_string(
            cfg.output_dir.join("summary.toml"),
        )?)?;
        let train_steps = s["train_steps"].as_integer().unwrap_or(0) as u64;
        let per_sec = train_steps as f64 / t.wall_secs;
        if !workflow.is_multi_learner() {
            (base, single) = (per_sec, workflow.to_string());
        }
        let row = LearnersRow {
            workflow: t.workflow,
            learner_ranks: if workflow.is_multi_learner() { 2 } else { 1 },
            env_steps: t.env_steps,
            train_steps,
            wall_secs: t.wall_secs,
            env_steps_per_sec: t.env_steps_per_sec,
            train_steps_per_sec: per_sec,
            train_ratio_vs_single: per_sec / base,
        };
        println!(
            "{:<13} on {} learner rank(s): {:>6} env steps, {:>6} gradient steps in {:>5.1} s: \
             {:>6.0} env steps/s, {:>6.0} gradient steps/s, {:.2}× {single}",
            row.workflow,
            row.learner_ranks,
            row.env_steps,
            row.train_steps,
            row.wall_secs,
            row.env_steps_per_sec,
            row.train_steps_per_sec,
            row.train_ratio_vs_single
        );
        rows.push(row);
    }
    crate::measure::write_json(out, "mpi_learners", &rows)
}

/// The ranks of `rma-check` (under `mpirun -n P`, P >= 2): every rank but
/// 0 adds to shared counters on rank 0's window — `ops` fetch-and-adds of
/// 1, `ops` accumulates of 2, `ops` increments by compare-and-swap retry
/// loops — and puts its rank into its own 8-byte slot, all at once; rank 0
/// then checks every count is exact and every slot holds its writer's
/// rank, and prints `rma check ok: ...` (or fails).
pub fn rma_check(ops: u64) -> anyhow::Result<()> {
    mpi::steer_components();
    let universe = mpi::init().map_err(anyhow::Error::msg)?;
    let world = universe.world();
    let (me, size) = (world.rank(), world.size());
    anyhow::ensure!(size >= 2, "run with mpirun -n 2 or more");
    let slots = 24;
    let window = Window::allocate(
        &world,
        if me == 0 {
            slots + 8 * size as usize
        } else {
            0
        },
    );
    world.barrier();
    if me != 0 {
        for _ in 0..ops {
            window.lock(0, false).fetch_add_u64(0, 1);
            window.lock(0, false).accumulate_u64s(8, &[2]);
            loop {
                let epoch = window.lock(0, false);
                let mut seen = [0u64];
                epoch.get_u64s(16, &mut seen);
                if epoch.compare_and_swap_u64(16, seen[0], seen[0] + 1) == seen[0] {
                    break;
                }
            }
        }
        let at = slots + 8 * me as usize;
        let epoch = window.lock(0, true);
        epoch.put(at, &(me as u64).to_le_bytes());
        let mut back = [0u8; 8];
        epoch.get(at, &mut back);
        anyhow::ensure!(
            u64::from_le_bytes(back) == me as u64,
            "rank {me} read back another value"
        );
    }
    world.barrier();
    if me == 0 {
        let epoch = window.lock(0, true);
        let mut words = vec![0u64; 3 + size as usize];
        epoch.get_u64s(0, &mut words);
        drop(epoch);
        let writers = (size - 1) as u64;
        anyhow::ensure!(
            words[0] == writers * ops,
            "fetch-and-add counted {}",
            words[0]
        );
        anyhow::ensure!(
            words[1] == 2 * writers * ops,
            "accumulate counted {}",
            words[1]
        );
        anyhow::ensure!(
            words[2] == writers * ops,
            "compare-and-swap counted {}",
            words[2]
        );
        for r in 1..size as usize {
            anyhow::ensure!(words[3 + r] == r as u64, "slot {r} holds {}", words[3 + r]);
        }
        println!(
            "rma check ok: {writers} ranks x {ops} fetch-and-adds = {}, accumulates of 2 = {}, \
             compare-and-swap increments = {}",
            words[0], words[1], words[2]
        );
    }
    world.barrier();
    drop(window);
    Ok(())
}
