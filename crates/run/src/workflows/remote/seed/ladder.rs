//! [`Ladder`]: the `seed` front's exploration rates for R2D2 — each actor
//! env gets the next rung of Ape-X's ladder the first time the front acts
//! for it (the k-th env served acts at rung k mod N), as seed_rl gives
//! each of its envs a fixed epsilon. A reconnected actor's envs are new
//! envs (a few bytes each are kept per connection for the run).

use crate::vocab::ConnId;
use rlfleet_shared::config::R2d2Config;
use std::collections::HashMap;

#[derive(Debug, Default)]
pub(super) struct Ladder {
    /// The agent's ladder (`None`: every row at the published epsilon).
    rungs: Option<R2d2Config>,
    /// Each actor env's place in the order the front first served them.
    index: HashMap<(ConnId, u32), u64>,
}

impl Ladder {
    pub fn new(rungs: Option<R2d2Config>) -> Ladder {
        Ladder {
            rungs,
            index: HashMap::new(),
        }
    }

    /// The rate of each of `rows` (actor envs), in order; empty when the
    /// agent has no ladder.
    pub fn epsilons(&mut self, rows: impl Iterator<Item = (ConnId, u32)>) -> Vec<f32> {
        let Some(cfg) = &self.rungs else {
            return Vec::new();
        };
        rows.map(|row| {
            let next = self.index.len() as u64;
            let k = *self.index.entry(row).or_insert(next);
            cfg.ladder_epsilon(k) as f32
        })
        .collect()
    }
}
