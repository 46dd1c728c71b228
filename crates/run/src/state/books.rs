//! What a checkpoint keeps beside the agent about the run's files and
//! books ([`Books`], JSON in the checkpoint's metadata), and the file
//! helpers that cut a run's output back to a checkpoint.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// What a checkpoint keeps beside the agent (its `books`, as JSON): the
/// run book's own state and the distributed run's (`remote::CoreBooks`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Books {
    pub book: BookState,
    #[serde(default)]
    pub run: Option<serde_json::Value>,
}

/// The run book's part of a checkpoint's books.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BookState {
    /// Bytes of each output file at the checkpoint: a resumed run cuts
    /// them back to these, so its files hold what its state holds.
    pub files: BTreeMap<String, u64>,
    pub recent: Vec<f64>,
    pub last_eval: Option<f64>,
    pub last_confirm: Option<(f64, f64)>,
    pub env_errors: u64,
}

/// Cuts `path` back to `len` bytes if it is longer (a missing file is
/// left alone).
pub fn truncate_to(path: &Path, len: u64) -> std::io::Result<()> {
    match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(f) if f.metadata()?.len() > len => {
            f.set_len(len)?;
            f.sync_all()
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The length of a file (0 when there is none).
pub fn file_len(path: &Path) -> std::io::Result<u64> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}
