//! [`Fleet`]: which active run each connected actor serves, sans-IO. Each
//! run's share of the fleet, counted in envs, follows its `[fleet]
//! weight` within `min_envs`/`max_envs`: a new actor goes to the run
//! furthest below its share ([`Fleet::pick`]), and [`Fleet::rebalance`]
//! names the actors to move when runs start or actors leave — only while
//! a move brings the shares closer, so two runs never trade an actor back
//! and forth.

use rlfleet_shared::config::FleetConfig;
use std::collections::BTreeMap;

/// An active run as the fleet weighs it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunShare {
    pub id: String,
    pub name: String,
    pub share: FleetConfig,
}

/// A connected actor as the fleet sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Member {
    /// Envs it runs (its `Hello`'s capacity; at least 1 counted).
    pub envs: u32,
    /// The run it serves now.
    pub run: Option<String>,
    /// The run it was told to move to (it leaves `run` first).
    pub moving_to: Option<String>,
    /// It serves this run alone (an id or a name; `--run`).
    pub pin: Option<String>,
    /// It leaves when its first run ends (`--once`): never moved.
    pub once: bool,
    /// Runs it declined (it cannot build their env), never offered again.
    pub declined: Vec<String>,
}

/// Runs in the order they started, and the actors by connection.
#[derive(Debug, Default)]
pub struct Fleet {
    pub runs: Vec<RunShare>,
    pub members: BTreeMap<u64, Member>,
}

/// Whether run `r`, holding `have` envs, can take `envs` more without
/// passing its maximum.
fn has_room(r: &RunShare, have: u32, envs: u32) -> bool {
    r.share.max_envs.is_none_or(|max| have + envs <= max)
}

/// Where a run stands: below its minimum first, then by envs per unit of
/// weight (lower is hungrier).
fn hunger(r: &RunShare, envs: u32) -> (bool, f64) {
    (envs >= r.share.min_envs, f64::from(envs) / r.share.weight)
}

impl Member {
    fn counted(&self) -> u32 {
        self.envs.max(1)
    }

    /// Whether it is counted in run `id`'s share: it serves it and is not
    /// leaving, or it is on its way there.
    fn counts_in(&self, id: &str) -> bool {
        match &self.moving_to {
            Some(to) => to == id,
            None => self.run.as_deref() == Some(id),
        }
    }

    fn may_serve(&self, r: &RunShare) -> bool {
        self.pin.as_ref().is_none_or(|p| *p == r.id || *p == r.name)
            && !self.declined.contains(&r.id)
    }

    fn movable(&self) -> bool {
        self.pin.is_none() && !self.once && self.moving_to.is_none() && self.run.is_some()
    }
}

impl Fleet {
    /// Envs counted in run `id`'s share.
    pub fn envs_of(&self, id: &str) -> u32 {
        self.members
            .values()
            .filter(|m| m.counts_in(id))
            .map(Member::counted)
            .sum()
    }

    /// Envs counted in each active run's share, in one pass over the
    /// members (the choices below read it per run and per candidate).
    fn counts(&self) -> BTreeMap<&str, u32> {
        let mut counts: BTreeMap<&str, u32> =
            self.runs.iter().map(|r| (r.id.as_str(), 0)).collect();
        for m in self.members.values() {
            let to = m.moving_to.as_deref().or(m.run.as_deref());
            if let Some(n) = to.and_then(|id| counts.get_mut(id)) {
                *n += m.counted();
            }
        }
        counts
    }

    /// The run actor `conn` should serve now (recorded), or `None` when no
    /// active run will take it.
    pub fn pick(&mut self, conn: u64) -> Option<String> {
        let m = self.members.get(&conn)?;
        let envs = m.counted();
        let counts = self.counts();
        let chosen = match m.moving_to.as_ref() {
            Some(to) if counts.contains_key(to.as_str()) => Some(to.clone()),
            _ => self
                .runs
                .iter()
                .filter(|r| m.may_serve(r) && has_room(r, counts[r.id.as_str()], envs))
                .min_by(|a, b| {
                    let (ha, hb) = (
                        hunger(a, counts[a.id.as_str()]),
                        hunger(b, counts[b.id.as_str()]),
                    );
                    ha.partial_cmp(&hb).expect("finite shares")
                })
                .map(|r| r.id.clone()),
        }?;
        let m = self.members.get_mut(&conn).expect("looked up above");
        m.run = Some(chosen.clone());
        m.moving_to = None;
        Some(chosen)
    }

    /// Moves that bring the runs' shares closer, each recorded as the
    /// actor's `moving_to`: `(connection, to)`.
    pub fn rebalance(&mut self) -> Vec<(u64, String)> {
        let mut moves = Vec::new();
        while let Some((conn, to)) = self.best_move() {
            self.members.get_mut(&conn).expect("a member").moving_to = Some(to.clone());
            moves.push((conn, to));
        }
        moves
    }

