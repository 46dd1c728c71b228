//! What the workflows and the driver read of a [`Core`] and the named
//! changes they make to it: the core's fields are its own, so every
//! change a workflow makes is one of these calls (or a step of
//! `actors.rs`, `episodes.rs`, `ingest.rs`).

use super::{ActorSlot, Core};
use crate::metrics::RunMetrics;
use crate::vocab::{ConnId, RunShared};
use crate::workflows::FrontFigures;
use crate::workflows::book::RunBook;
use crate::workflows::remote::accounts::Accounts;
use crate::workflows::remote::ledger::EpisodeLedger;
use rlfleet_learning::agents::Agent;
use rlfleet_shared::env::EnvSpec;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The highest sequence number trained per (actor id, session id).
pub(in crate::workflows::remote) type TrainedSeqs = HashMap<(String, u64), u64>;

impl Core {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    pub fn book(&self) -> &RunBook {
        &self.book
    }

    /// The book, for the driver's desk to perform what it asks.
    pub fn book_mut(&mut self) -> &mut RunBook {
        &mut self.book
    }

    /// The book and the agent at once (the desk's end of a run reads the
    /// agent while it closes the book).
    pub fn book_with_agent(&mut self) -> (&mut RunBook, &dyn Agent) {
        (&mut self.book, self.agent.as_ref())
    }

    pub fn agent(&self) -> &dyn Agent {
        self.agent.as_ref()
    }

    pub fn agent_mut(&mut self) -> &mut dyn Agent {
        self.agent.as_mut()
    }

    pub fn metrics(&self) -> &Arc<RunMetrics> {
        &self.metrics
    }

    pub fn accounts(&self) -> &Arc<Accounts> {
        &self.accounts
    }

    pub fn shared(&self) -> &Arc<RunShared> {
        &self.shared
    }

    /// Env steps the run has taken in.
    pub fn env_steps(&self) -> u64 {
        self.book.counters.env_steps
    }

    /// Env steps of episodes whose actor left before finishing them.
    #[cfg(test)]
    pub fn abandoned(&self) -> u64 {
        self.abandoned
    }

    /// `conn`'s place in the run, once it was welcomed.
    pub fn actor(&self, conn: ConnId) -> Option<&ActorSlot> {
        self.actors.get(&conn)
    }

    /// Most actors connected at once (`actors.max_actors`).
    pub fn max_actors(&self) -> usize {
        self.max_actors
    }

    /// The ledger, for the `rma` pools, which issue episodes at deposit.
    pub fn shared_ledger(&self) -> Arc<Mutex<EpisodeLedger>> {
        self.ledger.clone()
    }

    pub fn trained_seqs(&self) -> &TrainedSeqs {
        &self.trained_seq
    }

    /// The `rma` pools hand over the sequence numbers they accepted.
    pub fn set_trained_seqs(&mut self, seqs: TrainedSeqs) {
        self.trained_seq = seqs;
    }

    /// The workflow's part of the books: what the checkpoint restored,
    /// then what the workflow last kept.
    pub fn workflow_books(&self) -> Option<&serde_json::Value> {
        self.workflow_books.as_ref()
    }

    /// What the workflow puts in the books of the next checkpoint.
    pub fn keep_workflow_books(&mut self, books: serde_json::Value) {
        self.workflow_books = Some(books);
    }

    /// Env steps already offered to `Learn::train`.
    pub fn trained_upto(&self) -> u64 {
        self.trained_upto
    }

    /// Batches an actor may have in flight (`Welcome.in_flight`).
    pub fn set_in_flight(&mut self, n: u32) {
        self.in_flight = n;
    }

    /// `random`: actors explore at `epsilon`, whatever the agent says.
    pub fn fix_epsilon(&mut self, epsilon: f32) {
        self.fixed_epsilon = Some(epsilon);
    }

    /// The workflow paces training (`orchestrated`'s rate limiter), not
    /// the agent's schedule.
    pub fn pace_training(&mut self) {
        self.paced = true;
    }

    /// The driver measured `train` busy and `wait` waiting.
    pub fn charge_time(&mut self, train: Duration, wait: Duration) {
        self.time.train += train;
        self.time.wait += wait;
    }

    /// What the `seed` front did, for the summary.
    pub fn record_front(&mut self, figures: FrontFigures) {
        self.front = Some(figures);
    }

    /// A batch `lag` policy versions behind the learner was trained on.
    pub fn policy_lag(&mut self, lag: u64) {
        self.book.policy_lag(lag);
        self.metrics.policy_lag.observe(lag as f64);
    }

    /// One env step more taken in (`seed`, which observes its own steps).
    pub fn count_env_step(&mut self) {
        self.book.counters.env_steps += 1;
    }

    /// After the env step count went from `before` to now: the book's
    /// periodic work (evaluations, checkpoints, scalars, progress).
    pub fn after_steps(&mut self, before: u64) {
        self.book.after_steps(before, self.agent.as_ref(), self.now);
    }
}
