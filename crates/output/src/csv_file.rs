//! CSV files through the `csv` crate and serde: [`CsvFile`], an appender
//! of one record type (its header written when the file is new), and
//! [`read_csv`], which reads such a file back field by field — quoting
//! handled both ways, integers read as integers.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::{File, OpenOptions};
use std::marker::PhantomData;
use std::path::Path;

/// Rows of `T` appended to one file.
#[derive(Debug)]
pub struct CsvFile<T> {
    writer: csv::Writer<File>,
    rows: PhantomData<fn(&T)>,
}

impl<T: Serialize> CsvFile<T> {
    /// Opens `path` for appending (a resumed run keeps its rows), or, with
    /// `truncate`, empties it; the header (from `T`'s field names) goes
    /// first when the file is empty. Creates the directory.
    pub fn open(path: &Path, truncate: bool) -> std::io::Result<CsvFile<T>> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .append(!truncate)
            .truncate(truncate)
            .open(path)?;
        let fresh = file.metadata()?.len() == 0;
        let writer = csv::WriterBuilder::new()
            .has_headers(fresh)
            .from_writer(file);
        Ok(CsvFile {
            writer,
            rows: PhantomData,
        })
    }

    /// Appends one row (buffered: see [`CsvFile::flush`]).
    pub fn write(&mut self, row: &T) -> std::io::Result<()> {
        self.writer.serialize(row).map_err(into_io)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }

    /// Flushes, then the file's length in bytes.
    pub fn file_len(&mut self) -> std::io::Result<u64> {
        self.writer.flush()?;
        Ok(self.writer.get_ref().metadata()?.len())
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
