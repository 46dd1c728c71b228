//! Checkpoints of a run: the snapshot of the agent and the books, handed to
//! the writer thread (or written at once), and the due flag distributed
//! runs take them by.

use super::RunBook;
use crate::state::writer::write;
use crate::state::{BookState, Books, CheckpointWriter, Destination, file_len};
use rlfleet_checkpoint::Checkpoint;
use rlfleet_learning::agents::Agent;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

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

    /// Takes a checkpoint: flushes the files, copies the agent's state
    /// (and replay, with `checkpoint.replay`) and the books out — the
    /// snapshot, whose duration it returns — and has the writer thread
    /// write it (`wait`: writes it before returning, after any queued one).
    /// With a record, checkpoints go to the record's `checkpoints/`
    /// (rotated, `checkpoint.keep`) and the output directory's
    /// `checkpoint.safetensors` names the latest; without one, there.
    pub fn checkpoint(
        &mut self,
        agent: &dyn Agent,
        run_books: Option<(serde_json::Value, BTreeMap<String, u64>)>,
        wait: bool,
    ) -> anyhow::Result<Duration> {
        self.out.flush()?;
        let started = Instant::now();
        let mut files = BTreeMap::new();
        for name in ["episodes.csv", "evals.csv"] {
            files.insert(name.to_string(), file_len(&self.out.dir().join(name))?);
        }
        let run = run_books.map(|(run, extra_files)| {
            files.extend(extra_files);
            run
        });
        let books = Books {
            book: BookState {
                files,
                recent: self.recent.iter().copied().collect(),
                last_eval: self.target.last_eval,
                last_confirm: self.target.last_confirm,
                env_errors: self.env_errors,
            },
            run,
        };
        let ck = Checkpoint {
            env: self.cfg.env.clone(),
            agent: self.cfg.agent.to_string(),
            counters: self.counters,
            agent_state: agent.state(),
            best: self.best.clone(),
            books: Some(serde_json::to_string(&books).expect("plain data serialises")),
            replay: if self.cfg.checkpoint.replay {
                agent.replay_image()
            } else {
                None
            },
        };
        let snapshot = started.elapsed();
        let to = match &self.record {
            Some(r) => Destination {
                path: r.checkpoint_path(self.counters.env_steps),
                latest: Some(self.out.checkpoint_path()),
                keep: self.cfg.checkpoint.keep as usize,
            },
            None => Destination {
                path: self.out.checkpoint_path(),
                latest: None,
                keep: 0,
            },
        };
        if wait {
            self.writer.finish();
            write(&ck, &to)?;
            self.writer = CheckpointWriter::spawn();
        } else if !self.writer.submit(ck, to) {
            tracing::warn!(
                env_steps = self.counters.env_steps,
                "checkpoint skipped: the previous one is still being written"
            );
        }
        tracing::debug!(
            env_steps = self.counters.env_steps,
            snapshot_ms = snapshot.as_secs_f64() * 1e3,
            "checkpoint taken"
        );
        Ok(snapshot)
    }
}
