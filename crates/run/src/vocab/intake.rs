//! How a run takes actors' messages: connection ids, the [`Intake`] every
//! transport's sessions call, the one-shot [`Reply`]/[`Answer`] pair an
//! answer travels on, and [`ActiveRun`], a run transports route to.

use rlfleet_shared::wire::{Experience, Hello, Message};
use std::sync::Arc;
use tokio::sync::oneshot;

/// Identifies one actor connection (a new one per reconnect).
pub type ConnId = u64;

/// Where the run's answer to one request goes. Dropping it unanswered
/// tells the actor the run ended.
pub type Reply = oneshot::Sender<Message>;

/// Where a session waits for the run's answer to one request.
pub type Answer = oneshot::Receiver<Message>;

/// Resolves once the run has taken a connection's departure (or the run
/// is gone): until then the connection's requests may still be queued for
/// the run, so its slot in the registry stays taken.
pub type Departed = oneshot::Receiver<()>;

/// The run was gone before it took the message (given back).
#[derive(Debug)]
pub struct RunGone<T>(pub T);

/// What a session calls to hand one actor's messages to a run. Each call
/// returns at once and never blocks; the answer comes through the
/// returned [`Answer`].
pub trait Intake: Send + Sync + std::fmt::Debug {
    /// An authenticated actor asks to take part; the answer is `Welcome`
    /// (or `Stop`).
    fn join(&self, conn: ConnId, hello: Hello) -> Result<Answer, RunGone<Hello>>;
    /// `Observations` or `Experience`; the answer is `Actions` or `Ack` (or
    /// `Stop`, or `Error` after which the transport closes the
    /// connection).
    fn request(&self, conn: ConnId, msg: Message) -> Result<Answer, RunGone<Box<Message>>>;
    /// The connection is gone (closed, timed out, or refused); the answer
    /// says when the run has taken it.
    fn left(&self, conn: ConnId) -> Departed;
    /// A batch that reached the session after this run ended (or went):
    /// counted received and dropped `run_ended`, and logged where the run
    /// still can.
    fn late(&self, conn: ConnId, e: Experience);
}

/// The active run as transports hold it.
pub type RunInbox = Arc<dyn Intake>;

/// A run actors are routed to.
#[derive(Debug, Clone)]
pub struct ActiveRun {
    pub id: String,
    pub name: String,
    /// Its claim on the daemon's actors (`[fleet]`).
    pub share: rlfleet_shared::config::FleetConfig,
    pub events: RunInbox,
}
