//! Workflows: how acting, training and evaluation are arranged for a run.
//!
//! `single` (JORLDY's single): one environment loop in the learner process,
//! training inline, an evaluator thread scoring published weights. The
//! distributed workflows of DESIGN.md reuse the same pieces (agent, replay,
//! evaluator, stop rules, output) over a transport.

mod book;
mod evaluator;
mod progress;
pub mod remote;
mod single;
mod stop;
mod summary;

pub use book::RunBook;
pub use evaluator::{EvalResult, Evaluator};
pub use single::{SingleRun, episode_seed};
pub use stop::{StopReason, check_limits};
pub use summary::{LearnerFigures, RunSummary};

use rlfleet_shared::config::{RunConfig, WorkflowKind};
use tokio_util::sync::CancellationToken;

/// How a run is started, beyond its config.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Resume from this checkpoint (counters, weights, optimizer state).
    pub resume: Option<std::path::PathBuf>,
    /// Draw a progress bar on stderr (when it is a terminal).
    pub progress: bool,
    /// The multi-learner workflows under MPI: the learner ranks, taken by
    /// the run that trains with them.
    #[cfg(feature = "mpi")]
    pub learners: Option<LearnerGroup>,
}

impl RunOptions {
    pub fn new(resume: Option<std::path::PathBuf>, progress: bool) -> RunOptions {
        RunOptions {
            resume,
            progress,
            #[cfg(feature = "mpi")]
            learners: None,
        }
    }
}

/// What the lead learner of a multi-learner job hands its run, once: two
/// communicators over the learner ranks (commands, gradient allreduce) —
/// the run's agent becomes a `DataParallel` — and how many actor ranks
/// the job has (the `ml-rma` family groups actors per learner by it).
#[cfg(feature = "mpi")]
#[derive(Debug)]
pub struct LearnerRanks {
    pub commands: rlfleet_shared::mpi::Group,
    pub reduce: rlfleet_shared::mpi::Group,
    pub actor_ranks: usize,
}

#[cfg(feature = "mpi")]
pub type LearnerGroup = std::sync::Arc<std::sync::Mutex<Option<LearnerRanks>>>;

/// Runs a config to its stop condition (or until `cancel` fires).
pub fn run(
    cfg: &RunConfig,
    opts: &RunOptions,
    cancel: CancellationToken,
) -> anyhow::Result<RunSummary> {
    match cfg.workflow {
        WorkflowKind::Single => SingleRun::new(cfg, opts)?.run(&cancel),
        other => anyhow::bail!("workflow `{other}` is not available in this build"),
    }
}
