//! [`Checkpoint`]: an agent's state (networks, optimizer moments, counters),
//! the run's counters and the best evaluated weights, the distributed
//! run's books (JSON, `workflows::remote::Books`) and, optionally, the
//! replay's contents, in one safetensors file written atomically
//! (temporary file, fsync, rename, fsync of the directory), so a crash
//! leaves the previous checkpoint or the new one, never a torn file.

use crate::replay_image::{Blob, BlobType, ReplayImage};
use crate::state::{AgentState, NamedTensor, Weights};
use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const FORMAT: &str = "rlfleet-checkpoint-v1";

/// The run's counters at the time of the checkpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunCounters {
    pub env_steps: u64,
    /// Finished episodes.
    pub episodes: u64,
    /// Wall time spent in the run so far, over all its sessions.
    pub wall_secs: f64,
}

/// The best evaluation so far and the weights that achieved it.
#[derive(Debug, Clone, PartialEq)]
pub struct BestEval {
    pub mean_return: f64,
    pub env_steps: u64,
    pub weights: Weights,
}

/// Everything a run needs to resume.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub env: String,
    pub agent: String,
    pub counters: RunCounters,
    pub agent_state: AgentState,
    pub best: Option<BestEval>,
    /// What a run keeps beside the agent (ledger, batch accounts, dedup
    /// keys, file lengths), as JSON; `None` from runs that keep none.
    pub books: Option<String>,
    /// The replay's contents (`checkpoint.replay = true`).
    pub replay: Option<ReplayImage>,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("cannot write checkpoint `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read checkpoint `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{}` is not an rlfleet checkpoint: {reason}", path.display())]
    Format { path: PathBuf, reason: String },
    #[error("checkpoint `{}` was written for {found}, this run is {expected}", path.display())]
    Mismatch {
        path: PathBuf,
        found: String,
        expected: String,
    },
}

/// One tensor of the file: name, dtype, shape, bytes.
type Entry<'a> = (String, Dtype, Vec<usize>, std::borrow::Cow<'a, [u8]>);

fn f32_bytes(data: &[f32]) -> Vec<u8> {
    data.iter().flat_map(|v| v.to_le_bytes()).collect()
}

