//! [`build`]: the one place a workflow name becomes its behaviour — the
//! family that runs it.

use super::core::Core;
use super::immediate::Immediate;
use super::orchestrated::Orchestrated;
use super::rma::Rma;
use super::seed::Seed;
use super::sync::Sync;
use super::window::Window;
use super::workflow::Workflow;
use rlfleet_shared::config::WorkflowKind;
use std::time::Duration;

/// The workflow named in the run's config.
pub(super) fn build(core: &mut Core, learners: usize, actor_ranks: usize) -> Box<dyn Workflow> {
    let w = core.cfg().workflow;
    match w {
        WorkflowKind::AsyncWindow => Box::new(Window::new(Duration::from_millis(
            core.cfg().distributed.window_ms,
        ))),
        WorkflowKind::Sync => Box::new(Sync::default()),
        WorkflowKind::Orchestrated => Box::new(Orchestrated::new(core)),
        WorkflowKind::Seed | WorkflowKind::SeedA2c => Box::new(Seed::new(core)),
        w if w.deposits() => Box::new(Rma::new(core, learners, actor_ranks)),
        // `async`, `nb-async`, `random`, `ml-async`.
        _ => Box::new(Immediate),
    }
}
