//! Checkpoints of a run: the snapshot of the agent and the books, queued
//! for the desk, and the due flag distributed runs take them by.

use super::{CheckpointJob, Effect, RunBook, RunBooks};
use crate::state::BookState;
use rlfleet_checkpoint::Checkpoint;
use rlfleet_learning::agents::Agent;
use std::collections::BTreeMap;

impl RunBook {
    /// A checkpoint is due (a period boundary was crossed) and not yet
    /// taken.
    pub fn checkpoint_due(&self) -> bool {
        self.checkpoint_due
    }

    /// [`RunBook::checkpoint_due`]; taking the answer clears it.
    pub fn take_checkpoint_due(&mut self) -> bool {
        std::mem::take(&mut self.checkpoint_due)
    }

    /// Takes a checkpoint: copies the agent's state (and replay, with
    /// `checkpoint.replay`) and the books out — the snapshot — and queues
    /// it for the desk, which writes the rows before it, measures the
    /// files and has the writer thread write it (`wait`: writes it before
    /// going on, after any queued one). `run_books`: a distributed run's
    /// books and the lengths of the files only it writes.
    pub fn checkpoint(&mut self, agent: &dyn Agent, run_books: Option<RunBooks>, wait: bool) {
        let book = BookState {
            files: BTreeMap::new(),
            recent: self.recent.iter().copied().collect(),
            last_eval: self.target.last_eval,
            last_confirm: self.target.last_confirm,
            env_errors: self.env_errors,
        };
        let ck = Checkpoint {
            env: self.cfg.env.clone(),
            agent: self.cfg.agent.to_string(),
            counters: self.counters,
            agent_state: agent.state(),
            best: self.best.clone(),
            books: None,
            replay: if self.cfg.checkpoint.replay {
                agent.replay_image()
            } else {
                None
            },
        };
        self.push(Effect::Checkpoint(Box::new(CheckpointJob {
            ck,
            book,
            run: run_books,
            wait,
        })));
    }
}
