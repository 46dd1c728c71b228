//! `async-window` (JORLDY's async): batches collect for `window_ms` from
//! the first one in; then the learner trains on all of them and answers
//! each with the newest weights.

use super::core::{Core, stop_message};
use super::workflow::{IDLE_TICK, Workflow};
use crate::vocab::{ConnId, Reply};
use rlfleet_shared::wire::Submission;
use std::time::{Duration, Instant};

/// The batches collected since the window opened.
#[derive(Debug)]
pub(super) struct Window {
    /// `distributed.window_ms`.
    length: Duration,
    opened: Option<Instant>,
    batches: Vec<(ConnId, Submission, Reply)>,
}

impl Window {
    pub fn new(length: Duration) -> Window {
        Window {
            length,
            opened: None,
            batches: Vec::new(),
        }
    }

    /// The window is open and its length has passed since it opened.
    fn due(&self, now: Instant) -> bool {
        self.opened.is_some_and(|t| now >= t + self.length)
    }

    /// Closes the window: its batches, in arrival order.
    fn take(&mut self) -> Vec<(ConnId, Submission, Reply)> {
        self.opened = None;
        std::mem::take(&mut self.batches)
    }
}

impl Workflow for Window {
    fn experience(
        &mut self,
        _core: &mut Core,
        conn: ConnId,
        s: Submission,
        reply: Reply,
        now: Instant,
    ) -> anyhow::Result<()> {
        self.opened.get_or_insert(now);
        self.batches.push((conn, s, reply));
        Ok(())
    }

    fn work(&mut self, core: &mut Core, now: Instant) -> anyhow::Result<bool> {
        if !self.due(now) {
            return Ok(false);
        }
        for (conn, s, reply) in self.take() {
            core.answer(conn, s, reply)?;
        }
        Ok(true)
    }

    fn idle_timeout(&self, now: Instant) -> Duration {
        self.opened.map_or(IDLE_TICK, |t| {
            (t + self.length)
                .saturating_duration_since(now)
                .min(IDLE_TICK)
        })
    }

    fn stop(&mut self, core: &mut Core, reason: &str) -> anyhow::Result<()> {
        // What the window holds is trained on; its actors are told to stop.
        for (conn, s, reply) in self.take() {
            if let Submission::Batch(e) = &s {
                core.ingest(conn, e, false)?;
            }
            core.reply(reply, stop_message(reason));
        }
        Ok(())
    }
}
