//! `sync` (EXARL SYNC, JORLDY sync): rounds. Every live actor plays its
//! round with the round's weights and sends one batch; once every
//! participant has, the learner trains on them all and answers everyone
//! with the new weights. Actors that join during a round wait for the next;
//! the batch of an actor that left after sending is trained, not answered.

use super::core::{Core, stop_message};
use super::workflow::Workflow;
use crate::vocab::DropReason;
use crate::vocab::{ConnId, Reply};
use rlfleet_shared::wire::{ErrorCode, Experience, Submission};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// The state of the current round.
#[derive(Debug, Default)]
pub(super) struct Sync {
    /// Actors this round waits for.
    participants: BTreeSet<ConnId>,
    /// Batches in, with the reply each waits for.
    submitted: BTreeMap<ConnId, (Submission, Reply)>,
    /// Batches of actors that left after submitting (trained, not answered).
    orphans: Vec<Experience>,
    /// Actors admitted at the next boundary.
    joiners: Vec<(ConnId, Reply)>,
}

impl Sync {
    fn in_progress(&self) -> bool {
        !self.participants.is_empty()
    }

    /// Ends the round once every live participant has submitted: trains on
    /// all batches, answers everyone with the new weights and admits the
    /// actors that joined meanwhile.
    fn maybe_finish_round(&mut self, core: &mut Core) -> anyhow::Result<()> {
        let complete = self
            .participants
            .iter()
            .all(|c| self.submitted.contains_key(c));
        let empty = self.submitted.is_empty() && self.orphans.is_empty() && self.joiners.is_empty();
        if !complete || empty {
            return Ok(());
        }
        for mut e in std::mem::take(&mut self.orphans) {
            // Their actor is gone: train the data, count no episodes.
            e.finished.clear();
            core.ingest(u64::MAX, &e, false)?;
        }
        let mut replies = Vec::new();
        for (conn, (s, reply)) in std::mem::take(&mut self.submitted) {
            let duplicate = match &s {
                Submission::Batch(e) => !core.ingest(conn, e, false)?,
                Submission::Ask(_) => false,
            };
            replies.push((conn, s.seq(), duplicate, s.idle_envs().to_vec(), reply));
        }
        for (conn, seq, duplicate, idle, reply) in replies {
            let starts = core.issue(conn, &idle);
            let ack = core.ack(conn, seq, duplicate, starts);
            core.reply(reply, ack);
        }
        for (conn, reply) in std::mem::take(&mut self.joiners) {
            if core.actor(conn).is_some() {
                let welcome = core.welcome(conn, true);
                core.reply(reply, welcome);
                self.participants.insert(conn);
            }
        }
        Ok(())
    }
}

impl Workflow for Sync {
    fn join(&mut self, core: &mut Core, conn: ConnId, reply: Reply) -> anyhow::Result<()> {
        if self.in_progress() {
            // Joins at the next round boundary.
            self.joiners.push((conn, reply));
            return Ok(());
        }
        let welcome = core.welcome(conn, true);
        self.participants.insert(conn);
        core.reply(reply, welcome);
        Ok(())
    }

    fn left(&mut self, core: &mut Core, conn: ConnId, requeued: usize) -> anyhow::Result<()> {
        self.participants.remove(&conn);
        if let Some((Submission::Batch(e), _reply)) = self.submitted.remove(&conn) {
            self.orphans.push(e);
        }
        if requeued > 0 {
            core.serve_parked();
        }
        // The round may have been waiting only for this actor.
        self.maybe_finish_round(core)
    }

    fn experience(
        &mut self,
        core: &mut Core,
        conn: ConnId,
        s: Submission,
        reply: Reply,
        _now: Instant,
    ) -> anyhow::Result<()> {
        if !self.participants.contains(&conn) || self.submitted.contains_key(&conn) {
            core.drop_batch(&s, DropReason::Invalid);
            core.refuse(
                reply,
                ErrorCode::Unexpected,
                "experience outside this actor's turn in the round".into(),
            );
            return Ok(());
        }
        self.submitted.insert(conn, (s, reply));
        self.maybe_finish_round(core)
    }

    fn stop(&mut self, core: &mut Core, reason: &str) -> anyhow::Result<()> {
        // Batches of the unfinished round were received, never trained:
        // count them dropped.
        let submitted = std::mem::take(&mut self.submitted).into_values();
        let joiners = std::mem::take(&mut self.joiners).into_iter();
        let mut untrained = std::mem::take(&mut self.orphans);
        for (s, reply) in submitted {
            if let Submission::Batch(e) = s {
                untrained.push(e);
            }
            core.reply(reply, stop_message(reason));
        }
        for (_, reply) in joiners {
            core.reply(reply, stop_message(reason));
        }
        let version = core.agent().train_steps();
        for e in &untrained {
            core.accounts().dropped(e, version, DropReason::RunEnded);
        }
        Ok(())
    }
}
