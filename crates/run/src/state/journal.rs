//! [`Journal`]: the count of experience batches a run has received, kept
//! in a memory-mapped file of 8 bytes in the run's record. A store into the
//! mapping is a plain memory write (no system call per batch) that the
//! kernel keeps when the process is killed, so a restarted daemon reads how
//! many batches the dead one received and compares it with its last
//! checkpoint: the difference is `batches_lost`. (A machine that loses
//! power may lose the latest stores; a process that dies does not.)

use anyhow::Context;
use memmap2::MmapMut;
use std::path::Path;

#[derive(Debug)]
pub struct Journal {
    map: MmapMut,
}

impl Journal {
    /// Opens (creating, at 0) the journal file.
    pub fn open(path: &Path) -> anyhow::Result<Journal> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("cannot open `{}`", path.display()))?;
        if file.metadata()?.len() != 8 {
            file.set_len(8)?;
        }
        // SAFETY: the file is this run's own, in its record directory; only
        // the process that runs the run maps it (a run is active in one
        // daemon at a time), and its length stays 8 while mapped.
        #[allow(unsafe_code)]
        let map = unsafe { MmapMut::map_mut(&file) }
            .with_context(|| format!("cannot map `{}`", path.display()))?;
        Ok(Journal { map })
    }

    pub fn get(&self) -> u64 {
        u64::from_le_bytes(self.map[..8].try_into().expect("8 bytes"))
    }

    pub fn set(&mut self, received: u64) {
        self.map[..8].copy_from_slice(&received.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("received");
        let mut j = Journal::open(&path).unwrap();
        assert_eq!(j.get(), 0);
        j.set(123_456);
        drop(j);
        assert_eq!(Journal::open(&path).unwrap().get(), 123_456);
        assert_eq!(std::fs::read(&path).unwrap(), 123_456u64.to_le_bytes());
    }
}
