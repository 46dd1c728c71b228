//! CSV files through the `csv` crate and serde: [`CsvFile`], an appender
//! of one record type (its header written when the file is new), and
//! [`read_csv`], which reads such a file back field by field — quoting
//! handled both ways, integers read as integers.

use crate::append::Appender;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use std::path::Path;

/// Rows of `T` appended to one file, through an [`Appender`]: rows wait
/// in memory until a flush writes all of them (or, on a failing disk,
/// none: they wait for the next).
#[derive(Debug)]
pub struct CsvFile<T> {
    file: Appender,
    /// The header goes before the next row (a new file).
    header: bool,
    rows: PhantomData<fn(&T)>,
}

impl<T: Serialize> CsvFile<T> {
    /// Opens `path` for appending (a resumed run keeps its rows), or, with
    /// `truncate`, empties it; the header (from `T`'s field names) goes
    /// first when the file is empty. Creates the directory.
    pub fn open(path: &Path, truncate: bool) -> std::io::Result<CsvFile<T>> {
        let file = Appender::open(path, truncate)?;
        Ok(CsvFile {
            header: file.len_on_disk() == 0,
            file,
            rows: PhantomData,
        })
    }

    /// Appends one row (kept in memory until [`CsvFile::flush`]).
    pub fn write(&mut self, row: &T) -> std::io::Result<()> {
        let mut w = csv::WriterBuilder::new()
            .has_headers(self.header)
            .buffer_capacity(256)
            .from_writer(Vec::new());
        w.serialize(row).map_err(into_io)?;
        let bytes = w.into_inner().map_err(|e| e.into_error())?;
        self.file.push(&bytes);
        self.header = false;
        Ok(())
    }

    /// Writes every row so far to the file, or none.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush_to_disk()
    }

    /// Flushes, then the file's length in bytes.
    pub fn file_len(&mut self) -> std::io::Result<u64> {
        self.flush()?;
        Ok(self.file.len_on_disk())
    }
}

fn into_io(e: csv::Error) -> std::io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(e) => e,
        other => std::io::Error::other(format!("{other:?}")),
    }
}

/// Every row of a CSV file with a header, as `T`; an error names the file
/// and the row that does not read.
pub fn read_csv<T: DeserializeOwned>(path: &Path) -> std::io::Result<Vec<T>> {
    let mut reader = csv::Reader::from_path(path).map_err(into_io)?;
    reader
        .deserialize()
        .map(|row| {
            row.map_err(|e| {
                let at = e.position().map_or(0, |p| p.line());
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: line {at}: {e}", path.display()),
                )
            })
        })
        .collect()
}

/// Serde helpers for the files' number formats.
pub mod format {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Seconds to the millisecond (`12.345`).
    pub fn millis<S: Serializer>(secs: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64((secs * 1000.0).round() / 1000.0)
    }

    /// A flag as `1` or `0`.
    pub fn flag<S: Serializer>(v: &bool, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(u8::from(*v))
    }

    /// `1` or `0` as a flag.
    pub fn read_flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        match u8::deserialize(d)? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(serde::de::Error::custom(format!(
                "a flag is 0 or 1, not {n}"
            ))),
        }
    }
}
