//! [`CoreStates`]: the recurrent state of every actor env the `seed` front
//! acts for, kept beside its frame stack as SEED RL keeps it: read for each
//! batched forward pass and written back, zeroed at an episode's first
//! observation, and started from zeros for a new connection (an actor that
//! reconnects is a new session; the episodes it had in flight are
//! re-issued and start fresh).

use crate::vocab::ConnId;
use rlfleet_shared::wire::flags;
use std::collections::HashMap;

#[derive(Debug, Default)]
pub(super) struct CoreStates {
    /// Values of one env's state (0: the network has no core).
    len: usize,
    by_conn: HashMap<ConnId, Vec<f32>>,
}

impl CoreStates {
    pub fn new(len: usize) -> CoreStates {
        CoreStates {
            len,
            by_conn: HashMap::new(),
        }
    }

    /// Values of one env's state (0: the network has no core).
    pub fn len(&self) -> usize {
        self.len
    }

    /// A request from `conn` for its envs with their `flags`: a new
    /// connection's envs start from zeros (the states of connections that
    /// `live` no longer has go), and an env whose observation is its
    /// episode's first starts from zeros. Returns how many envs were
    /// zeroed for each cause: (episode starts, a new session).
    pub fn begin(
        &mut self,
        conn: ConnId,
        env_flags: &[u8],
        live: impl Fn(ConnId) -> bool,
    ) -> (u64, u64) {
        if self.len == 0 {
            return (0, 0);
        }
        let len = self.len;
        let mut session = 0;
        if !self.by_conn.contains_key(&conn) {
            self.by_conn.retain(|&c, _| live(c));
            session = env_flags.len() as u64;
        }
        let states = self
            .by_conn
            .entry(conn)
            .or_insert_with(|| vec![0.0; env_flags.len() * len]);
        let mut episodes = 0;
        for (i, &f) in env_flags.iter().enumerate() {
            if f & flags::FRESH != 0 {
                states[i * len..(i + 1) * len].fill(0.0);
                episodes += 1;
            }
        }
        (episodes, session)
    }

    /// The states of `rows` (each an actor env), in order; empty without
    /// a core.
    pub fn gather(&self, rows: impl Iterator<Item = (ConnId, u32)>) -> Vec<f32> {
        let len = self.len;
        let mut out = Vec::new();
        if len == 0 {
            return out;
        }
        for (conn, env) in rows {
            let s = &self.by_conn[&conn];
            let i = env as usize;
            out.extend_from_slice(&s[i * len..(i + 1) * len]);
        }
        out
    }

    /// Writes back the states of `rows` after a forward pass.
    pub fn scatter(&mut self, rows: impl Iterator<Item = (ConnId, u32)>, states: &[f32]) {
        let len = self.len;
        if len == 0 {
            return;
        }
        for (k, (conn, env)) in rows.enumerate() {
            let s = self.by_conn.get_mut(&conn).expect("begun");
            let i = env as usize;
            s[i * len..(i + 1) * len].copy_from_slice(&states[k * len..(k + 1) * len]);
        }
    }

    /// One env's state.
    #[cfg(test)]
    pub fn of(&self, conn: ConnId, env: u32) -> Option<&[f32]> {
        let (len, i) = (self.len, env as usize);
        self.by_conn.get(&conn).map(|s| &s[i * len..(i + 1) * len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// States advance where written, are zeroed at an episode's first
    /// observation only for that env, and a reconnected actor (a new
    /// connection) starts from zeros while the connection it left is
    /// forgotten.
    #[test]
    fn states_are_kept_per_env_and_zeroed_at_episode_starts_and_reconnects() {
        let mut s = CoreStates::new(2);
        let live = |c: ConnId| c == 7;
        assert_eq!(s.begin(7, &[flags::FRESH, flags::FRESH], live), (2, 2));
        assert_eq!(s.gather([(7, 1), (7, 0)].into_iter()), vec![0.0; 4]);
        s.scatter([(7, 1), (7, 0)].into_iter(), &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(s.of(7, 0), Some(&[3.0, 4.0][..]));
        assert_eq!(s.of(7, 1), Some(&[1.0, 2.0][..]));
        // Env 1 begins a new episode, env 0 goes on.
        assert_eq!(s.begin(7, &[0, flags::FRESH], live), (1, 0));
        assert_eq!(
            s.gather([(7, 0), (7, 1)].into_iter()),
            vec![3.0, 4.0, 0.0, 0.0]
        );
        // The actor reconnects as connection 8 mid-episode (no FRESH flag
        // on its first request): zeros, and connection 7 is dropped.
        s.scatter([(7, 1)].into_iter(), &[5.0, 6.0]);
        assert_eq!(s.begin(8, &[0, 0], |c| c == 8), (0, 2));
        assert_eq!(s.gather([(8, 0), (8, 1)].into_iter()), vec![0.0; 4]);
        assert_eq!(s.of(7, 0), None);
        // Without a core nothing is kept.
        let mut none = CoreStates::new(0);
        assert_eq!(none.begin(1, &[flags::FRESH], |_| true), (0, 0));
        assert!(none.gather([(1, 0)].into_iter()).is_empty());
    }
}
