//! [`ReplayImage`]: a replay's contents as named flat arrays and counters,
//! what a checkpoint with `checkpoint.replay = true` stores and a resumed
//! run puts back, exactly.

use std::collections::BTreeMap;

/// How a [`Blob`]'s bytes are to be read (little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobType {
    U8,
    F32,
    F64,
}

impl BlobType {
    pub fn width(self) -> usize {
        match self {
            BlobType::U8 => 1,
            BlobType::F32 => 4,
            BlobType::F64 => 8,
        }
    }
}

/// One flat array of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Blob {
    pub dtype: BlobType,
    pub bytes: Vec<u8>,
}

impl Blob {
    pub fn f32(values: &[f32]) -> Blob {
        Blob {
            dtype: BlobType::F32,
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    pub fn f64(values: &[f64]) -> Blob {
        Blob {
            dtype: BlobType::F64,
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    pub fn u8(values: &[u8]) -> Blob {
        Blob {
            dtype: BlobType::U8,
            bytes: values.to_vec(),
        }
    }

    /// Values of the blob's own type.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.dtype.width()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// A replay's arrays (by name) and counters (by name), enough to rebuild
/// it exactly.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayImage {
    pub blobs: BTreeMap<String, Blob>,
    pub counters: BTreeMap<String, u64>,
}

/// Why an image does not fit a replay.
#[derive(Debug, thiserror::Error)]
#[error("the checkpoint's replay does not fit this run: {0}")]
pub struct ImageError(pub String);

impl ReplayImage {
    /// The saved ring's length and head, once its `shape` counters (name,
    /// this ring's value; `capacity` first) equal this ring's: an image of
    /// another ring is refused by the counter that differs.
    pub fn ring(&self, shape: &[(&str, usize)]) -> Result<(usize, usize), ImageError> {
        for &(name, want) in shape {
            let got = self.counter(name)?;
            if got != want as u64 {
                return Err(ImageError(format!(
                    "its replay's {name} is {got}, this run's is {want}"
                )));
            }
        }
        let capacity = shape.first().map_or(0, |&(_, c)| c);
        let (n, head) = (
            self.counter("len")? as usize,
            self.counter("head")? as usize,
        );
        if n > capacity || head >= capacity || (n < capacity && head != n) {
            return Err(ImageError(format!(
                "len {n} and head {head} do not fit a ring of {capacity}"
            )));
        }
        Ok((n, head))
    }

    pub fn counter(&self, name: &str) -> Result<u64, ImageError> {
        self.counters
            .get(name)
            .copied()
            .ok_or_else(|| ImageError(format!("no counter `{name}`")))
    }

    /// The blob `name`, checked to hold `len` values of `dtype`.
    pub fn blob(&self, name: &str, dtype: BlobType, len: usize) -> Result<&[u8], ImageError> {
        let b = self
            .blobs
            .get(name)
            .ok_or_else(|| ImageError(format!("no array `{name}`")))?;
        if b.dtype != dtype || b.len() != len || b.bytes.len() % dtype.width() != 0 {
            return Err(ImageError(format!(
                "array `{name}` holds {} {:?} values, expected {len} {dtype:?}",
                b.len(),
                b.dtype
            )));
        }
        Ok(&b.bytes)
    }

    pub fn f32s(&self, name: &str, len: usize) -> Result<Vec<f32>, ImageError> {
        Ok(self
            .blob(name, BlobType::F32, len)?
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    pub fn f64s(&self, name: &str, len: usize) -> Result<Vec<f64>, ImageError> {
        Ok(self
            .blob(name, BlobType::F64, len)?
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }
}
