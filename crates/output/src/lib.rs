//! What a run leaves on disk: the resolved config, `episodes.csv`,
//! `evals.csv` (`records.rs`, through `csv_file.rs`), TensorBoard event
//! files (the config as text and hyperparameters too, `event_proto.rs`),
//! the checkpoint, a learning-curve PNG and `summary.toml`. Rows and
//! events are appended through `append.rs`: all of a flush or none.

mod append;
mod csv_file;
mod event_proto;
mod plot;
mod records;
mod tensorboard;

pub use append::Appender;
pub use csv_file::{CsvFile, format, read_csv};
pub use event_proto::HParam;
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
        let resolved = cfg.to_resolved_toml();
        std::fs::write(dir.join("config.resolved.toml"), &resolved)?;
        let mut board = Board::create(&dir)?;
        // TensorBoard shows the run's config beside its curves: as text,
        // and as hyperparameters to compare runs by.
        board.text("config", &format!("```toml\n{resolved}```"))?;
        board.hparams(&config_hparams(&resolved))?;
        Ok(RunOutput {
            episodes: CsvFile::open(&dir.join("episodes.csv"), !resuming)?,
            evals: CsvFile::open(&dir.join("evals.csv"), !resuming)?,
            board,
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

/// The resolved config as the hparams plugin's hyperparameters: every
/// value by its dotted key path (a list as its TOML text).
fn config_hparams(resolved: &str) -> Vec<(String, HParam)> {
    fn walk(prefix: &str, table: &toml::Table, out: &mut Vec<(String, HParam)>) {
        for (key, value) in table {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            let hp = match value {
                toml::Value::Table(t) => {
                    walk(&path, t, out);
                    continue;
                }
                toml::Value::Integer(i) => HParam::Number(*i as f64),
                toml::Value::Float(f) => HParam::Number(*f),
                toml::Value::Boolean(b) => HParam::Bool(*b),
                toml::Value::String(s) => HParam::Text(s.clone()),
                other => HParam::Text(other.to_string()),
            };
            out.push((path, hp));
        }
    }
    let mut out = Vec::new();
    if let Ok(table) = resolved.parse::<toml::Table>() {
        walk("", &table, &mut out);
    }
    out
}
