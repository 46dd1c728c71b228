//! [`ObsStore`]: a replay's observations — `f32`, or for envs whose
//! observations are uint8 (images) the bytes themselves, a quarter of the
//! memory, handed on as bytes when a batch is sampled. Rows are written as
//! they come ([`ObsValue`]): a byte row goes into a byte store as it is.

use rlfleet_checkpoint::{Blob, BlobType, ImageError, ReplayImage};
use rlfleet_shared::nets::Rows;

/// What an observation row is made of: values, or a uint8 env's bytes.
pub trait ObsValue: Copy {
    fn value(self) -> f32;
    /// The byte a uint8 env gave (a value's integer part, exact for the
    /// 0..=255 such an env produces).
    fn byte(self) -> u8;
}

impl ObsValue for f32 {
    fn value(self) -> f32 {
        self
    }

    fn byte(self) -> u8 {
        self as u8
    }
}

impl ObsValue for u8 {
    fn value(self) -> f32 {
        f32::from(self)
    }

    fn byte(self) -> u8 {
        self
    }
}

/// Rows of observations, `obs_dim` values each.
#[derive(Debug)]
pub enum ObsStore {
    F32(Vec<f32>),
    /// Values 0..=255, exact: uint8 observations arrive as such.
    U8(Vec<u8>),
}

impl ObsStore {
    /// Room for `len` values.
    pub fn new(len: usize, u8_values: bool) -> ObsStore {
        if u8_values {
            ObsStore::U8(vec![0; len])
        } else {
            ObsStore::F32(vec![0.0; len])
        }
    }

    /// No values yet: rows are added with [`ObsStore::push_row`] (an
    /// on-policy agent's trajectory).
    pub fn empty(u8_values: bool) -> ObsStore {
        ObsStore::new(0, u8_values)
    }

    /// Appends `row` (as [`ObsStore::write`] keeps it).
    pub fn push_row<T: ObsValue>(&mut self, row: &[T]) {
        match self {
            ObsStore::F32(v) => v.extend(row.iter().map(|x| x.value())),
            ObsStore::U8(v) => v.extend(row.iter().map(|x| x.byte())),
        }
    }

    /// Replaces every value with `row`.
    pub fn set_row<T: ObsValue>(&mut self, row: &[T]) {
        match self {
            ObsStore::F32(v) => v.clear(),
            ObsStore::U8(v) => v.clear(),
        }
        self.push_row(row);
    }

