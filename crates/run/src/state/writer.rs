//! [`CheckpointWriter`]: checkpoints serialised and written on a thread of
//! their own. The run thread only copies its state out (the snapshot) and
//! hands it over, so ingest and inference stall for the copy, not for the
//! encoding, the write and the fsyncs.

use rlfleet_checkpoint::Checkpoint;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// Where one checkpoint goes.
#[derive(Debug, Clone)]
pub struct Destination {
    /// The file to write (atomically).
    pub path: PathBuf,
    /// Also made to name the new file (a hard link, replaced atomically):
    /// the output directory's `checkpoint.safetensors`.
    pub latest: Option<PathBuf>,
    /// Keep this many `ck-*.safetensors` in `path`'s folder, deleting the
    /// oldest (0: no rotation).
    pub keep: usize,
}

#[derive(Debug)]
struct Job {
    ck: Box<Checkpoint>,
    to: Destination,
}

/// The writer thread and its one-deep queue.
#[derive(Debug)]
pub struct CheckpointWriter {
    tx: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl CheckpointWriter {
    pub fn spawn() -> CheckpointWriter {
        let (tx, rx) = mpsc::sync_channel::<Job>(1);
        let thread = std::thread::Builder::new()
            .name("checkpoint writer".into())
            .spawn(move || {
                for job in rx {
                    if let Err(e) = write(&job.ck, &job.to) {
                        tracing::error!("checkpoint not written: {e:#}");
                    }
                }
            })
            .expect("spawn checkpoint writer");
        CheckpointWriter {
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    /// Queues a checkpoint; false (and nothing queued) when the previous
    /// one is still waiting to be written.
    pub fn submit(&self, ck: Checkpoint, to: Destination) -> bool {
        let tx = self.tx.as_ref().expect("open until finish");
        match tx.try_send(Job {
            ck: Box::new(ck),
            to,
        }) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => false,
            Err(TrySendError::Disconnected(_)) => panic!("the checkpoint writer died"),
        }
    }

    /// Waits until every queued checkpoint is written.
    pub fn finish(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for CheckpointWriter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Writes `ck` where `to` says, links the latest name to it and rotates.
pub fn write(ck: &Checkpoint, to: &Destination) -> anyhow::Result<()> {
    ck.save(&to.path)?;
    if let Some(latest) = &to.latest {
        link_atomically(&to.path, latest)?;
    }
    if to.keep > 0
        && let Some(dir) = to.path.parent()
    {
        let all = super::checkpoints_in(dir);
        for old in &all[..all.len().saturating_sub(to.keep)] {
            std::fs::remove_file(old)?;
        }
    }
    Ok(())
}

/// Makes `name` refer to `target`'s content, atomically: a hard link
/// renamed over it (a copy where the two are on different filesystems).
fn link_atomically(target: &Path, name: &Path) -> anyhow::Result<()> {
    let dir = name
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(".checkpoint.link.tmp");
    let _ = std::fs::remove_file(&tmp);
    if std::fs::hard_link(target, &tmp).is_err() {
        std::fs::copy(target, &tmp)?;
    }
    std::fs::rename(&tmp, name)?;
    Ok(())
}
