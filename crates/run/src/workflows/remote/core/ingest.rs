//! Experience batches on the run thread: checks, exactly-once ingestion
//! into replay, training on the agent's schedule, and the reply — an `Ack`
//! with the next episodes, or, for an actor with nothing left to play, a
//! parked request answered when an episode comes back or the run ends.

use super::{Core, Parked};
use crate::vocab::DropReason;
use crate::vocab::{ConnId, Reply};
use crate::workflows::remote::checks::{Refusal, check_submission};
use crate::workflows::remote::ledger::Standing;
use rlfleet_shared::config::WorkflowKind;
use rlfleet_shared::wire::{Experience, Submission};

impl Core {
    /// Counts a batch received and checks the submission; a batch that
    /// fails is counted dropped (`invalid`).
    pub fn accept(&self, conn: ConnId, s: &Submission) -> Result<(), Refusal> {
        if let Some(e) = s.batch() {
            self.accounts.received(e);
        }
        let slot = &self.actors[&conn];
        let check = check_submission(s, &slot.actor_id, &self.shapes(), slot.n_envs);
        if check.is_err() {
            self.drop_batch(s, DropReason::Invalid);
        }
        check
    }

    /// Counts a submission's batch, if it is one, dropped for `reason`.
    pub fn drop_batch(&self, s: &Submission, reason: DropReason) {
        if let Some(e) = s.batch() {
            self.accounts.dropped(e, self.agent.train_steps(), reason);
        }
    }

    /// Ingests a batch, if it is one, and answers: the next episodes and
    /// newer weights, or — when the actor has nothing left to play — later.
    pub fn answer(&mut self, conn: ConnId, s: Submission, reply: Reply) -> anyhow::Result<()> {
        let (seq, idle) = (s.seq(), s.idle_envs().to_vec());
        let duplicate = match &s {
            Submission::Batch(e) => !self.ingest(conn, e, false)?,
            Submission::Ask(_) => false,
        };
        let starts = self.issue(conn, &idle);
        let nothing_to_do = starts.is_empty() && self.ledger().held_by(conn) == 0;
        if nothing_to_do
            && !duplicate
            && let Some(slot) = self.actors.get_mut(&conn)
        {
            // Wait until an episode is re-issued or the run ends.
            slot.parked = Some(Parked { seq, idle, reply });
            return Ok(());
        }
        let ack = self.ack(conn, seq, duplicate, starts);
        self.reply(reply, ack);
        Ok(())
    }

    /// Gives episodes that became available to actors parked without one.
    pub fn serve_parked(&mut self) {
        let conns: Vec<ConnId> = self
            .actors
            .iter()
            .filter(|(_, s)| s.parked.is_some())
            .map(|(&c, _)| c)
            .collect();
        for conn in conns {
            if !self.ledger().available() {
                break;
            }
            let parked = self.actors.get_mut(&conn).and_then(|s| s.parked.take());
            if let Some(Parked { seq, idle, reply }) = parked {
                let starts = self.issue(conn, &idle);
                let ack = self.ack(conn, seq, false, starts);
                self.reply(reply, ack);
            }
        }
    }

    /// Puts a valid batch into replay and trains, unless it was trained
    /// before (a resend) or is too stale; counts its finished episodes.
    /// Batches popped from the `rma` pools (`from_pool`) were deduplicated
    /// at deposit and, unless resent, had their episodes counted there.
    /// Returns false for a duplicate.
    pub fn ingest(
        &mut self,
        conn: ConnId,
        e: &Experience,
        from_pool: bool,
    ) -> anyhow::Result<bool> {
        let version = self.agent.train_steps();
        let before = self.book.counters.env_steps;
        // Sent in an earlier session of the actor (before it reconnected):
        // its episodes may have been handed out again, even to this
        // connection, for a new play.
        let resend = self.sessions.get(&conn).is_some_and(|&s| s != e.session_id);
        if !from_pool {
            let key = (e.actor_id.clone(), e.session_id);
            if self.trained_seq.get(&key).is_some_and(|&s| e.seq <= s) {
                self.accounts.dropped(e, version, DropReason::Duplicate);
                return Ok(false);
            }
            self.trained_seq.insert(key, e.seq);
        }
        let lag = version.saturating_sub(e.policy_version);
        let stale = self
            .cfg()
            .distributed
            .max_policy_lag
            .is_some_and(|m| lag > m);
        if stale {
            self.accounts.dropped(e, version, DropReason::Stale);
            // Not trained on, but the env's frame stack moves on.
            if let Some(frames) = &mut self.frames {
                frames.skip_steps(conn, &e.steps);
            }
            // Never to reach the agent: its plays' next steps come after
            // a hole.
            for r in &e.steps.runs {
                self.plays.lost(r.episode, r.steps);
            }
        } else {
            self.observe(conn, e, from_pool, resend);
            self.book.policy_lag(lag);
        }
        if !from_pool || resend {
            // Before training: an on-policy agent trains on the episodes
            // that end here.
            for f in &e.finished {
                // A resent end counts only for an episode nobody plays now,
                // and only if every step of it is on record.
                if resend
                    && (self.ledger().standing(f.episode) != Standing::Waiting
                        || !self.resent_end_whole(f.episode, f.length))
                {
                    continue;
                }
                self.finish_episode(conn, f.env, f.episode, f.ret, f.length)?;
            }
        }
        if self.paced {
            // The workflow paces training, not the agent's schedule.
            self.trained_upto = self.book.counters.env_steps;
        } else {
            self.train_pending();
        }
        self.book
            .after_steps(before, self.agent.as_ref(), self.now());
        Ok(true)
    }

    /// Gives a batch's transitions to the agent (`random` only counts
    /// them) and counts its env steps; the batch counts trained unless no
    /// step of it reached the agent (superseded, or given before).
    fn observe(&mut self, conn: ConnId, e: &Experience, from_pool: bool, resend: bool) {
        let learns = self.cfg().workflow != WorkflowKind::Random;
        let version = self.agent.train_steps();
        if learns {
            let given = self.give(conn, e, from_pool, resend);
            self.metrics.transitions_withheld.inc_by(given.withheld());
            match given.dropped() {
                Some(reason) => self.accounts.dropped(e, version, reason),
                None => self.accounts.trained(e, version),
            }
        } else {
            self.accounts.trained(e, version);
            self.trained_upto = self.book.counters.env_steps + e.steps.len() as u64;
        }
        self.book.counters.env_steps += e.steps.len() as u64;
        for r in &e.steps.runs {
            self.steps_ingested(conn, r.episode, u64::from(r.steps), !from_pool, resend);
        }
    }

    /// Offers every ingested env step to the agent's training schedule.
    /// The gradient steps take a turn on the daemon's device.
    pub fn train_pending(&mut self) {
        if self.trained_upto >= self.book.counters.env_steps {
            return;
        }
        let before = self.agent.train_steps();
        let turn = self.device.as_ref().map(crate::turns::Turn::hold);
        while self.trained_upto < self.book.counters.env_steps {
            self.trained_upto += 1;
            self.agent.train(self.trained_upto);
        }
        if let Some((held, waited)) = turn.map(crate::turns::Held::release) {
            self.time.device += held;
            self.time.device_wait += waited;
        }
        self.count_train_steps(before);
    }

    /// Metrics for the gradient steps taken since the agent was at
    /// version `before`.
    pub fn count_train_steps(&mut self, before: u64) {
        let steps = self.agent.train_steps() - before;
        if steps > 0 {
            self.metrics.train_steps.inc_by(steps);
            self.metrics
                .policy_version
                .set(self.agent.train_steps() as i64);
        }
    }
}
