//! rlfleet's own checks on its source tree, in the manner of
//! rust-analyzer's `tidy` tests: what ARCHITECTURE.md says about the
//! shape of the code is checked, so it stays true.
//!
//! - [`imports`]: a crate's modules and the `crate::`/`super::` paths
//!   each names.
//! - [`layers`]: the declared layer order (ARCHITECTURE.md's `layers`
//!   blocks) and import cycles at every depth.
//! - [`files`]: `//!` doc lines, the per-file line budget, test modules
//!   last, plain-data folders (the wire messages), and no clock in the
//!   workflows, `unsafe` only where it is allowed and with a SAFETY note.
//!
//! - [`manifest`]: `rlfleet-shared` links nothing native but by feature.
//! - [`docs`]: the Markdown stands alone: links, anchors and paths reach
//!   what they name, and every metric is in the manual.
//!
//! [`check_workspace`] runs them all; the `tidy` test and the
//! `rlfleet-tidy` binary call it.

pub mod docs;
pub mod files;
pub mod imports;
pub mod layers;
pub mod manifest;

use std::path::Path;

/// Crates whose modules are layered and whose files keep the line budget.
pub const LAYERED: [&str; 10] = [
    "learner-server",
    "actor-client",
    "shared",
    "checkpoint",
    "crates/kernels",
    "crates/learning",
    "crates/output",
    "crates/quic",
    "crates/replay",
    "crates/run",
];

/// Every other crate of the workspace: files open with a `//!` line.
pub const DOCUMENTED: [&str; 4] = ["tests", "bench", "python", "tidy"];

/// What a crate must not depend on, and why (ARCHITECTURE.md's crate
/// graph): the Cargo manifest is the enforced list of what a crate may
/// use, so an import across these lines does not compile.
pub const FORBIDDEN: [(&str, &[&str], &str); 9] = [
    (
        "crates/learning",
        &[
            "rlfleet-run",
            "learner-server",
            "actor-client",
            "rlfleet-quic",
        ],
        "networks and agents know no run and no transport",
    ),
    (
        "crates/run",
        &["learner-server", "rlfleet-quic", "quinn", "axum", "mpi"],
        "a run knows no daemon, socket, HTTP or MPI call",
    ),
    (
        "crates/kernels",
        &[
            "rlfleet-shared",
            "rlfleet-checkpoint",
            "rlfleet-quic",
            "rlfleet-replay",
            "actor-client",
            "learner-server",
            "tch",
            "torch-sys",
        ],
        "the kernels are the bottom crate",
    ),
    (
        "crates/quic",
        &["tch", "torch-sys", "learner-server", "actor-client"],
        "QUIC carries frames; it knows no agent and no actor",
    ),
    (
        "crates/output",
        &["tch", "torch-sys", "learner-server"],
        "output files are plain data: no tensors",
    ),
    (
        "checkpoint",
        &["tch", "torch-sys", "learner-server"],
        "a checkpoint is plain data: the fuzz build compiles it without libtorch",
    ),
    (
        "actor-client",
        &["tch", "torch-sys", "learner-server"],
        "an actor process never loads libtorch",
    ),
    (
        "shared",
        &[
            "quinn",
            "rustls",
            "rcgen",
            "ring",
            "socket2",
            "rlfleet-quic",
        ],
        "environments, the config and the wire protocol need no QUIC (that is rlfleet-quic)",
    ),
    (
        "crates/replay",
        &["tch", "torch-sys", "learner-server"],
        "replay is plain data: no tensors",
    ),
];

/// The files of a crate that may hold `unsafe` (ARCHITECTURE.md names
/// them and why): FFI and memory maps, the AVX2 and AVX-512 kernels (a
/// call into a `target_feature` function after checking the CPU), MPI's
/// one-sided operations and an env group's non-blocking collectives.
pub fn unsafe_files(krate: &str) -> &'static [&'static str] {
    match krate {
        // The numerics' intrinsics and the call into `matrixmultiply`.
        "crates/kernels" => &[
            "conv/mod.rs",
            "conv/sparse.rs",
            "conv/transpose16.rs",
            "dense.rs",
            "gemm.rs",
            "gemm_avx512.rs",
            "norm.rs",
            "rmsprop.rs",
        ],
        // What touches libtorch's memory: the fused-Adam shim, tensors'
        // host views.
        "crates/learning" => &["agents/adam.rs", "device.rs"],
        "crates/run" => &["state/journal.rs"],
        "learner-server" => &["malloc.rs"],
        "shared" => &[
            "mpi/env_comm.rs",
            "mpi/mod.rs",
            "mpi/outbox.rs",
            "mpi/window.rs",
        ],
        _ => &[],
    }
}

