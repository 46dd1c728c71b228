//! A study's folder in the state directory (`sweeps/<id>/`,
//! `populations/<id>/`): `study.json`, the spec and where the study is,
//! written atomically at every change, so that a daemon killed at any
//! moment finds the study as it was before or after that change.

use anyhow::Context;
use rlfleet_checkpoint::write_atomically;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// Where a study is in its life.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StudyState {
    /// Its task runs (a daemon started again takes it back).
    Active,
    /// Stopped through the API: its runs were stopped, none starts.
    Stopped,
    /// Every trial or member ended.
    Finished,
}

/// One study's folder.
#[derive(Debug, Clone)]
pub struct StudyDir {
    pub id: String,
    pub dir: PathBuf,
}

impl StudyDir {
    /// A new folder `<kind>/<name>-<n>` under `root`, `n` one more than any
    /// there (created exclusively: two processes never take one id).
    pub fn create(root: &Path, kind: &str, name: &str) -> anyhow::Result<StudyDir> {
        let parent = root.join(kind);
        std::fs::create_dir_all(&parent)
            .with_context(|| format!("cannot create `{}`", parent.display()))?;
        let mut n = Self::list(root, kind)
            .iter()
            .filter_map(|s| s.id.rsplit_once('-')?.1.parse::<u64>().ok())
            .max()
            .unwrap_or(0)
            + 1;
        loop {
            let id = format!("{name}-{n}");
            let dir = parent.join(&id);
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(StudyDir { id, dir }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot create `{}`", dir.display()));
                }
            }
        }
    }

    /// Every study of `kind` with a `study.json`, oldest first.
    pub fn list(root: &Path, kind: &str) -> Vec<StudyDir> {
        let Ok(entries) = std::fs::read_dir(root.join(kind)) else {
            return Vec::new();
        };
        let mut out: Vec<(u64, StudyDir)> = entries
            .flatten()
            .filter(|e| e.path().join("study.json").exists())
            .filter_map(|e| {
                let id = e.file_name().to_str()?.to_string();
                let n = id.rsplit_once('-')?.1.parse().ok()?;
                Some((n, StudyDir { id, dir: e.path() }))
            })
            .collect();
        out.sort_by_key(|(n, _)| *n);
        out.into_iter().map(|(_, s)| s).collect()
    }

    pub fn read<T: DeserializeOwned>(&self) -> anyhow::Result<T> {
        let path = self.dir.join("study.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read `{}`", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("`{}` is damaged", path.display()))
    }

    pub fn write<T: Serialize>(&self, value: &T) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(value).expect("plain data serialises");
        write_atomically(&self.dir.join("study.json"), text.as_bytes())
    }
}

/// Where a study's runs write: the root it recorded, or (a record from
/// before roots were recorded) `<base output_dir>/<id>`.
pub fn root_of(recorded: &Option<PathBuf>, base_output_dir: &Path, id: &str) -> PathBuf {
    recorded.clone().unwrap_or_else(|| base_output_dir.join(id))
}

/// Claims the folder a new study's runs write under: `<base>/<id>`, or,
/// when that holds anything already (a study of an earlier state
/// directory that took the same id), the first empty sibling
/// `<base>/<id>-2`, `-3`, … Created here, so the study owns it whole.
pub fn claim_root(base: &Path, id: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(base)
        .with_context(|| format!("cannot create output_dir `{}`", base.display()))?;
    let first = base.join(id);
    for n in 1.. {
        let dir = if n == 1 {
            first.clone()
        } else {
            rlfleet_run::workflows::sibling(&first, n)
        };
        let free = match std::fs::create_dir(&dir) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_none())
            }
            Err(e) => {
                return Err(e).with_context(|| format!("cannot create `{}`", dir.display()));
            }
        };
        if free {
            if n > 1 {
                tracing::warn!(
                    study = %id,
                    "{} holds an earlier study's results: this one writes under {}",
                    first.display(),
                    dir.display()
                );
            }
            return Ok(dir);
        }
    }
    unreachable!("a free sibling is found")
}

/// Writes a CSV (`header`, then `rows`, each already joined) atomically.
pub fn write_csv(path: &Path, header: &[String], rows: &[Vec<String>]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut text = header.join(",");
    text.push('\n');
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| csv_cell(c)).collect();
        text.push_str(&cells.join(","));
        text.push('\n');
    }
    write_atomically(path, text.as_bytes())
}

/// A cell, quoted when it holds a comma, a quote or a line break.
fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// An optional number as a cell (empty when absent).
pub fn cell<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_count_up_and_records_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let a = StudyDir::create(dir.path(), "sweeps", "lr").unwrap();
        let b = StudyDir::create(dir.path(), "sweeps", "lr").unwrap();
        assert_eq!((a.id.as_str(), b.id.as_str()), ("lr-1", "lr-2"));
        a.write(&StudyState::Active).unwrap();
        assert_eq!(a.read::<StudyState>().unwrap(), StudyState::Active);
        // Only folders with a record are studies.
        assert_eq!(StudyDir::list(dir.path(), "sweeps").len(), 1);
        let csv = dir.path().join("x/s.csv");
        write_csv(
            &csv,
            &["a".into(), "b".into()],
            &[vec!["1,2".into(), "x".into()]],
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(csv).unwrap(), "a,b\n\"1,2\",x\n");
    }

    #[test]
    fn a_study_root_that_holds_an_earlier_studys_results_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let first = claim_root(&out, "lr-1").unwrap();
        assert_eq!(first, out.join("lr-1"));
        // Empty: still free (a study that never wrote).
        assert_eq!(claim_root(&out, "lr-1").unwrap(), first);
        std::fs::create_dir(first.join("1")).unwrap();
        let second = claim_root(&out, "lr-1").unwrap();
        assert_eq!(second, out.join("lr-1-2"));
        std::fs::write(second.join("sweep.csv"), "trial\n").unwrap();
        assert_eq!(claim_root(&out, "lr-1").unwrap(), out.join("lr-1-3"));
    }
}