    /// Values held.
    pub fn len(&self) -> usize {
        match self {
            ObsStore::F32(v) => v.len(),
            ObsStore::U8(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes `row` at value offset `at` (a uint8 store keeps each value's
    /// byte, [`ObsValue::byte`]).
    pub fn write<T: ObsValue>(&mut self, at: usize, row: &[T]) {
        match self {
            ObsStore::F32(v) => {
                for (dst, &x) in v[at..at + row.len()].iter_mut().zip(row) {
                    *dst = x.value();
                }
            }
            ObsStore::U8(v) => {
                for (dst, &x) in v[at..at + row.len()].iter_mut().zip(row) {
                    *dst = x.byte();
                }
            }
        }
    }

    /// Whether the values from offset `at` are `row` (as this store keeps
    /// it: a byte store compares bytes).
    pub fn equals<T: ObsValue>(&self, at: usize, row: &[T]) -> bool {
        match self {
            ObsStore::F32(v) => v[at..at + row.len()]
                .iter()
                .zip(row)
                .all(|(a, b)| *a == b.value()),
            ObsStore::U8(v) => v[at..at + row.len()]
                .iter()
                .zip(row)
                .all(|(a, b)| *a == b.byte()),
        }
    }

    /// Reads `out.len()` values from offset `at` into `out`.
    pub fn read(&self, at: usize, out: &mut [f32]) {
        match self {
            ObsStore::F32(v) => out.copy_from_slice(&v[at..at + out.len()]),
            ObsStore::U8(v) => {
                let n = out.len();
                for (dst, &x) in out.iter_mut().zip(&v[at..at + n]) {
                    *dst = f32::from(x);
                }
            }
        }
    }

    /// Whether the values are kept as bytes.
    /// Rows `at..at + len` (values) as a network takes them.
    pub fn rows(&self, at: usize, len: usize) -> Rows<'_> {
        match self {
            ObsStore::F32(v) => Rows::Values(&v[at..at + len]),
            ObsStore::U8(v) => Rows::Bytes(&v[at..at + len]),
        }
    }

    /// Writes `rows` at `at` (values converted to this store's type).
    pub fn write_rows(&mut self, at: usize, rows: Rows<'_>) {
        match rows {
            Rows::Values(v) => self.write(at, v),
            Rows::Bytes(b) => self.write(at, b),
        }
    }

    /// Appends `rows`.
    pub fn push_rows(&mut self, rows: Rows<'_>) {
        match rows {
            Rows::Values(v) => self.push_row(v),
            Rows::Bytes(b) => self.push_row(b),
        }
    }

    /// Replaces the contents with `rows`.
    pub fn set_rows(&mut self, rows: Rows<'_>) {
        match rows {
            Rows::Values(v) => self.set_row(v),
            Rows::Bytes(b) => self.set_row(b),
        }
    }

    /// Drops the first `n` values.
    pub fn drain_front(&mut self, n: usize) {
        match self {
            ObsStore::F32(v) => drop(v.drain(..n)),
            ObsStore::U8(v) => drop(v.drain(..n)),
        }
    }

    pub fn is_bytes(&self) -> bool {
        matches!(self, ObsStore::U8(_))
    }

    /// Bytes `at..at + len` of a byte store, to write.
    pub fn bytes_mut(&mut self, at: usize, len: usize) -> &mut [u8] {
        match self {
            ObsStore::U8(v) => &mut v[at..at + len],
            ObsStore::F32(_) => panic!("bytes_mut of an f32 store"),
        }
    }

    /// Copies `out.len()` bytes from offset `at` of a byte store.
    pub fn read_bytes(&self, at: usize, out: &mut [u8]) {
        match self {
            ObsStore::U8(v) => out.copy_from_slice(&v[at..at + out.len()]),
            ObsStore::F32(_) => panic!("read_bytes from an f32 store"),
        }
    }

    /// The first `len` values as a checkpoint array.
    pub fn image(&self, len: usize) -> Blob {
        match self {
            ObsStore::F32(v) => Blob::f32(&v[..len]),
            ObsStore::U8(v) => Blob::u8(&v[..len]),
        }
    }

    /// Puts back the first `len` values from the image's array `name`
    /// (of this store's type).
    pub fn restore(&mut self, img: &ReplayImage, name: &str, len: usize) -> Result<(), ImageError> {
        match self {
            ObsStore::F32(v) => v[..len].copy_from_slice(&img.f32s(name, len)?),
            ObsStore::U8(v) => v[..len].copy_from_slice(img.blob(name, BlobType::U8, len)?),
        }
        Ok(())
    }

    /// Bytes the values take.
    pub fn bytes(&self) -> usize {
        match self {
            ObsStore::F32(v) => v.len() * 4,
            ObsStore::U8(v) => v.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_u8_store_keeps_pixels_exactly_in_a_quarter_of_the_bytes() {
        let (mut f, mut b) = (ObsStore::new(6, false), ObsStore::new(6, true));
        let row = [0.0, 1.0, 17.0, 128.0, 254.0, 255.0];
        f.write(0, &row);
        b.write(0, &row);
        let (mut a, mut c) = ([0f32; 6], [0f32; 6]);
        f.read(0, &mut a);
        b.read(0, &mut c);
        assert_eq!((a, c), (row, row));
        assert_eq!((f.bytes(), b.bytes()), (24, 6));
        // Bytes go in as they are, either way.
        let bytes = [0u8, 1, 17, 128, 254, 255];
        f.write(0, &bytes);
        b.write(0, &bytes);
        let mut d = [0u8; 6];
        b.read_bytes(0, &mut d);
        f.read(0, &mut a);
        assert_eq!((d, a), (bytes, row));
    }
}
