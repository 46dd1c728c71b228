//! The run thread's inputs and how they reach it: [`Input`] (joins,
//! requests, departures, and [`Internal`] messages from a workflow's own
//! helpers), the [`Bypass`] a helper serves requests beside the run
//! thread through, and the [`Inbox`], the run's `Intake` for transports.

use super::accounts::Accounts;
use crate::vocab::{Answer, ConnId, Departed, Intake, Reply, RunGone};
use rlfleet_shared::wire::{Experience, Hello, Message, Observations};
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, TrySendError};
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
    /// The connection is gone; `departed` is answered (or dropped) once
    /// the run has taken it.
    Left {
        conn: ConnId,
        departed: oneshot::Sender<()>,
    },
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
    /// The version of the weights that chose them.
    pub version: u64,
    /// Each env's action's log-probability under those weights (`n_envs`
    /// values, 0 for envs that needed none), from a policy that samples;
    /// empty otherwise.
    pub logp: Vec<f32>,
    /// With a recurrent core: each env's state before the front acted
    /// (`n_envs * state_len` values, zeros for envs that needed none);
    /// empty otherwise.
    pub states: Vec<f32>,
}

/// What the run thread took out of the pools: batches with their actor's
/// connection.
pub(super) type Popped = Vec<(ConnId, Arc<Experience>)>;

/// Puts `input` on the run thread's channel without blocking: it is
/// bounded by construction (a registered session has one input queued at
/// most besides its departure, and a registry slot is freed only once the
/// run has taken the departure), so it is never full; if it were, the
/// input is given back (returned) as if the run were gone, never waited
/// for.
fn offer(run: &SyncSender<Input>, input: Input) -> Option<Input> {
    match run.try_send(input) {
        Ok(()) => None,
        Err(TrySendError::Disconnected(input)) => Some(input),
        Err(TrySendError::Full(input)) => {
            tracing::error!("the run's inbox is full: a message was turned away");
            Some(input)
        }
    }
}

/// Where transports deliver one run's messages: the run thread, or the
/// workflow's helper beside it.
#[derive(Debug)]
pub(super) struct Inbox {
    pub run: SyncSender<Input>,
    pub bypass: Option<Arc<dyn Bypass>>,
    pub accounts: Arc<Accounts>,
}

impl Intake for Inbox {
    fn join(&self, conn: ConnId, hello: Hello) -> Result<Answer, RunGone<Hello>> {
        let (reply, rx) = oneshot::channel();
        match offer(&self.run, Input::Join { conn, hello, reply }) {
            None => Ok(rx),
            Some(Input::Join { hello, .. }) => Err(RunGone(hello)),
            Some(_) => unreachable!("sent a join"),
        }
    }

    fn request(&self, conn: ConnId, msg: Message) -> Result<Answer, RunGone<Box<Message>>> {
        if let Some(b) = &self.bypass
            && b.serves(&msg)
        {
            return Ok(b.take(conn, msg));
        }
        let (reply, rx) = oneshot::channel();
        match offer(&self.run, Input::Request { conn, msg, reply }) {
            None => Ok(rx),
            Some(Input::Request { msg, .. }) => Err(RunGone(Box::new(msg))),
            Some(_) => unreachable!("sent a request"),
        }
    }

    fn left(&self, conn: ConnId) -> Departed {
        let (departed, rx) = oneshot::channel();
        match self.run.try_send(Input::Left { conn, departed }) {
            // Gone: `departed` was dropped with the input, so `rx` resolves.
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            // Never by construction (see `offer`); a departure is never
            // lost, so it waits on a thread of its own, not the caller's.
            Err(TrySendError::Full(input)) => {
                tracing::error!(conn, "the run's inbox is full: a departure waits for room");
                let run = self.run.clone();
                std::thread::spawn(move || {
                    let _ = run.send(input);
                });
            }
        }
        rx
    }

    fn late(&self, conn: ConnId, e: Experience) {
        let e = match &self.bypass {
            Some(b) => b.late(conn, e),
            None => Some(e),
        };
        if let Some(e) = e
            && !e.steps.is_empty()
        {
            self.accounts.received(&e);
            self.accounts.late(&e);
        }
    }
}