impl Checkpoint {
    /// Writes the checkpoint atomically to `path`.
    pub fn save(&self, path: &Path) -> Result<(), CheckpointError> {
        let err = |source| CheckpointError::Write {
            path: path.to_path_buf(),
            source,
        };
        let mut tensors: Vec<Entry<'_>> = self
            .agent_state
            .tensors
            .iter()
            .map(|t| {
                (
                    format!("agent.{}", t.name),
                    Dtype::F32,
                    t.shape.clone(),
                    f32_bytes(&t.data).into(),
                )
            })
            .collect();
        let mut meta = HashMap::from([
            ("format".to_string(), FORMAT.to_string()),
            ("env".into(), self.env.clone()),
            ("agent".into(), self.agent.clone()),
            ("env_steps".into(), self.counters.env_steps.to_string()),
            ("episodes".into(), self.counters.episodes.to_string()),
            ("wall_secs".into(), self.counters.wall_secs.to_string()),
            (
                "train_steps".into(),
                self.agent_state.train_steps.to_string(),
            ),
            ("version".into(), self.agent_state.version.to_string()),
            (
                "optimizer_steps".into(),
                self.agent_state.optimizer_steps.to_string(),
            ),
        ]);
        if let Some(books) = &self.books {
            meta.insert("books".into(), books.clone());
        }
        if let Some(replay) = &self.replay {
            for (name, b) in &replay.blobs {
                let dtype = match b.dtype {
                    BlobType::U8 => Dtype::U8,
                    BlobType::F32 => Dtype::F32,
                    BlobType::F64 => Dtype::F64,
                };
                tensors.push((
                    format!("replay.{name}"),
                    dtype,
                    vec![b.len()],
                    b.bytes.as_slice().into(),
                ));
            }
            for (name, v) in &replay.counters {
                meta.insert(format!("replay.{name}"), v.to_string());
            }
        }
        if let Some(best) = &self.best {
            tensors.push((
                "best".into(),
                Dtype::F32,
                vec![best.weights.data.len()],
                f32_bytes(&best.weights.data).into(),
            ));
            meta.insert("best_mean_return".into(), best.mean_return.to_string());
            meta.insert("best_env_steps".into(), best.env_steps.to_string());
            meta.insert("best_version".into(), best.weights.version.to_string());
        }
        let views: Vec<(String, TensorView<'_>)> = tensors
            .iter()
            .map(|(name, dtype, shape, bytes)| {
                (
                    name.clone(),
                    TensorView::new(*dtype, shape.clone(), bytes).expect("shape matches data"),
                )
            })
            .collect();
        let bytes =
            safetensors::serialize(views, Some(meta)).map_err(|e| err(std::io::Error::other(e)))?;
        write_atomically(path, &bytes).map_err(err)
    }

    /// Reads and checks a checkpoint.
    pub fn load(path: &Path) -> Result<Checkpoint, CheckpointError> {
        let bytes = std::fs::read(path).map_err(|source| CheckpointError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Checkpoint::from_bytes(&bytes, path)
    }

    /// Parses and checks a checkpoint's bytes (`path` names it in errors).
    /// Any bytes give a checkpoint or a [`CheckpointError::Format`], never a
    /// panic (fuzzed: `fuzz/fuzz_targets/checkpoint.rs`).
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Checkpoint, CheckpointError> {
        let bad = |reason: String| CheckpointError::Format {
            path: path.to_path_buf(),
            reason,
        };
        let st = SafeTensors::deserialize(bytes).map_err(|e| bad(e.to_string()))?;
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| bad(e.to_string()))?;
        let meta = header.metadata().clone().unwrap_or_default();
        let get = |k: &str| {
            meta.get(k)
                .cloned()
                .ok_or_else(|| bad(format!("metadata has no `{k}`")))
        };
        if get("format")? != FORMAT {
            return Err(bad(format!(
                "format is `{}`, expected `{FORMAT}`",
                get("format")?
            )));
        }
        let num = |k: &str| -> Result<u64, CheckpointError> {
            get(k)?
                .parse()
                .map_err(|_| bad(format!("metadata `{k}` is not a number")))
        };
        let read = |name: &str| -> Result<(Vec<usize>, Vec<f32>), CheckpointError> {
            let t = st
                .tensor(name)
                .map_err(|e| bad(format!("tensor `{name}`: {e}")))?;
            if t.dtype() != Dtype::F32 {
                return Err(bad(format!(
                    "tensor `{name}` is {:?}, expected F32",
                    t.dtype()
                )));
            }
            let data = t
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Ok((t.shape().to_vec(), data))
        };
        let mut tensors = vec![];
        let mut names: Vec<String> = st
            .names()
            .into_iter()
            .filter(|n| n.starts_with("agent."))
            .map(str::to_string)
            .collect();
        names.sort();
        for name in names {
            let (shape, data) = read(&name)?;
            tensors.push(NamedTensor {
                name: name["agent.".len()..].to_string(),
                shape,
                data,
            });
        }
        let mut replay = None::<ReplayImage>;
        for name in st.names() {
            let Some(key) = name.strip_prefix("replay.") else {
                continue;
            };
            let t = st
                .tensor(name)
                .map_err(|e| bad(format!("tensor `{name}`: {e}")))?;
            let dtype = match t.dtype() {
                Dtype::U8 => BlobType::U8,
                Dtype::F32 => BlobType::F32,
                Dtype::F64 => BlobType::F64,
                other => return Err(bad(format!("tensor `{name}` is {other:?}"))),
            };
            replay.get_or_insert_default().blobs.insert(
                key.to_string(),
                Blob {
                    dtype,
                    bytes: t.data().to_vec(),
                },
            );
        }
        for (k, v) in &meta {
            if let Some(key) = k.strip_prefix("replay.") {
                let v = v
                    .parse()
                    .map_err(|_| bad(format!("metadata `{k}` is not a number")))?;
                replay
                    .get_or_insert_default()
                    .counters
                    .insert(key.to_string(), v);
            }
        }
        let best = match meta.get("best_mean_return") {
            None => None,
            Some(r) => Some(BestEval {
                mean_return: r
                    .parse()
                    .map_err(|_| bad("metadata `best_mean_return` is not a number".into()))?,
                env_steps: num("best_env_steps")?,
                weights: Weights {
                    version: num("best_version")?,
                    data: read("best")?.1,
                },
            }),
        };
        Ok(Checkpoint {
            env: get("env")?,
            agent: get("agent")?,
            counters: RunCounters {
                env_steps: num("env_steps")?,
                episodes: num("episodes")?,
                wall_secs: get("wall_secs")?
                    .parse()
                    .map_err(|_| bad("metadata `wall_secs` is not a number".into()))?,
            },
            agent_state: AgentState {
                tensors,
                train_steps: num("train_steps")?,
                version: num("version")?,
                optimizer_steps: num("optimizer_steps")?,
            },
            best,
            books: meta.get("books").cloned(),
            replay,
        })
    }

    /// Errors unless the checkpoint was written for this env and agent.
    pub fn check_matches(
        &self,
        path: &Path,
        env: &str,
        agent: &str,
    ) -> Result<(), CheckpointError> {
        if self.env != env || self.agent != agent {
            return Err(CheckpointError::Mismatch {
                path: path.to_path_buf(),
                found: format!("env {} with agent {}", self.env, self.agent),
                expected: format!("env {env} with agent {agent}"),
            });
        }
        Ok(())
    }
}

/// Writes `bytes` to `path` so that readers see the old file or the new one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        // A half-written file (a full disk) takes no space from the next try.
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            env: "CartPole-v1".into(),
            agent: "dqn".into(),
            counters: RunCounters {
                env_steps: 1234,
                episodes: 56,
                wall_secs: 7.5,
            },
            agent_state: AgentState {
                tensors: vec![
                    NamedTensor {
                        name: "online".into(),
                        shape: vec![3],
                        data: vec![1.0, -2.0, 3.5],
                    },
                    NamedTensor {
                        name: "target".into(),
                        shape: vec![3],
                        data: vec![0.0, 0.25, f32::MIN],
                    },
                ],
                train_steps: 99,
                version: 99,
                optimizer_steps: 98,
            },
            best: Some(BestEval {
                mean_return: 480.5,
                env_steps: 1000,
                weights: Weights {
                    version: 77,
                    data: vec![9.0, 8.0, 7.0],
                },
            }),
            books: Some(r#"{"ledger":{"next":3}}"#.into()),
            replay: Some(ReplayImage {
                blobs: [
                    ("obs".to_string(), Blob::u8(&[0, 7, 255])),
                    ("rewards".to_string(), Blob::f32(&[1.5, -0.0])),
                    ("priorities".to_string(), Blob::f64(&[0.25, 1e300])),
                ]
                .into(),
                counters: [("head".to_string(), 2), ("len".to_string(), 2)].into(),
            }),
        }
    }

    #[test]
    fn round_trips_exactly_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint.safetensors");
        let ck = sample();
        ck.save(&path).unwrap();
        assert_eq!(Checkpoint::load(&path).unwrap(), ck);
        let files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            files,
            vec![std::ffi::OsString::from("checkpoint.safetensors")]
        );
    }

    #[test]
    fn garbage_and_mismatches_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.safetensors");
        std::fs::write(&path, b"not a checkpoint").unwrap();
        let e = Checkpoint::load(&path).unwrap_err().to_string();
        assert!(e.contains("is not an rlfleet checkpoint"), "{e}");
        let e = sample()
            .check_matches(&path, "Acrobot-v1", "dqn")
            .unwrap_err()
            .to_string();
        assert!(e.contains("CartPole-v1") && e.contains("Acrobot-v1"), "{e}");
        let e = Checkpoint::load(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("cannot read checkpoint"), "{e}");
    }
}