/// Who names what (ARCHITECTURE.md's invariants), for the crates of the
/// learner: transports never see workflows or the hub; workflows name no
/// socket and no MPI; MPI is called from the MPI transport, the MPI entry
/// point and the data-parallel learners only.
fn naming_rules(krate: &str, sources: &[imports::Source], src: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mpi = ["mpi::", "rsmpi"];
    match krate {
        "learner-server" => {
            problems.extend(files::check_names(
                sources,
                src,
                &["rlfleet_run::workflows", "crate::hub"],
                &["transport"],
                true,
                "transports know a run as its Intake only",
            ));
            problems.extend(files::check_names(
                sources,
                src,
                &mpi,
                &["transport/mpi.rs", "mpi_run.rs", "main.rs"],
                false,
                "only the MPI transport thread, the MPI entry points and the data-parallel learners call MPI",
            ));
        }
        "crates/run" => {
            problems.extend(files::check_names(
                sources,
                src,
                &[
                    "quinn::",
                    "mpi::",
                    "rsmpi",
                    "tokio::net",
                    "std::net::Tcp",
                    "std::net::Udp",
                ],
                &[""],
                true,
                "a run holds no socket and sees no MPI",
            ));
        }
        "crates/learning" => {
            problems.extend(files::check_names(
                sources,
                src,
                &mpi,
                &["agents/data_parallel"],
                false,
                "only the MPI transport thread, the MPI entry points and the data-parallel learners call MPI",
            ));
        }
        _ => {}
    }
    problems
}

/// Every problem found in the workspace at `root`, one message each
/// (empty when the tree is tidy).
pub fn check_workspace(root: &Path) -> std::io::Result<Vec<String>> {
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md"))?;
    let declared = layers::parse_layers(&architecture);
    let mut problems = Vec::new();
    for krate in LAYERED {
        let src = format!("{krate}/src");
        let sources = imports::read_sources(&root.join(&src))?;
        let graph = imports::CrateGraph::build(&sources);
        match declared.iter().find(|l| l.krate == krate) {
            Some(l) => problems.extend(layers::check_layers(&graph, l, &src)),
            None => problems.push(format!(
                "ARCHITECTURE.md has no ```layers {krate}``` block giving its modules' order"
            )),
        }
        problems.extend(layers::check_cycles(&graph, krate, &src));
        problems.extend(files::check_docs(&sources, &src));
        problems.extend(files::check_sizes(&sources, &src, files::MAX_LINES));
        problems.extend(files::check_tests_last(&sources, &src));
        problems.extend(files::check_unsafe(&sources, &src, unsafe_files(krate)));
        if krate == "crates/run" {
            // ARCHITECTURE.md: the run core and the book read no clock and
            // touch no file. The driver (`mod.rs`) tells the core the time
            // and performs the book's effects through the desk; the
            // `seed` front's loop (`serve.rs`, on tokio's clock) passes
            // `now` to its batching, whose requests the door stamps.
            problems.extend(files::check_no_clock(
                &sources,
                &src,
                "workflows/remote",
                &[
                    "workflows/remote/mod.rs",
                    "workflows/remote/seed/serve.rs",
                    "workflows/remote/seed/door.rs",
                ],
            ));
            problems.extend(files::check_no_clock(&sources, &src, "workflows/book", &[]));
            problems.extend(files::check_no_files(&sources, &src, "workflows/book", &[]));
            problems.extend(files::check_no_files(
                &sources,
                &src,
                "workflows/remote",
                &[
                    "workflows/remote/mod.rs",
                    // The batch log: written by the transports' tasks too
                    // (batches counted after their run ended).
                    "workflows/remote/accounts.rs",
                ],
            ));
        }
        problems.extend(naming_rules(krate, &sources, &src));
        if krate == "shared" {
            // ARCHITECTURE.md: the wire messages are an IPC boundary.
            problems.extend(files::check_plain_data(&sources, &src, "wire/messages"));
        }
    }
    let shared = std::fs::read_to_string(root.join("shared/Cargo.toml"))?;
    problems.extend(manifest::check_native_optional(&shared, "shared"));
    for (krate, forbidden, why) in FORBIDDEN {
        let manifest = std::fs::read_to_string(root.join(krate).join("Cargo.toml"))?;
        problems.extend(manifest::check_absent(&manifest, krate, forbidden, why));
    }
    for krate in DOCUMENTED {
        if !root.join(krate).is_dir() {
            continue;
        }
        let sources = imports::read_sources(&root.join(krate))?;
        problems.extend(files::check_docs(&sources, krate));
    }
    problems.extend(docs::check_docs(root)?);
    Ok(problems)
}
