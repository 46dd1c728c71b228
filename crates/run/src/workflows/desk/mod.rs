//! [`Desk`]: the run book's hands — the output files, the evaluator
//! thread, the checkpoint writer and the progress bar. It opens a run
//! (resuming from a checkpoint: the agent loaded, the files cut back to
//! it), performs the [`Effect`]s the book queues, in order, feeds the
//! evaluator's results back into the book, and ends the run
//! (`finish.rs`). Owned by the driver, beside the book.

mod finish;
mod open;

use super::Evaluator;
use super::book::{CheckpointJob, Effect, RunBook};
use super::progress::Progress;
use crate::state::writer::{RETRY_FIRST, WriteHealth};
use crate::state::{Books, CheckpointWriter, Destination, RunRecord, file_len};
use rlfleet_output::RunOutput;

/// The files and threads of one run's books.
#[derive(Debug)]
pub struct Desk {
    out: RunOutput,
    evaluator: Option<Evaluator>,
    writer: CheckpointWriter,
    progress: Progress,
    /// The run's record in the state directory (checkpoints go there).
    record: Option<RunRecord>,
    /// Checkpoints kept in the record (`checkpoint.keep`).
    keep: usize,
    /// How long checkpoints may keep failing (`checkpoint.max_failed_secs`).
    max_failed: std::time::Duration,
    /// The last write of the output files failed.
    output_failing: bool,
}

impl Desk {
    pub fn record(&self) -> Option<&RunRecord> {
        self.record.as_ref()
    }

    /// Logs the first failed write of the output files in a streak, and
    /// the first good one after it (the rows wait in memory meanwhile).
    fn output_written(&mut self, written: std::io::Result<()>) {
        match written {
            Err(e) if !self.output_failing => {
                tracing::error!("output files not written (rows kept and retried): {e}");
                self.output_failing = true;
            }
            Ok(()) if self.output_failing => {
                tracing::info!("output files written again");
                self.output_failing = false;
            }
            _ => {}
        }
    }

    /// How the run's checkpoint writes are going.
    pub fn checkpoint_health(&self) -> WriteHealth {
        self.writer.health()
    }

    /// Feeds the evaluations that finished into `book`, then does what
    /// the book asked for. Fails once checkpoints have failed for
    /// `checkpoint.max_failed_secs`.
    pub fn step(&mut self, book: &mut RunBook) -> anyhow::Result<()> {
        let health = self.writer.health();
        if let Some(since) = health.failing_since
            && since.elapsed() > self.max_failed
        {
            anyhow::bail!(
                "checkpoints have failed for {:.0} s ([checkpoint] max_failed_secs = {}): {}",
                since.elapsed().as_secs_f64(),
                self.max_failed.as_secs_f64(),
                health.error.unwrap_or_default()
            );
        }
        while let Some(r) = self.evaluator.as_ref().and_then(Evaluator::try_result) {
            book.evaluated(&r);
        }
        self.perform(book)
    }

    /// Does what `book` asked for, oldest first.
    pub fn perform(&mut self, book: &mut RunBook) -> anyhow::Result<()> {
        while let Some(effect) = book.poll_effect() {
            match effect {
                Effect::Episode(row) => self.out.episode(&row)?,
                Effect::Eval(row) => {
                    let written = self.out.eval(&row);
                    self.output_written(written);
                }
                Effect::Scalars { env_steps, values } => self.out.scalars(env_steps, &values)?,
                Effect::Flush => {
                    let written = self.out.flush();
                    self.output_written(written);
                }
                Effect::Publish { weights, env_steps } => {
                    if let Some(e) = &self.evaluator {
                        e.publish(weights, env_steps);
                    }
                }
                Effect::Confirm {
                    weights,
                    env_steps,
                    episodes,
                } => {
                    if let Some(e) = &self.evaluator {
                        e.confirm(weights, env_steps, episodes);
                    }
                }
                Effect::Checkpoint(job) => self.checkpoint(*job)?,
                Effect::Progress(line) => self.progress.update(&line),
                Effect::Warning(line) => tracing::warn!("{line}"),
            }
        }
        Ok(())
    }

    /// Writes a checkpoint the book took: the rows before it to disk and
    /// their lengths into its books, then to the writer thread (or at
    /// once, `wait`). With a record, checkpoints go to the record's
    /// `checkpoints/` (rotated, `checkpoint.keep`) and the output
    /// directory's `checkpoint.safetensors` names the latest; without
    /// one, there.
    fn checkpoint(&mut self, job: CheckpointJob) -> anyhow::Result<()> {
        let CheckpointJob {
            mut ck,
            mut book,
            run,
            wait,
        } = job;
        // The rows before the checkpoint on disk first, or no checkpoint
        // (it would record files that end short of its counters).
        if let Err(e) = self.out.flush() {
            let same = std::io::Error::new(e.kind(), e.to_string());
            self.writer
                .failed(&anyhow::Error::new(e).context("cannot write the output files"));
            self.output_written(Err(same));
            return Ok(());
        }
        self.output_written(Ok(()));
        for name in ["episodes.csv", "evals.csv"] {
            book.files
                .insert(name.to_string(), file_len(&self.out.dir().join(name))?);
        }
        let run = run.map(|(run, extra_files)| {
            book.files.extend(extra_files);
            run
        });
        let books = Books { book, run };
        ck.books = Some(serde_json::to_string(&books).expect("plain data serialises"));
        let env_steps = ck.counters.env_steps;
        let to = match &self.record {
            Some(r) => Destination {
                path: r.checkpoint_path(env_steps),
                latest: Some(self.out.checkpoint_path()),
                keep: self.keep,
            },
            None => Destination {
                path: self.out.checkpoint_path(),
                latest: None,
                keep: 0,
            },
        };
        if wait {
            self.writer.finish();
            self.writer.write_now(&ck, &to)?;
            self.writer = CheckpointWriter::with_health(self.writer.health_handle(), RETRY_FIRST);
        } else if self.writer.submit(ck, to) {
            tracing::debug!(env_steps, "checkpoint handed to the writer");
        } else {
            tracing::warn!(
                env_steps,
                "checkpoint skipped: the previous one is still being written"
            );
        }
        Ok(())
    }
}
