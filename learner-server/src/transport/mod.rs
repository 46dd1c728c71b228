//! Transports as the learner sees them: whatever carries actors' messages
//! (QUIC now; MPI and in-process channels later) turns them into [`Event`]s
//! for the active run and delivers the run's replies. Workflows are written
//! against these events and never see a socket.

pub mod quic;

use rlfleet_shared::wire::{Hello, Message};
use std::time::Instant;
use tokio::sync::oneshot;

/// Identifies one actor connection (a new one per reconnect).
pub type ConnId = u64;

/// Where the run's answer to one request goes. Dropping it unanswered
/// tells the actor the run ended.
pub type Reply = oneshot::Sender<Message>;

/// What a transport hands the run.
#[derive(Debug)]
pub enum Event {
    /// An authenticated actor asks to take part; the reply is `Welcome`
    /// (or `Stop`).
    Join {
        conn: ConnId,
        hello: Hello,
        reply: Reply,
    },
    /// `Observations` or `Experience`; the reply is `Actions` or `Ack` (or
    /// `Stop`, or `Error` after which the transport closes the
    /// connection).
    Request {
        conn: ConnId,
        msg: Message,
        received: Instant,
        reply: Reply,
    },
    /// The connection is gone (closed, timed out, or refused).
    Left { conn: ConnId },
}
