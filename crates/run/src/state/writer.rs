//! [`CheckpointWriter`]: checkpoints serialised and written on a thread of
//! their own. The run thread only copies its state out (the snapshot) and
//! hands it over, so ingest and inference stall for the copy, not for the
//! encoding, the write and the fsyncs. A write that fails (a full disk,
//! an I/O error) is retried with back-off until it lands or a newer
//! checkpoint replaces it; [`WriteHealth`] says how writes are going.

use rlfleet_checkpoint::Checkpoint;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The first retry of a failed write comes this long after it; each
/// next one twice as long after, up to [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_millis(500);
pub const RETRY_MAX: Duration = Duration::from_secs(60);

/// How a run's checkpoint writes are going.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteHealth {
    /// Failed writes (every try), over the run's life in this process.
    pub failures: u64,
    /// Since when every write has failed (none: the last one landed).
    pub failing_since: Option<Instant>,
    /// The error of the last failed write, while failing.
    pub error: Option<String>,
    /// Env steps of the last checkpoint written.
    pub last_good: Option<u64>,
}

impl WriteHealth {
    fn failed(&mut self, e: &anyhow::Error) {
        self.failures += 1;
        if self.failing_since.is_none() {
            // Once per streak; the tries after it are counted, not logged.
            tracing::error!(
                "checkpoint not written (retried with back-off while training goes on): {e:#}"
            );
            self.failing_since = Some(Instant::now());
        }
        self.error = Some(format!("{e:#}"));
    }

    fn written(&mut self, env_steps: u64) {
        if let Some(since) = self.failing_since.take() {
            tracing::info!(
                env_steps,
                failing_secs = since.elapsed().as_secs_f64(),
                "checkpoints written again"
            );
        }
        self.error = None;
        self.last_good = Some(env_steps);
    }
}

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
    health: Arc<Mutex<WriteHealth>>,
}

impl CheckpointWriter {
    pub fn spawn() -> CheckpointWriter {
        CheckpointWriter::with_health(Arc::default(), RETRY_FIRST)
    }

    /// A writer that reports to `health` and retries a failed write
    /// `first` after it, then at twice the wait each time.
    pub fn with_health(health: Arc<Mutex<WriteHealth>>, first: Duration) -> CheckpointWriter {
        let (tx, rx) = mpsc::sync_channel::<Job>(1);
        let h = health.clone();
        let thread = std::thread::Builder::new()
            .name("checkpoint writer".into())
            .spawn(move || write_loop(&rx, &h, first))
            .expect("spawn checkpoint writer");
        CheckpointWriter {
            tx: Some(tx),
            thread: Some(thread),
            health,
        }
    }

    /// How writes are going.
    pub fn health(&self) -> WriteHealth {
        self.health.lock().expect("health lock").clone()
    }

    /// The health this writer reports to (a writer spawned after it may
    /// report there too).
    pub fn health_handle(&self) -> Arc<Mutex<WriteHealth>> {
        self.health.clone()
    }

    /// A checkpoint that failed before it reached the writer (its output
    /// files could not be written first): counted as a failed write.
    pub fn failed(&self, e: &anyhow::Error) {
        self.health.lock().expect("health lock").failed(e);
    }

