//! `mpi-rma` and `rma-check`: the one-sided operations of an MPI window,
//! timed against a two-sided ping-pong, and checked exact under contention.

use super::mpirun;
use rlfleet_shared::mpi::rsmpi::traits::{
    Communicator, CommunicatorCollectives, Destination, Source,
};
use rlfleet_shared::mpi::{self, Geometry, Layout, Role, Window};
use serde::{Deserialize, Serialize};
use std::path::Path;
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
