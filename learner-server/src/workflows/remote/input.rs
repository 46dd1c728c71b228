//! The run thread's inputs and how they reach it: [`Input`] (joins,
//! requests, departures, and [`Internal`] messages from a workflow's own
//! helpers), the [`Bypass`] a helper serves requests beside the run
//! thread through, and the [`Inbox`], the run's `Intake` for transports.

use super::accounts::Accounts;
use crate::vocab::{Answer, ConnId, Intake, Reply, RunGone};
use rlfleet_shared::wire::{Experience, Hello, Message, Observations};
use std::sync::{Arc, mpsc};
use tokio::sync::oneshot;

/// What the run thread takes, in arrival order.
#[derive(Debug)]
// Requests (batches) are the common case: boxing the message would
// allocate per batch to shrink the rare joins and departures.
#[allow(clippy::large_enum_variant)]
pub(super) enum Input {
    /// An actor asks to take part; the reply is `Welcome` (or `Stop`).
    Join {
        conn: ConnId,
        hello: Hello,
        reply: Reply,
    },
    /// A request the run thread answers (`Experience`, or something the
    /// workflow has no place for).
    Request {
        conn: ConnId,
        msg: Message,
        reply: Reply,
    },
    /// The connection is gone.
    Left { conn: ConnId },
    /// From the workflow's own helpers beside the run thread.
    Internal(Internal),
}

/// What a workflow's helpers tell the run thread.
#[derive(Debug)]
pub(super) enum Internal {
    /// `seed`: requests the inference front answered, with the actions it
    /// chose (in the order they were answered).
    Acted(Vec<Acted>),
    /// `rma`: a deposit landed in a pool.
    Wake,
    /// `rma-queue-pop-all`: the fetcher took these pending batches of one
    /// actor out of its pool.
    Fetched(Popped),
}

/// A helper that serves some requests beside the run thread (`seed`'s
/// inference front: observations; the `rma` pools: deposits).
pub(super) trait Bypass: Send + Sync + std::fmt::Debug {
    /// This helper serves `msg`.
    fn serves(&self, msg: &Message) -> bool;
    /// Takes a message it serves.
    fn take(&self, conn: ConnId, msg: Message) -> Answer;
    /// A batch after the run ended, when this helper accounts for those
    /// itself (the `rma` pools log them); gives it back otherwise.
    fn late(&self, _conn: ConnId, e: Experience) -> Option<Experience> {
        Some(e)
    }
}

/// One `Observations` request answered by the inference front.
#[derive(Debug)]
pub(super) struct Acted {
    pub conn: ConnId,
    pub obs: Observations,
    /// `n_envs * action_dim` values (zeros for envs that needed none).
    pub actions: Vec<f32>,
}

/// What the run thread took out of the pools: batches with their actor's
/// connection.
pub(super) type Popped = Vec<(ConnId, Arc<Experience>)>;

/// Where transports deliver one run's messages: the run thread, or the
/// workflow's helper beside it.
#[derive(Debug)]
pub(super) struct Inbox {
    pub run: mpsc::SyncSender<Input>,
    pub bypass: Option<Arc<dyn Bypass>>,
    pub accounts: Arc<Accounts>,
}

impl Intake for Inbox {
    fn join(&self, conn: ConnId, hello: Hello) -> Result<Answer, RunGone<Hello>> {
        let (reply, rx) = oneshot::channel();
        self.run
            .send(Input::Join { conn, hello, reply })
            .map_err(|e| match e.0 {
                Input::Join { hello, .. } => RunGone(hello),
                _ => unreachable!("sent a join"),
            })?;
        Ok(rx)
    }

    fn request(&self, conn: ConnId, msg: Message) -> Result<Answer, RunGone<Box<Message>>> {
        if let Some(b) = &self.bypass
            && b.serves(&msg)
        {
            return Ok(b.take(conn, msg));
        }
        let (reply, rx) = oneshot::channel();
        self.run
            .send(Input::Request { conn, msg, reply })
            .map_err(|e| match e.0 {
                Input::Request { msg, .. } => RunGone(Box::new(msg)),
                _ => unreachable!("sent a request"),
            })?;
        Ok(rx)
    }

    fn left(&self, conn: ConnId) {
        let _ = self.run.send(Input::Left { conn });
    }

    fn late(&self, conn: ConnId, e: Experience) {
        let e = match &self.bypass {
            Some(b) => b.late(conn, e),
            None => Some(e),
        };
        if let Some(e) = e
            && !e.transitions.is_empty()
        {
            self.accounts.received(&e);
            self.accounts.late(&e);
        }
    }
}
