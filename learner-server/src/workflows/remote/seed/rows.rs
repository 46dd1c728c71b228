//! The rows a `seed` inference batch acts on: each actor env's frame put
//! on its stack, and the rows of the pending requests gathered in order.

use super::batcher::Pending;
use rlfleet_shared::env::Stacker;
use rlfleet_shared::wire::flags;

/// Puts each env's frame of `rows` on its stack (a fresh episode's first
/// frame fills it; an idle env's is not acted on) and returns the stacks.
pub(super) fn stack_rows<T: Copy + Default>(
    stacks: &mut [Stacker<T>],
    rows: &[T],
    flags: &[u8],
) -> Vec<T> {
    let Some((frame_dim, depth)) = stacks.first().map(|s| (s.frame_dim(), s.stack().len())) else {
        return Vec::new();
    };
    let mut stacked = Vec::with_capacity(stacks.len() * depth);
    for (i, stack) in stacks.iter_mut().enumerate() {
        let frame = &rows[i * frame_dim..(i + 1) * frame_dim];
        let f = flags[i];
        if f & flags::IDLE != 0 {
            // No episode: whatever it holds is not acted on.
        } else if f & flags::FRESH != 0 {
            stack.reset(frame);
        } else {
            stack.push(frame);
        }
        stacked.extend_from_slice(stack.stack());
    }
    stacked
}

/// The rows the pending requests act for, in order, from each request's
/// `rows` of `od` each.
pub(super) fn gather<T: Copy>(
    pending: &[Pending],
    rows: impl Fn(&Pending) -> &Vec<T>,
    od: usize,
) -> Vec<T> {
    let mut out = Vec::new();
    for p in pending {
        for &i in &p.act {
            let i = i as usize;
            out.extend_from_slice(&rows(p)[i * od..(i + 1) * od]);
        }
    }
    out
}
