//! rlfleet benchmarks. Each prints its figure as a ratio against a baseline
//! measured in the same run and writes JSON under `bench/results/`.
//!
//! - `dqn`: DQN gradient steps/s of the agent at batch 64 and 256, against
//!   the textbook tch implementation of the same step (nn::Linear layers,
//!   tch's built-in Adam) on the same data.
//! - `envs`: environment steps/s of each built-in env, against the counting
//!   env through the same trait (the cost of the interface itself).
//! - `seed`: SEED central inference over QUIC (see `seed.rs`).
//! - `ingest`: experience ingest over QUIC vs memcpy (see `ingest.rs`).
//! - `workflows`: one DQN run under every workflow vs `single` (see
//!   `workflows.rs`).
//! - `agents`: gradient steps/s of every agent vs one plain MLP step (see
//!   `agents.rs`).
//! - `inference`: actor-side inference latency, ONNX Runtime and plain
//!   Rust vs tch (see `inference.rs`).
//! - `products`: the networks' matrix products, the hand-written AVX-512
//!   loops vs BLAS, matrixmultiply and libtorch (see `products.rs`).
//! - `cnn`: DQN-Nature's CNN update and inference vs PyTorch-Python, and
//!   Atari frames/s end to end vs `random` (see `cnn/`).
//! - `learn`: every agent for rl-baselines3-zoo's budget vs the zoo's
//!   published returns (see `learn.rs`).
//! - `pyenv`: a Gymnasium env through the bridge and through an actor vs
//!   Gymnasium's own Python loop (see `pyenv.rs`).
//! - `soak`: 1,000 actor connections against one daemon process for ten
//!   minutes, `seed` and `async`: RSS over time, latency vs 16
//!   connections, nothing lost (see `soak/`).
//! - `checkpoint`: ingest latency during checkpoints (none, without the
//!   replay, with 50k and 1M transitions) and the time from a daemon's
//!   start on a killed run's state directory to its first gradient step
//!   (see `durability.rs`).
//! - `wire`: bytes received per env step and kept per replay slot, as
//!   frames, for the shipped image configs (see `wire.rs`).
//! - `mpi-rma`, `mpi-transports` (feature `mpi`): RMA operations vs a
//!   two-sided ping-pong, and `async`/`rma` over MPI vs QUIC (see `mpi/`).
//! - `reference`: MinAtar DQN configs vs MinAtar's DQN in PyTorch, per
//!   frame and per second (see `reference.rs`).
//! - `ab`: shipped configs per seed under this build and another (the
//!   build before a change), env steps to the confirmed stop (see `ab.rs`).
//! - `env-groups` (feature `mpi`): HeatRod-v0 spanning K = 1, 2, 4 ranks
//!   vs the same env on one rank without a group (see `env_groups.rs`).

mod ab;
mod agents;
mod cli;
mod cnn;
mod dqn;
mod durability;
mod endless;
#[cfg(feature = "mpi")]
mod env_groups;
mod envs;
mod fleet;
mod fleet_turns;
mod inference;
mod inference_stall;
mod ingest;
mod learn;
mod loopback;
mod lossy;
mod measure;
#[cfg(feature = "mpi")]
mod mpi;
mod products;
mod pyenv;
mod r2d2;
mod reference;
mod seed;
mod seed_core;
mod soak;
mod solve;
mod torch_python;
mod wire;
mod workflows;

use clap::Parser;
use cli::{Cli, What};
use measure::write_json;
use rlfleet_shared::config::TransportKind;

