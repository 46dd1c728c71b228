//! [`Appender`]: a file only ever appended to, whose bytes wait in memory
//! until a flush writes all of them or — when a write fails (a full disk,
//! an I/O error) — none: the file is cut back to its length before the
//! flush and the bytes wait for the next one. So a failing disk never
//! leaves half a row in a file and loses nothing that was written to it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

#[derive(Debug)]
pub struct Appender {
    file: File,
    /// Bytes on disk: the file's length after the last good flush.
    len: u64,
    pending: Vec<u8>,
}

impl Appender {
    /// Opens `path` to append to (with `truncate`, emptied first),
    /// creating it and its folder.
    pub fn open(path: &Path, truncate: bool) -> std::io::Result<Appender> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .append(!truncate)
            .truncate(truncate)
            .open(path)?;
        let len = file.metadata()?.len();
        Ok(Appender {
            file,
            len,
            pending: Vec::new(),
        })
    }

    /// Bytes on disk (what a checkpoint may record as written).
    pub fn len_on_disk(&self) -> u64 {
        self.len
    }

    /// Bytes not on disk yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Adds bytes to write at the next flush (never fails).
    pub fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// Writes every pending byte, or none.
    pub fn flush_to_disk(&mut self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        match self.file.write_all(&self.pending) {
            Ok(()) => {
                self.len += self.pending.len() as u64;
                self.pending.clear();
                Ok(())
            }
            Err(e) => {
                // A part may have landed: cut it off (the file is opened
                // to append, so the next write goes after `len` again).
                let _ = self.file.set_len(self.len);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/dev/full` refuses every write with ENOSPC: nothing is written,
    /// the bytes wait.
    #[test]
    fn a_failed_flush_keeps_its_bytes_and_a_good_one_writes_them_all() {
        let mut full = Appender::open(Path::new("/dev/full"), false).unwrap();
        full.push(b"row 1\n");
        let e = full.flush_to_disk().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28), "{e}");
        assert_eq!(full.pending(), 6);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.csv");
        let mut a = Appender::open(&path, true).unwrap();
        a.push(b"h\n");
        a.push(b"1\n");
        a.flush_to_disk().unwrap();
        assert_eq!((a.len_on_disk(), a.pending()), (4, 0));
        assert_eq!(std::fs::read(&path).unwrap(), b"h\n1\n");
    }
}