    /// Writes `ck` at once, on this thread, reporting to the health.
    pub fn write_now(&self, ck: &Checkpoint, to: &Destination) -> anyhow::Result<()> {
        attempt(ck, to, &self.health)
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

/// The writer thread: each checkpoint handed over is written; one that
/// fails is tried again with back-off, until it lands, a newer one
/// replaces it, or the writer is finished (one last try).
fn write_loop(rx: &Receiver<Job>, health: &Mutex<WriteHealth>, first: Duration) {
    let mut failed: Option<Job> = None;
    let mut wait = first;
    loop {
        let next = match &failed {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(_) => rx.recv_timeout(wait),
        };
        let job = match next {
            Ok(job) => {
                // A newer checkpoint replaces one that failed.
                failed = None;
                wait = first;
                job
            }
            Err(RecvTimeoutError::Timeout) => {
                wait = (wait * 2).min(RETRY_MAX);
                failed.take().expect("a failed job waits")
            }
            Err(RecvTimeoutError::Disconnected) => {
                if let Some(job) = failed.take() {
                    let _ = attempt(&job.ck, &job.to, health);
                }
                return;
            }
        };
        if attempt(&job.ck, &job.to, health).is_err() {
            failed = Some(job);
        }
    }
}

/// One try at writing `ck`, reported to `health`.
fn attempt(ck: &Checkpoint, to: &Destination, health: &Mutex<WriteHealth>) -> anyhow::Result<()> {
    let result = write(ck, to);
    let mut h = health.lock().expect("health lock");
    match &result {
        Ok(()) => h.written(ck.counters.env_steps),
        Err(e) => h.failed(e),
    }
    result
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

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_checkpoint::{AgentState, NamedTensor, RunCounters};

    fn ck(env_steps: u64) -> Checkpoint {
        Checkpoint {
            env: "CartPole-v1".into(),
            agent: "dqn".into(),
            counters: RunCounters {
                env_steps,
                episodes: 1,
                wall_secs: 1.0,
            },
            agent_state: AgentState {
                tensors: vec![NamedTensor {
                    name: "online".into(),
                    shape: vec![2],
                    data: vec![1.0, 2.0],
                }],
                train_steps: 1,
                version: 1,
                optimizer_steps: 1,
            },
            best: None,
            books: None,
            replay: None,
        }
    }

    fn wait_for(writer: &CheckpointWriter, what: &str, done: impl Fn(&WriteHealth) -> bool) {
        let t0 = Instant::now();
        while !done(&writer.health()) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "never {what}: {:?}",
                writer.health()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A folder that cannot be written (its place is taken by a file:
    /// ENOTDIR, whoever runs the test) fails every try, each counted;
    /// once it can be, the retry lands without a new checkpoint.
    #[test]
    fn a_failed_write_is_retried_with_back_off_until_it_lands() {
        let dir = tempfile::tempdir().unwrap();
        let blocked = dir.path().join("checkpoints");
        std::fs::write(&blocked, b"not a folder").unwrap();
        let to = Destination {
            path: blocked.join("ck-100.safetensors"),
            latest: None,
            keep: 0,
        };
        let mut writer = CheckpointWriter::with_health(Arc::default(), Duration::from_millis(20));
        assert!(writer.submit(ck(100), to.clone()));
        wait_for(&writer, "failed three times", |h| h.failures >= 3);
        let h = writer.health();
        assert!(h.failing_since.is_some() && h.last_good.is_none(), "{h:?}");
        assert!(h.error.as_deref().unwrap().contains("ck-100"), "{h:?}");
        std::fs::remove_file(&blocked).unwrap();
        std::fs::create_dir(&blocked).unwrap();
        wait_for(&writer, "written", |h| h.last_good == Some(100));
        let h = writer.health();
        assert_eq!((h.failing_since, h.error.as_deref()), (None, None));
        assert!(to.path.exists());
        // No temporary file of a failed try is left behind.
        let names: Vec<_> = std::fs::read_dir(&blocked)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // A newer checkpoint replaces one still failing.
        let other = Destination {
            path: dir.path().join("nowhere/ck-200.safetensors"),
            ..to.clone()
        };
        assert!(writer.submit(ck(200), other));
        wait_for(&writer, "failing again", |h| h.failing_since.is_some());
        let failures = writer.health().failures;
        assert!(writer.submit(
            ck(300),
            Destination {
                path: blocked.join("ck-300.safetensors"),
                ..to
            }
        ));
        wait_for(&writer, "the newer one written", |h| {
            h.last_good == Some(300)
        });
        writer.finish();
        let h = writer.health();
        assert!(h.failures >= failures && h.failing_since.is_none(), "{h:?}");
    }
}
