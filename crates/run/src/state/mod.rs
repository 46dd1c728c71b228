//! The state directory (`state_dir` in `server.toml`, `--state-dir` on
//! `learner-server run`): every run started through the API or `run` is
//! recorded under `runs/<id>/` — its config (`run.toml`), its state
//! (`record.json`: active, stopped, finished, failed), its rotated
//! checkpoints (`checkpoints/`) and the count of batches it received
//! (`received`, see [`Journal`]) — so that a daemon started again finds the
//! run that was active and resumes it under the same id.

mod books;
mod journal;
mod start;
pub mod writer;

pub use books::{BookState, Books, file_len, truncate_to};
pub use journal::Journal;
pub use start::Start;
pub use writer::{CheckpointWriter, Destination};

use anyhow::Context;
use rlfleet_checkpoint::write_atomically;
use rlfleet_shared::config::RunConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where a recorded run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordState {
    /// Running, or interrupted (the daemon died or shut down): a daemon
    /// that starts resumes it.
    Active,
    /// Stopped through the API (`POST /v1/runs/{id}/resume` continues it).
    Stopped,
    /// Ended by a stop rule.
    Finished,
    /// Ended by an error.
    Failed,
    /// Accepted and waiting for a slot (`[runs] max_active`): a daemon
    /// that starts queues it again.
    Queued,
}

/// `record.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordInfo {
    pub id: String,
    pub state: RecordState,
    /// Why it ended, or the error.
    pub reason: Option<String>,
    /// Times it was resumed.
    pub resumes: u32,
}

/// A state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// Opens (creating) the directory.
    pub fn open(root: &Path) -> anyhow::Result<StateDir> {
        std::fs::create_dir_all(root.join("runs"))
            .with_context(|| format!("cannot create the state directory `{}`", root.display()))?;
        Ok(StateDir {
            root: root.to_path_buf(),
        })
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Records a new run of `cfg`: `<name>-<n>` with `n` one more than
    /// any run recorded here (the directory is created exclusively, so two
    /// processes sharing the state directory never take the same id).
    pub fn create_run(&self, cfg: &RunConfig) -> anyhow::Result<RunRecord> {
        let mut n = self.records().iter().map(|r| r.number).max().unwrap_or(0) + 1;
        loop {
            let id = format!("{}-{n}", cfg.name);
            let dir = self.root.join("runs").join(&id);
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    let record = RunRecord { id, dir, number: n };
                    std::fs::create_dir_all(record.checkpoints_dir())?;
                    write_atomically(
                        &record.dir.join("run.toml"),
                        cfg.to_resolved_toml().as_bytes(),
                    )?;
                    record.write_info(&RecordInfo {
                        id: record.id.clone(),
                        state: RecordState::Active,
                        reason: None,
                        resumes: 0,
                    })?;
                    return Ok(record);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot record run `{id}`"));
                }
            }
        }
    }

    /// Every recorded run, oldest first.
    pub fn records(&self) -> Vec<RunRecord> {
        let Ok(entries) = std::fs::read_dir(self.root.join("runs")) else {
            return Vec::new();
        };
        let mut out: Vec<RunRecord> = entries
            .flatten()
            .filter_map(|e| RunRecord::at(&e.path()))
            .collect();
        out.sort_by_key(|r| r.number);
        out
    }

    pub fn record(&self, id: &str) -> Option<RunRecord> {
        self.records().into_iter().find(|r| r.id == id)
    }

    /// The newest run named `name` that did not finish, or an error that
    /// says there is none.
    pub fn resumable(&self, name: &str) -> anyhow::Result<RunRecord> {
        self.latest_unfinished(name).ok_or_else(|| {
            anyhow::anyhow!(
                "no run named `{name}` to resume in `{}`",
                self.root.display()
            )
        })
    }

    /// The newest run named `name`, whatever its state.
    pub fn latest_named(&self, name: &str) -> Option<RunRecord> {
        self.records()
            .into_iter()
            .rev()
            .find(|r| r.id.rsplit_once('-').is_some_and(|(n, _)| n == name))
    }

    /// The newest run named `name` that did not finish.
    pub fn latest_unfinished(&self, name: &str) -> Option<RunRecord> {
        self.records().into_iter().rev().find(|r| {
            r.id.rsplit_once('-').is_some_and(|(n, _)| n == name)
                && r.info().is_ok_and(|i| i.state != RecordState::Finished)
        })
    }
}

/// One recorded run's directory.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub id: String,
    pub dir: PathBuf,
    number: u64,
}

impl RunRecord {
    /// The record at `dir`, if it is one (`<name>-<n>` with a
    /// `record.json`).
    fn at(dir: &Path) -> Option<RunRecord> {
        let id = dir.file_name()?.to_str()?.to_string();
        let number = id.rsplit_once('-')?.1.parse().ok()?;
        dir.join("record.json").exists().then(|| RunRecord {
            id,
            dir: dir.to_path_buf(),
            number,
        })
    }