fn main() -> anyhow::Result<()> {
    learner_server::malloc::keep_tensors_in_the_heap();
    let cli = Cli::parse();
    match cli.what {
        What::Dqn { secs } => dqn::bench(secs, &cli.out),
        What::Envs { secs } => envs::bench(secs, &cli.out),
        What::R2d2 { secs } => r2d2::bench(secs, &cli.out),
        What::Agents { secs } => agents::bench(secs, &cli.out),
        What::Pyenv {
            env,
            secs,
            envs,
            steps,
        } => pyenv::run(&env, secs, &envs, steps, &cli.out),
        What::Cnn {
            secs,
            threads,
            batches,
            atari_steps,
            actors,
            envs_per_actor,
            lanes_per_actor,
            configs,
            max_batches_ahead,
        } => cnn::bench(
            secs,
            threads,
            &batches,
            cnn::AtariRuns {
                steps: atari_steps,
                actors: (actors, envs_per_actor, lanes_per_actor),
                configs: &configs,
                ahead: max_batches_ahead,
            },
            &cli.out,
        ),
        What::Inference { secs } => inference::bench(secs, &cli.out),
        What::Products { secs } => products::bench(secs, &cli.out),
        What::Fleet {
            secs,
            actors,
            envs,
            short_runs,
            config,
            levels,
            warmup_secs,
            shares_only,
        } => {
            let shares = fleet::Shares {
                config,
                levels,
                actors,
                envs,
                secs,
                warmup_secs,
            };
            if shares_only {
                fleet::shares_only(&shares, &cli.out)
            } else {
                fleet::bench(&shares, short_runs, &cli.out)
            }
        }
        What::Lossy {
            workflows,
            secs,
            loss,
            delay_ms,
            blackout_secs,
            mild_loss,
            mild_delay_ms,
            actors,
            envs,
        } => lossy::bench(
            &workflows,
            lossy::Shape {
                loss,
                delay_ms,
                blackout_secs,
            },
            (mild_loss > 0.0).then_some(lossy::relay::Link {
                loss: mild_loss,
                delay_ms: mild_delay_ms,
            }),
            actors,
            envs,
            secs,
            &cli.out,
        ),
        What::Learn {
            only,
            eval_episodes,
            seeds,
            steps_factor,
        } => learn::bench(&only, eval_episodes, seeds, steps_factor, &cli.out),
        What::Ab {
            before,
            configs,
            seeds,
            actors,
            name,
        } => ab::bench(&before, &configs, seeds, actors, &name, &cli.out),
        What::Solve {
            configs,
            seeds,
            actors,
            free_secs,
            no_cleanrl,
        } => solve::bench(&configs, seeds, actors, free_secs, !no_cleanrl, &cli.out),
        What::Seed {
            secs,
            actors,
            rounds,
            max_wait_us,
            max_batch,
        } => seed::command(secs, &actors, rounds, max_wait_us, max_batch, &cli.out),
        What::SeedCore {
            secs,
            actors,
            rounds,
            core_size,
        } => seed_core::command(secs, &actors, rounds, core_size, &cli.out),
        What::Ingest {
            secs,
            actors,
            transitions,
            atari,
        } => ingest::command(secs, &actors, transitions, atari, &cli.out),
        What::Checkpoint {
            secs,
            restart_transitions,
            inference_actors,
        } => durability::command(secs, restart_transitions, inference_actors, &cli.out),
        What::Soak {
            workflows,
            connections,
            secs,
            base_connections,
            base_secs,
        } => soak::command(
            &workflows,
            connections,
            secs,
            base_connections,
            base_secs,
            &cli.out,
        ),
        #[cfg(feature = "mpi")]
        What::MpiRma { iters } => mpi::rma(iters, &cli.out),
        #[cfg(feature = "mpi")]
        What::RmaRanks { iters } => mpi::rma_ranks(iters),
        #[cfg(feature = "mpi")]
        What::RmaCheck { ops } => mpi::rma_check(ops),
        What::Reference {
            suite,
            agent,
            games,
            seeds,
            frames,
        } => reference::bench(suite, agent, &games, &seeds, frames, &cli.out),
        #[cfg(feature = "mpi")]
        What::EnvGroups {
            cells,
            substeps,
            steps,
        } => env_groups::bench(cells, substeps, steps, &cli.out),
        #[cfg(feature = "mpi")]
        What::EnvGroupRanks {
            cells,
            substeps,
            steps,
        } => env_groups::ranks(cells, substeps, steps),
        #[cfg(feature = "mpi")]
        What::MpiTransports { steps, actors } => mpi::transports(steps, actors, &cli.out),
        #[cfg(feature = "mpi")]
        What::MpiLearners { steps, actors } => mpi::learners(steps, actors, &cli.out),
        What::Wire {
            configs,
            steps,
            actors,
            before,
        } => wire::bench(&configs, (steps, actors), before.as_deref(), &cli.out),
        What::Workflows {
            steps,
            workflows,
            transport,
        } => {
            let transport = TransportKind::from(transport);
            let rows = workflows::run(steps, &workflows, transport)?;
            write_json(&cli.out, &format!("workflows_{transport}"), &rows)
        }
    }
}
