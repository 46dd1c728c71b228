//! Workflows: how acting, training and evaluation are arranged for a run.
//!
//! `single` (JORLDY's single): one environment loop in the learner process,
//! training inline, an evaluator thread scoring published weights. The
//! distributed workflows (docs/workflows.md) reuse the same pieces (agent, replay,
//! evaluator, stop rules, output) over a transport.

mod book;
mod claim;
mod desk;
mod evaluator;
mod progress;
mod recorded;
pub mod remote;
mod seeds;
mod single;
mod stop;
mod summary;

pub use book::{Effect, RunBook};
pub use claim::{RESOLVED_CONFIG, claim_output_dir, settle_output_dir, sibling};
pub use desk::Desk;
pub use evaluator::{EvalResult, Evaluator};
pub use recorded::{record_end, run_recorded};
pub use seeds::{episode_seed, eval_seed};
pub use single::SingleRun;
pub use stop::{StopReason, check_limits};
pub use summary::{FrontFigures, LearnerFigures, RunSummary};

use rlfleet_learning::agents::Agent;
use rlfleet_shared::config::{RunConfig, WorkflowKind};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// How a run is started, beyond its config.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Resume from this checkpoint (counters, weights, optimizer state).
    pub resume: Option<std::path::PathBuf>,
    /// Draw a progress bar on stderr (when it is a terminal).
    pub progress: bool,
    /// The multi-learner workflows: the job's learner ranks, taken by the
    /// run that trains with them.
    pub learners: Option<Learners>,
    /// The run's record in the state directory: its checkpoints go there
    /// and its received batches are journaled there.
    pub record: Option<crate::state::RunRecord>,
    /// The run's seat at the daemon's device: its gradient steps wait for
    /// their turn there (distributed workflows).
    pub device: Option<crate::turns::Turn>,
    /// A new run writes into `output_dir` as given even when it holds
    /// another run's results (`--overwrite`; the ranks of an MPI job,
    /// which must agree); else it takes a free sibling.
    pub keep_output_dir: bool,
}

impl RunOptions {
    pub fn new(resume: Option<std::path::PathBuf>, progress: bool) -> RunOptions {
        RunOptions {
            resume,
            progress,
            learners: None,
            record: None,
            device: None,
            keep_output_dir: false,
        }
    }
}

/// Turns a run's agent into the lead of data-parallel learners.
pub type LeadAgent = Box<dyn FnOnce(Box<dyn Agent>) -> Box<dyn Agent> + Send>;

/// What the lead learner of a multi-learner job hands its run: how many
/// learners and actor ranks the job has (the `ml-rma` family groups actors
/// per learner by them), and — once — what makes the run's agent the lead
/// of the data-parallel learners. Workflows see this, never the transport
/// that joins the learners (MPI).
#[derive(Clone)]
pub struct Learners {
    pub count: usize,
    pub actor_ranks: usize,
    lead: Arc<Mutex<Option<LeadAgent>>>,
}

impl Learners {
    pub fn new(count: usize, actor_ranks: usize, lead: LeadAgent) -> Learners {
        Learners {
            count,
            actor_ranks,
            lead: Arc::new(Mutex::new(Some(lead))),
        }
    }

    /// `agent` as the lead of the learners (the first run only; later
    /// runs keep `agent`).
    pub fn take_agent(&self, agent: Box<dyn Agent>) -> Box<dyn Agent> {
        let lead = self.lead.lock().ok().and_then(|mut l| l.take());
        match lead {
            Some(lead) => lead(agent),
            None => agent,
        }
    }
}

impl std::fmt::Debug for Learners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learners")
            .field("count", &self.count)
            .field("actor_ranks", &self.actor_ranks)
            .finish()
    }
}

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