    /// The run's config as it was started.
    pub fn config(&self) -> anyhow::Result<RunConfig> {
        let path = self.dir.join("run.toml");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read `{}`", path.display()))?;
        Ok(RunConfig::from_toml(&text, &path.display().to_string())?)
    }

    /// Replaces the config the run resumes with (a population member's
    /// new hyperparameters).
    pub fn write_config(&self, cfg: &RunConfig) -> std::io::Result<()> {
        write_atomically(
            &self.dir.join("run.toml"),
            cfg.to_resolved_toml().as_bytes(),
        )
    }

    pub fn info(&self) -> anyhow::Result<RecordInfo> {
        let path = self.dir.join("record.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read `{}`", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("`{}` is damaged", path.display()))
    }

    fn write_info(&self, info: &RecordInfo) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(info).expect("plain data serialises");
        write_atomically(&self.dir.join("record.json"), text.as_bytes())
    }

    /// Sets the run's state (and reason); logs a failure to write.
    pub fn set_state(&self, state: RecordState, reason: Option<String>) {
        let result = self.info().and_then(|mut info| {
            info.state = state;
            info.reason = reason;
            Ok(self.write_info(&info)?)
        });
        if let Err(e) = result {
            tracing::error!(run = %self.id, "cannot update the run's record: {e:#}");
        }
    }

    /// Marks the run active again and counts the resume; removes what a
    /// process killed while writing a checkpoint left (its temporary file).
    pub fn resumed(&self) -> anyhow::Result<RecordInfo> {
        if let Ok(entries) = std::fs::read_dir(self.checkpoints_dir()) {
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.') && name.ends_with(".tmp") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let mut info = self.info()?;
        info.state = RecordState::Active;
        info.reason = None;
        info.resumes += 1;
        self.write_info(&info)?;
        Ok(info)
    }

    pub fn checkpoints_dir(&self) -> PathBuf {
        self.dir.join("checkpoints")
    }

    /// The checkpoint for `env_steps` (names sort by env steps).
    pub fn checkpoint_path(&self, env_steps: u64) -> PathBuf {
        self.checkpoints_dir()
            .join(format!("ck-{env_steps:015}.safetensors"))
    }

    /// Every checkpoint, oldest first.
    pub fn checkpoints(&self) -> Vec<PathBuf> {
        checkpoints_in(&self.checkpoints_dir())
    }

    /// The env steps of the latest checkpoint, read from its name (no
    /// file is opened).
    pub fn latest_checkpoint_env_steps(&self) -> Option<u64> {
        let path = self.latest_checkpoint()?;
        let name = path.file_name()?.to_str()?;
        name.strip_prefix("ck-")?
            .strip_suffix(".safetensors")?
            .parse()
            .ok()
    }

    pub fn latest_checkpoint(&self) -> Option<PathBuf> {
        self.checkpoints().pop()
    }

    /// Takes the run's lock (an exclusive `flock` on `runs/<id>/lock`,
    /// released when the file is dropped or the process dies): one process
    /// runs a recorded run at a time, and two never write its files at
    /// once.
    pub fn lock(&self) -> anyhow::Result<std::fs::File> {
        let path = self.dir.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open `{}`", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
                "run `{}` is being run by another process (its lock `{}` is held)",
                self.id,
                path.display()
            ),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("cannot lock `{}`", path.display()))
            }
        }
    }

    /// The received-batches journal.
    pub fn journal(&self) -> anyhow::Result<Journal> {
        Journal::open(&self.dir.join("received"))
    }
}

/// The `ck-*.safetensors` files of `dir`, oldest first.
pub(crate) fn checkpoints_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ck-") && n.ends_with(".safetensors"))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_records_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../config/cartpole-dqn-single.toml"
        );
        let mut cfg = RunConfig::load(Path::new(path)).unwrap();
        cfg.name = "cp".into();
        let a = state.create_run(&cfg).unwrap();
        let b = state.create_run(&cfg).unwrap();
        assert_eq!((a.id.as_str(), b.id.as_str()), ("cp-1", "cp-2"));
        assert_eq!(a.info().unwrap().state, RecordState::Active);
        a.set_state(RecordState::Stopped, Some("stopped".into()));
        assert_eq!(a.info().unwrap().state, RecordState::Stopped);
        assert_eq!(a.resumed().unwrap().resumes, 1);
        assert_eq!(a.config().unwrap(), cfg);
        assert_eq!(state.records(), vec![a.clone(), b]);
        for steps in [20, 3, 100] {
            std::fs::write(a.checkpoint_path(steps), b"x").unwrap();
        }
        assert_eq!(a.latest_checkpoint(), Some(a.checkpoint_path(100)));
        assert_eq!(a.latest_checkpoint_env_steps(), Some(100));
        let held = a.lock().unwrap();
        let e = a.lock().unwrap_err().to_string();
        assert!(e.contains("another process"), "{e}");
        drop(held);
        a.lock().unwrap();
        assert_eq!(a.checkpoints()[0], a.checkpoint_path(3));
    }
}
