//! What a run leaves on disk: the resolved config, `episodes.csv`,
//! `evals.csv` (`records.rs`, through `csv_file.rs`), TensorBoard event
//! files, the checkpoint, a learning-curve PNG and `summary.toml`. Rows
//! and events are appended through `append.rs`: all of a flush or none.

mod append;
mod csv_file;
mod plot;
mod records;
mod tensorboard;

pub use append::Appender;
pub use csv_file::{CsvFile, format, read_csv};
pub use plot::plot_learning_curve;
pub use records::{
    EPISODES_HEADER, EVALS_HEADER, EpisodeRecord, EvalRecord, read_episodes, read_evals,
};
pub use tensorboard::Board;

use rlfleet_shared::config::RunConfig;
use std::path::{Path, PathBuf};

/// The files of one run's output directory.
#[derive(Debug)]
pub struct RunOutput {
    dir: PathBuf,
    episodes: CsvFile<EpisodeRecord>,
    evals: CsvFile<EvalRecord>,
    board: Board,
}

impl RunOutput {
    /// Creates (or, when resuming, reopens for appending) the output
    /// directory and writes the resolved config.
    pub fn create(cfg: &RunConfig, resuming: bool) -> std::io::Result<RunOutput> {
        let dir = cfg.output_dir();
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("config.resolved.toml"), cfg.to_resolved_toml())?;
        Ok(RunOutput {
            episodes: CsvFile::open(&dir.join("episodes.csv"), !resuming)?,
            evals: CsvFile::open(&dir.join("evals.csv"), !resuming)?,
            board: Board::create(&dir)?,
            dir,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn checkpoint_path(&self) -> PathBuf {
        self.dir.join("checkpoint.safetensors")
    }

    pub fn episode(&mut self, e: &EpisodeRecord) -> std::io::Result<()> {
        self.episodes.write(e)?;
        self.board.scalar("episode/return", e.env_steps, e.ret)?;
        self.board
            .scalar("episode/length", e.env_steps, f64::from(e.length))
    }

    pub fn eval(&mut self, e: &EvalRecord) -> std::io::Result<()> {
        self.evals.write(e)?;
        // Confirming evaluations are a series of their own.
        let series = if e.confirming { "eval_confirm" } else { "eval" };
        for (what, v) in [
            ("mean_return", e.mean_return),
            ("min_return", e.min_return),
            ("max_return", e.max_return),
        ] {
            self.board
                .scalar(&format!("{series}/{what}"), e.env_steps, v)?;
        }
        self.board.flush()?;
        self.evals.flush()
    }

    /// Training scalars (`train/loss`, `perf/env_steps_per_sec`, ...) at
    /// env step `step`, to TensorBoard.
    pub fn scalars(&mut self, step: u64, scalars: &[(&str, f64)]) -> std::io::Result<()> {
        for &(tag, v) in scalars {
            self.board.scalar(tag, step, v)?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.episodes.flush()?;
        self.board.flush()?;
        self.evals.flush()
    }
}
