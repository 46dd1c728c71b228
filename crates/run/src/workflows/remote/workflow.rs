//! The [`Workflow`] trait: what one workflow family adds to the shared
//! [`Core`] — what happens on each input, between inputs and at the end.

use super::core::Core;
use super::input::{Bypass, Input, Internal};
use crate::vocab::{ConnId, Reply};
use crate::workflows::StopReason;
use rlfleet_shared::wire::Submission;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// How long the loop sleeps when nothing happens (it still polls stop rules
/// and evaluations this often).
pub(super) const IDLE_TICK: Duration = Duration::from_millis(20);

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
        core.reply(reply, welcome);
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
    /// what they hold, so that the books it keeps are whole); says whether
    /// it took one.
    fn checkpoint(&mut self, core: &mut Core) -> anyhow::Result<bool> {
        core.checkpoint_if_due()
    }

    /// A helper's message that came after the end.
    fn late(&mut self, _core: &mut Core, _ev: Internal) -> anyhow::Result<()> {
        Ok(())
    }
}
