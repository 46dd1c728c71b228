//! The run vocabulary: what every layer above the run's state shares —
//! connection ids, replies and the [`Intake`] transports hand messages to,
//! why a batch is dropped, and the run, episode and actor views the API
//! shows. Plain types with no behaviour beyond their own; nothing here
//! knows a workflow, a transport or the hub.

mod drop_reason;
mod intake;
mod views;

pub use drop_reason::DropReason;
pub use intake::{ActiveRun, Answer, ConnId, Departed, Intake, Reply, RunGone, RunInbox};
pub use views::{ActorView, BatchTally, EpisodeView, ResumedFrom, RunShared, RunState, RunStatus};
