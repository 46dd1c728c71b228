//! [`StackedRows`]: rows of frame stacks (the observations of an env with
//! `frame_stack` > 1) kept one frame per row: a stack that moves on by one
//! frame from the row before it — the next step of the same play — adds
//! its newest frame only; any other keeps its whole stack. Each row names
//! where its oldest frame is, so a stack is rebuilt by reading `k`
//! consecutive frames from there (on the device, one gather for a batch).
//! With `k` = 1 every row is a frame of its own: plain rows.

use crate::obs_store::{ObsStore, ObsValue};

/// The rows (see the module's documentation).
#[derive(Debug)]
pub struct StackedRows {
    /// Frames of `frame` values each (a uint8 env's as bytes).
    frames: ObsStore,
    frame: usize,
    k: usize,
    /// Each row's oldest frame (its stack is frames `start..start + k`).
    starts: Vec<u32>,
}

impl StackedRows {
    /// No rows yet; rows of `k` frames of `frame` values, kept as bytes
    /// when `bytes`.
    pub fn new(bytes: bool, frame: usize, k: usize) -> StackedRows {
        assert!(frame > 0 && k > 0, "frames of values");
        StackedRows {
            frames: ObsStore::empty(bytes),
            frame,
            k,
            starts: Vec::new(),
        }
    }

    /// Values in one row (a whole stack).
    pub fn row_len(&self) -> usize {
        self.frame * self.k
    }

    /// Frames in a stack.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The frames, `frame` values each.
    pub fn frames(&self) -> &ObsStore {
        &self.frames
    }

    /// Each row's oldest frame.
    pub fn starts(&self) -> &[u32] {
        &self.starts
    }

    /// Appends `row` (a whole stack, oldest frame first): its newest frame
    /// only when its older frames are the last row's newer ones.
    pub fn push_row<T: ObsValue>(&mut self, row: &[T]) {
        let (f, k) = (self.frame, self.k);
        assert_eq!(row.len(), f * k, "a stack of {k} frames of {f} values");
        let follows = self.starts.last().is_some_and(|&s| {
            let s = s as usize;
            s + k == self.frames.len() / f && self.frames.equals((s + 1) * f, &row[..(k - 1) * f])
        });
        let frames = self.frames.len() / f;
        if follows {
            self.frames.push_row(&row[(k - 1) * f..]);
            self.starts.push((frames + 1 - k) as u32);
        } else {
            self.frames.push_row(row);
            self.starts.push(frames as u32);
        }
    }

    /// Row `r` into `out` (`row_len()` values).
    pub fn read_row(&self, r: usize, out: &mut [f32]) {
        self.frames.read(self.starts[r] as usize * self.frame, out);
    }

    /// Bytes the frames and the row starts take.
    pub fn bytes(&self) -> usize {
        self.frames.bytes() + 4 * self.starts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Consecutive stacks keep one frame each; a stack that does not
    /// follow keeps its own; every row reads back whole.
    #[test]
    fn consecutive_stacks_keep_one_frame_each() {
        let mut r = StackedRows::new(true, 2, 3);
        let stack =
            |frames: [u8; 3]| -> Vec<u8> { frames.iter().flat_map(|&x| [x, x + 100]).collect() };
        let rows = [
            stack([1, 1, 1]),
            stack([1, 1, 2]),
            stack([1, 2, 3]),
            stack([2, 3, 4]),
            stack([7, 7, 7]),
            stack([7, 7, 8]),
        ];
        for row in &rows {
            r.push_row(row);
        }
        assert_eq!(r.len(), 6);
        // 3 frames, then one each; 3 again at the break, then one.
        assert_eq!(r.frames().len(), (3 + 3 + 3 + 1) * 2);
        assert_eq!(r.starts(), [0, 1, 2, 3, 6, 7]);
        let mut out = [0f32; 6];
        for (i, row) in rows.iter().enumerate() {
            r.read_row(i, &mut out);
            assert_eq!(out.map(|x| x as u8).to_vec(), *row, "row {i}");
        }
        assert_eq!(r.bytes(), 20 + 24);
        // One frame per stack: plain rows.
        let mut plain = StackedRows::new(false, 2, 1);
        plain.push_row(&[0.5, 1.5]);
        plain.push_row(&[0.5, 1.5]);
        assert_eq!((plain.starts(), plain.frames().len()), (&[0, 1][..], 4));
    }
}
