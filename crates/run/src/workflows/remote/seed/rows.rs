//! The rows a `seed` inference batch acts on: each actor env's frame put
//! on its stack ([`ConnStacks`]), and the rows of the pending requests
//! gathered in order.

use super::batcher::Pending;
use crate::vocab::ConnId;
use rlfleet_shared::env::Stacker;
use rlfleet_shared::wire::{Observations, flags};
use std::collections::HashMap;

/// Each actor env's frame stack, per connection (a new connection, new
/// stacks): of values, or of a uint8 run's bytes.
#[derive(Debug, Default)]
pub(super) struct ConnStacks {
    values: HashMap<ConnId, Vec<Stacker>>,
    bytes: HashMap<ConnId, Vec<Stacker<u8>>>,
}

impl ConnStacks {
    /// Puts each of `conn`'s `n_envs` frames in `obs` on its stack, `k`
    /// deep (a fresh episode's first frame fills it), and replaces the
    /// frames with the stacks. `admitted` says which connections are still
    /// in the run: a new one's arrival drops the stacks of those that left.
    pub fn stack(
        &mut self,
        conn: ConnId,
        obs: &mut Observations,
        (n_envs, k): (usize, usize),
        admitted: impl Fn(&ConnId) -> bool,
    ) {
        if !self.values.contains_key(&conn) && !self.bytes.contains_key(&conn) {
            self.values.retain(|c, _| admitted(c));
            self.bytes.retain(|c, _| admitted(c));
        }
        if obs.obs_u8.is_empty() {
            let frame_dim = obs.obs.len() / n_envs.max(1);
            let new = || vec![Stacker::new(k, frame_dim); n_envs];
            let stacks = self.values.entry(conn).or_insert_with(new);
            obs.obs = stack_rows(stacks, &obs.obs, &obs.flags);
        } else {
            let frame_dim = obs.obs_u8.len() / n_envs.max(1);
            let new = || vec![Stacker::new(k, frame_dim); n_envs];
            let stacks = self.bytes.entry(conn).or_insert_with(new);
            obs.obs_u8 = stack_rows(stacks, &obs.obs_u8, &obs.flags);
        }
    }
}

/// Puts each env's frame of `rows` on its stack (a fresh episode's first
/// frame fills it; an idle env's is not acted on) and returns the stacks.
fn stack_rows<T: Copy + Default>(stacks: &mut [Stacker<T>], rows: &[T], flags: &[u8]) -> Vec<T> {
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