    /// The one move that helps most, if any helps.
    fn best_move(&self) -> Option<(u64, String)> {
        let counts = self.counts();
        let mut best: Option<(f64, u64, String)> = None;
        for (&conn, m) in self.members.iter().filter(|(_, m)| m.movable()) {
            let from = m.run.as_deref().expect("movable members serve a run");
            let Some(donor) = self.runs.iter().find(|r| r.id == from) else {
                continue;
            };
            let e = m.counted();
            let have = counts[from];
            let over_max = donor.share.max_envs.is_some_and(|max| have > max);
            if !over_max && have - e < donor.share.min_envs {
                continue;
            }
            let donor_load = f64::from(have) / donor.share.weight;
            for r in self.runs.iter().filter(|r| r.id != from && m.may_serve(r)) {
                let theirs = counts[r.id.as_str()];
                if !has_room(r, theirs, e) {
                    continue;
                }
                let below_min = theirs < r.share.min_envs;
                let after = f64::from(theirs + e) / r.share.weight;
                if !(over_max || below_min || after < donor_load) {
                    continue;
                }
                // The gain: how much hungrier the receiver is than the donor.
                let gain = if over_max || below_min {
                    f64::INFINITY
                } else {
                    donor_load - after
                };
                if best.as_ref().is_none_or(|(g, _, _)| gain > *g) {
                    best = Some((gain, conn, r.id.clone()));
                }
            }
        }
        best.map(|(_, conn, to)| (conn, to))
    }

    /// Run `id` ended: its actors (and those on their way to it) serve no
    /// run until they are picked again.
    pub fn remove_run(&mut self, id: &str) {
        self.runs.retain(|r| r.id != id);
        for m in self.members.values_mut() {
            if m.moving_to.as_deref() == Some(id) {
                m.moving_to = None;
            }
            if m.run.as_deref() == Some(id) {
                m.run = None;
            }
            m.declined.retain(|d| d != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, weight: f64) -> RunShare {
        RunShare {
            id: id.into(),
            name: id.into(),
            share: FleetConfig {
                weight,
                ..FleetConfig::default()
            },
        }
    }

    fn fleet(runs: Vec<RunShare>, actors: u64) -> Fleet {
        let mut f = Fleet {
            runs,
            members: BTreeMap::new(),
        };
        for c in 0..actors {
            f.members.insert(
                c,
                Member {
                    envs: 1,
                    ..Member::default()
                },
            );
        }
        f
    }

    /// Moves every actor told to move, as their sessions would.
    fn settle(f: &mut Fleet) {
        for (conn, _) in f.rebalance() {
            f.members.get_mut(&conn).unwrap().run = None;
            f.pick(conn);
        }
    }

    #[test]
    fn new_actors_fill_the_runs_by_weight() {
        let mut f = fleet(vec![run("a", 1.0), run("b", 3.0)], 8);
        for c in 0..8 {
            f.pick(c).unwrap();
        }
        assert_eq!((f.envs_of("a"), f.envs_of("b")), (2, 6));
        assert!(f.rebalance().is_empty());
    }

    #[test]
    fn a_new_run_takes_its_share_and_a_gone_one_gives_it_back() {
        let mut f = fleet(vec![run("a", 1.0)], 8);
        for c in 0..8 {
            f.pick(c).unwrap();
        }
        f.runs.push(run("b", 3.0));
        let moves = f.rebalance();
        assert_eq!(moves.len(), 6, "{moves:?}");
        assert!(moves.iter().all(|(_, to)| to == "b"));
        settle(&mut f);
        assert_eq!((f.envs_of("a"), f.envs_of("b")), (2, 6));
        f.remove_run("b");
        for c in 0..8 {
            if f.members[&c].run.is_none() {
                assert_eq!(f.pick(c).as_deref(), Some("a"));
            }
        }
        assert_eq!(f.envs_of("a"), 8);
    }

    #[test]
    fn equal_weights_with_an_odd_fleet_do_not_trade_an_actor() {
        let mut f = fleet(vec![run("a", 1.0), run("b", 1.0)], 3);
        for c in 0..3 {
            f.pick(c).unwrap();
        }
        assert_eq!(f.envs_of("a") + f.envs_of("b"), 3);
        assert!(f.rebalance().is_empty());
    }

    #[test]
    fn pins_once_minimum_and_maximum_are_kept() {
        let mut a = run("a", 1.0);
        a.share.max_envs = Some(1);
        let mut b = run("b", 1.0);
        b.share.min_envs = 3;
        let mut f = fleet(vec![a, b, run("c", 1.0)], 6);
        f.members.get_mut(&0).unwrap().pin = Some("c".into());
        f.members.get_mut(&1).unwrap().once = true;
        for c in 0..6 {
            f.pick(c).unwrap();
        }
        assert_eq!(f.members[&0].run.as_deref(), Some("c"));
        assert!(f.envs_of("a") <= 1);
        assert!(f.envs_of("b") >= 3);
        settle(&mut f);
        assert_eq!(f.members[&0].run.as_deref(), Some("c"));
        assert_eq!((f.envs_of("a"), f.envs_of("b"), f.envs_of("c")), (1, 3, 2));
        // A pinned actor waits for its run rather than serve another.
        f.remove_run("c");
        f.members.get_mut(&0).unwrap().run = None;
        assert_eq!(f.pick(0), None);
    }
}
