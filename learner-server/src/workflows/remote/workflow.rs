//! The [`Workflow`] trait — what one workflow family adds to the shared
//! [`Core`] — with the run thread's [`Input`]s, the [`Inbox`] transports
//! deliver through, and [`build`], the one place a workflow name becomes
//! its behaviour.

use super::core::Core;
use super::rma::{Popped, Rma};
use super::seed::{Acted, Seed};
use super::{immediate::Immediate, orchestrated::Orchestrated, sync::Sync, window::Window};
use crate::transport::{Answer, ConnId, Intake, Reply, RunGone};
use crate::workflows::StopReason;
use rlfleet_shared::config::WorkflowKind;
use rlfleet_shared::wire::{Experience, Hello, Message, Submission};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long the loop sleeps when nothing happens (it still polls stop rules
/// and evaluations this often).
pub(super) const IDLE_TICK: Duration = Duration::from_millis(20);

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
pub(super) trait Bypass: Send + std::marker::Sync + std::fmt::Debug {
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

/// The behaviour of one workflow family. The driver ([`super::RemoteRun`])
/// owns the loop, the clock and the stop; the [`Core`] owns the agent and
/// the books; a `Workflow` says what happens on each input. Every method
/// runs on the run thread.
pub(super) trait Workflow: Send {
    /// The helper that serves requests beside the run thread, started now
    /// (`run` is where it reaches the run thread, `rt` the daemon's runtime).
    fn bypass(
        &mut self,
        _core: &Core,
        _run: &mpsc::SyncSender<Input>,
        _rt: &tokio::runtime::Handle,
    ) -> Option<Arc<dyn Bypass>> {
        None
    }

    /// `conn` was admitted to `core.actors`: answer it now (or later).
    fn join(&mut self, core: &mut Core, conn: ConnId, reply: Reply) -> anyhow::Result<()> {
        let welcome = core.welcome(conn, true);
        let _ = reply.send(welcome);
        Ok(())
    }

    /// `conn` left; `requeued` of its episodes went back to the ledger.
    fn left(&mut self, core: &mut Core, _conn: ConnId, requeued: usize) -> anyhow::Result<()> {
        if requeued > 0 {
            core.serve_parked();
        }
        Ok(())
    }

    /// Experience and work requests reach the run thread in this workflow
    /// (checked and counted by the driver before [`Workflow::experience`]).
    fn takes_experience(&self) -> bool {
        true
    }

    /// A checked batch or work request from an admitted actor (never
    /// called when [`Workflow::takes_experience`] says no).
    fn experience(
        &mut self,
        core: &mut Core,
        _conn: ConnId,
        _s: Submission,
        reply: Reply,
        _now: Instant,
    ) -> anyhow::Result<()> {
        core.refuse(
            reply,
            rlfleet_shared::wire::ErrorCode::Unexpected,
            "this workflow takes no experience on the run thread".into(),
        );
        Ok(())
    }

    /// A message from the workflow's own helpers.
    fn internal(&mut self, _core: &mut Core, _ev: Internal) -> anyhow::Result<()> {
        Ok(())
    }

    /// Work between inputs; true if it trained (the loop then does not
    /// wait).
    fn work(&mut self, _core: &mut Core, _now: Instant) -> anyhow::Result<bool> {
        Ok(false)
    }

    /// How long the loop may wait for an input.
    fn idle_timeout(&self, _now: Instant) -> Duration {
        IDLE_TICK
    }

    /// The run's stop rules (`book` says what the count limits say).
    fn poll_stop(&mut self, _core: &Core, book: Option<StopReason>) -> Option<StopReason> {
        book
    }

    /// The run ends: answer what is held back, train what the learner
    /// already holds.
    fn stop(&mut self, _core: &mut Core, _reason: &str) -> anyhow::Result<()> {
        Ok(())
    }

    /// Takes a checkpoint if one is due (the `rma` pools first hand over
    /// what they hold, so that the books it keeps are whole).
    fn checkpoint(&mut self, core: &mut Core) -> anyhow::Result<()> {
        core.checkpoint_if_due()
    }

    /// A helper's message that came after the end.
    fn late(&mut self, _core: &mut Core, _ev: Internal) -> anyhow::Result<()> {
        Ok(())
    }
}

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

/// Where transports deliver one run's messages: the run thread, or the
/// workflow's helper beside it.
#[derive(Debug)]
pub(super) struct Inbox {
    pub run: mpsc::SyncSender<Input>,
    pub bypass: Option<Arc<dyn Bypass>>,
    pub accounts: Arc<super::accounts::Accounts>,
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
