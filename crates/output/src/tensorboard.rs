//! [`Board`]: the run's scalars as TensorBoard event files
//! (`events.out.tfevents.*` in the output directory, written with
//! `syntaxdot-summary`), so `tensorboard --logdir runs/` shows every run
//! by its directory name. The x axis is env steps.

use crate::append::Appender;
use crate::event_proto::{HParam, hparams_event, record, text_event};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use syntaxdot_summary::SummaryWriter;

/// How often the event file reaches the disk while the run goes on (the
/// writer asks for a flush after every event; a flush per scalar would be
/// a system call per scalar).
const FLUSH_EVERY: Duration = Duration::from_secs(2);

/// The event file, shared by the summary writer and [`Board::flush`]:
/// events wait in memory until a flush writes all of them, or none.
#[derive(Clone)]
struct Shared(Arc<Mutex<(Appender, Instant)>>);

impl Shared {
    /// Writes the events to the file when `now` says so or
    /// [`FLUSH_EVERY`] has passed since the last flush.
    fn flush_if(&self, now: bool) -> std::io::Result<()> {
        let mut g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if now || g.1.elapsed() >= FLUSH_EVERY {
            g.1 = Instant::now();
            g.0.flush_to_disk()?;
        }
        Ok(())
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        g.0.push(buf);
        Ok(buf.len())
    }

    /// What the summary writer calls after every event: paced, and a
    /// failure is not the event's (it waits in memory for the next
    /// flush; [`Board::flush`] reports it).
    fn flush(&mut self) -> std::io::Result<()> {
        let _ = self.flush_if(false);
        Ok(())
    }
}

/// One TensorBoard event file.
pub struct Board {
    writer: SummaryWriter<Shared>,
    file: Shared,
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Board")
    }
}

impl Board {
    /// A new event file in `dir` (a resumed run adds one; TensorBoard
    /// reads them as one series).
    pub fn create(dir: &Path) -> std::io::Result<Board> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        let name = format!(
            "events.out.tfevents.{}.{host}.{}",
            stamp.as_secs(),
            std::process::id()
        );
        let file = Shared(Arc::new(Mutex::new((
            Appender::open(&dir.join(name), true)?,
            Instant::now(),
        ))));
        Ok(Board {
            writer: SummaryWriter::new(file.clone())?,
            file,
        })
    }

    /// Writes `value` under `tag` at env step `step`.
    pub fn scalar(&mut self, tag: &str, step: u64, value: f64) -> std::io::Result<()> {
        self.writer
            .write_scalar(tag, i64::try_from(step).unwrap_or(i64::MAX), value as f32)
    }

    /// Writes `text` (Markdown) under `tag` at step 0, for TensorBoard's
    /// text plugin.
    pub fn text(&mut self, tag: &str, text: &str) -> std::io::Result<()> {
        self.file
            .write_all(&record(&text_event(wall_time(), 0, tag, text)))
    }

    /// Writes the run's hyperparameters for TensorBoard's hparams plugin.
    pub fn hparams(&mut self, values: &[(String, HParam)]) -> std::io::Result<()> {
        self.file
            .write_all(&record(&hparams_event(wall_time(), values)))
    }

    /// Everything written so far reaches the file now.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush_if(true)
    }
}

/// Seconds since the Unix epoch, as events record them.
fn wall_time() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}
