//! Transports as the learner sees them: whatever carries actors' messages
//! (QUIC, in-process channels, MPI) runs a [`session::Session`] per
//! actor, which turns them into [`Event`]s for the active run's
//! [`RunInbox`] and delivers the run's replies. Workflows are written
//! against these events and never see a socket.

pub mod inproc;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod quic;
pub mod session;

use crate::workflows::remote::Pools;
use rlfleet_shared::wire::{Experience, Hello, Message, Observations};
use std::sync::{Arc, mpsc};
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
    /// Not from a transport: requests the `seed` inference front already
    /// answered, with the actions it chose, for the run to assemble
    /// transitions from (in the order they were answered).
    Acted(Vec<Acted>),
    /// Not from a transport: an `rma` deposit landed in a pool.
    Wake,
    /// Not from a transport: `rma-queue-pop-all`'s fetcher took these
    /// pending batches of one actor out of its pool.
    Fetched(Vec<(ConnId, Arc<Experience>)>),
}

/// One `Observations` request answered by the inference front.
#[derive(Debug)]
pub struct Acted {
    pub conn: ConnId,
    pub obs: Observations,
    /// `n_envs * action_dim` values (zeros for envs that needed none).
    pub actions: Vec<f32>,
}

/// Where a run takes its events: the run's thread; for `seed` runs the
/// inference front, which takes every `Observations` request; for the `rma`
/// workflows the pools, which take every `Experience` right in the
/// transport's task.
#[derive(Debug, Clone)]
pub struct RunInbox {
    pub events: mpsc::Sender<Event>,
    pub observations: Option<tokio::sync::mpsc::UnboundedSender<Event>>,
    pub deposits: Option<Arc<Pools>>,
}

impl RunInbox {
    /// Delivers `ev`; gives it back when the run (or its front) is gone.
    pub fn send(&self, ev: Event) -> Result<(), Box<Event>> {
        match (&ev, &self.observations) {
            (
                Event::Request {
                    msg: Message::Observations(_),
                    ..
                },
                Some(front),
            ) => front.send(ev).map_err(|e| Box::new(e.0)),
            _ => self.events.send(ev).map_err(|e| Box::new(e.0)),
        }
    }
}
