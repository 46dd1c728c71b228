//! What a run leaves on disk: the resolved config, `episodes.csv`,
//! `evals.csv`, TensorBoard event files, the checkpoint, a learning-curve
//! PNG and `summary.toml`.

mod plot;
mod tensorboard;

pub use plot::plot_learning_curve;
pub use tensorboard::Board;

use rlfleet_shared::config::RunConfig;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// One finished episode.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeRecord {
    /// 0-based index among the run's finished episodes.
    pub episode: u64,
    /// Which actor ran it (0 for in-process workflows).
    pub actor: u32,
    pub ret: f64,
    pub length: u32,
    /// Seconds since the run started (over all its sessions).
    pub wall_secs: f64,
    /// Policy version that acted at the episode's end.
    pub policy_version: u64,
    /// Env steps of the run when the episode finished.
    pub env_steps: u64,
}

/// One evaluation of published weights.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalRecord {
    pub env_steps: u64,
    pub policy_version: u64,
    pub mean_return: f64,
    pub min_return: f64,
    pub max_return: f64,
    pub wall_secs: f64,
    /// Episodes the mean is over.
    pub episodes: u32,
    /// A confirming evaluation (`eval.confirm_episodes`), not a screening
    /// one.
    pub confirming: bool,
}

pub const EPISODES_HEADER: &str = "episode,actor,return,length,wall_secs,policy_version,env_steps";
pub const EVALS_HEADER: &str =
    "env_steps,policy_version,mean_return,min_return,max_return,wall_secs,episodes,confirming";

/// The files of one run's output directory.
#[derive(Debug)]
pub struct RunOutput {
    dir: PathBuf,
    episodes: BufWriter<File>,
    evals: BufWriter<File>,
    board: Board,
}

fn csv(path: &Path, header: &str, append: bool) -> std::io::Result<BufWriter<File>> {
    let exists = append && path.exists();
    let f = OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)?;
    let mut w = BufWriter::new(f);
    if !exists {
        writeln!(w, "{header}")?;
    }
    Ok(w)
}

impl RunOutput {
    /// Creates (or, when resuming, reopens for appending) the output
    /// directory and writes the resolved config.
    pub fn create(cfg: &RunConfig, resuming: bool) -> std::io::Result<RunOutput> {
        let dir = cfg.output_dir();
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("config.resolved.toml"), cfg.to_resolved_toml())?;
        Ok(RunOutput {
            episodes: csv(&dir.join("episodes.csv"), EPISODES_HEADER, resuming)?,
            evals: csv(&dir.join("evals.csv"), EVALS_HEADER, resuming)?,
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
        writeln!(
            self.episodes,
            "{},{},{},{},{:.3},{},{}",
            e.episode, e.actor, e.ret, e.length, e.wall_secs, e.policy_version, e.env_steps
        )?;
        self.board.scalar("episode/return", e.env_steps, e.ret)?;
        self.board
            .scalar("episode/length", e.env_steps, f64::from(e.length))
    }

    pub fn eval(&mut self, e: &EvalRecord) -> std::io::Result<()> {
        writeln!(
            self.evals,
            "{},{},{},{},{},{:.3},{},{}",
            e.env_steps,
            e.policy_version,
            e.mean_return,
            e.min_return,
            e.max_return,
            e.wall_secs,
            e.episodes,
            u8::from(e.confirming)
        )?;
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

/// Reads the numeric rows of one of the run's CSV files (header skipped),
/// each with exactly `fields` values.
fn read_rows(path: &Path, fields: usize) -> std::io::Result<Vec<Vec<f64>>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|line| {
            let row: Option<Vec<f64>> = line.split(',').map(|x| x.parse().ok()).collect();
            row.filter(|r| r.len() == fields).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "{}: bad line `{line}` (expected {fields} numbers)",
                        path.display()
                    ),
                )
            })
        })
        .collect()
}

/// Reads `episodes.csv` back (for plots over resumed runs, and tests).
/// Opens a CSV file for appending (a resumed run keeps its lines), writing
/// `header` first when the file is new; creates its directory.
pub fn append_csv(path: &Path, header: &str) -> std::io::Result<BufWriter<File>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let fresh = !path.exists();
    let mut w = BufWriter::new(OpenOptions::new().create(true).append(true).open(path)?);
    if fresh {
        writeln!(w, "{header}")?;
    }
    Ok(w)
}

pub fn read_episodes(path: &Path) -> std::io::Result<Vec<EpisodeRecord>> {
    Ok(read_rows(path, 7)?
        .into_iter()
        .map(|f| EpisodeRecord {
            episode: f[0] as u64,
            actor: f[1] as u32,
            ret: f[2],
            length: f[3] as u32,
            wall_secs: f[4],
            policy_version: f[5] as u64,
            env_steps: f[6] as u64,
        })
        .collect())
}

/// Reads `evals.csv` back.
pub fn read_evals(path: &Path) -> std::io::Result<Vec<EvalRecord>> {
    Ok(read_rows(path, 8)?
        .into_iter()
        .map(|f| EvalRecord {
            env_steps: f[0] as u64,
            policy_version: f[1] as u64,
            mean_return: f[2],
            min_return: f[3],
            max_return: f[4],
            wall_secs: f[5],
            episodes: f[6] as u32,
            confirming: f[7] != 0.0,
        })
        .collect())
}
