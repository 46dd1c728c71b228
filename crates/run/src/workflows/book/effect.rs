//! [`Effect`]: what the book wants done outside it — rows written, weights
//! scored, a checkpoint written, the progress bar redrawn. The book queues
//! them in order; the driver's `Desk` (`workflows/desk`)
//! performs them (so a checkpoint's file lengths count exactly the rows
//! queued before it).

use crate::state::BookState;
use rlfleet_checkpoint::{Checkpoint, Weights};
use rlfleet_output::{EpisodeRecord, EvalRecord};
use std::collections::BTreeMap;

/// One thing the book wants done, in the order it was asked for.
#[derive(Debug)]
pub enum Effect {
    /// A row of `episodes.csv`.
    Episode(EpisodeRecord),
    /// A row of `evals.csv`.
    Eval(EvalRecord),
    /// Training scalars to TensorBoard at `env_steps`.
    Scalars {
        env_steps: u64,
        values: Vec<(&'static str, f64)>,
    },
    /// The rows so far to disk.
    Flush,
    /// Weights for the evaluator to screen.
    Publish { weights: Weights, env_steps: u64 },
    /// Weights for the evaluator to confirm over `episodes` episodes.
    Confirm {
        weights: Weights,
        env_steps: u64,
        episodes: u32,
    },
    /// A checkpoint to write: the state copied out, its books still
    /// lacking the output files' lengths (the desk measures them after
    /// the rows before it are written, and picks where it goes).
    Checkpoint(Box<CheckpointJob>),
    /// The progress bar's figures.
    Progress(crate::workflows::progress::ProgressLine),
    /// A warning for the run's log.
    Warning(String),
}

/// A distributed run's part of a checkpoint's books, and the lengths of
/// the files only it writes (`batches.csv`).
pub type RunBooks = (serde_json::Value, BTreeMap<String, u64>);

/// A checkpoint the book took: [`Effect::Checkpoint`].
#[derive(Debug)]
pub struct CheckpointJob {
    pub ck: Checkpoint,
    pub book: BookState,
    pub run: Option<RunBooks>,
    /// Written before the desk goes on (the run's last checkpoint), not
    /// queued for the writer thread.
    pub wait: bool,
}
