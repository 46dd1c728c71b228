//! [`Layout`]: which world rank is a learner and which an actor (and how
//! many environments each actor runs), learned by every rank from one
//! allgather at start-up; with `ranks_per_env` above 1, the actor ranks
//! form env groups whose first rank is the actor ([`Layout::form_groups`]).

use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;

/// What a rank runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Learner,
    Actor,
    /// A rank of an env group other than its leader: it steps the group's
    /// envs with the leader and never talks to a learner.
    EnvRank,
}

impl Role {
    fn code(self) -> u64 {
        match self {
            Role::Learner => 1,
            Role::Actor | Role::EnvRank => 2,
        }
    }
}

/// Every rank's role, as each rank sees it after [`Layout::exchange`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// This rank in `MPI_COMM_WORLD`.
    pub rank: i32,
    /// Per world rank: its role and (actors) its environment count.
    pub ranks: Vec<(Role, u32)>,
    /// Per world rank: the `--ranks-per-env` it was started with (0 for
    /// learners).
    pub announced: Vec<u32>,
    /// The env groups, each led by its first rank, once formed.
    pub groups: Vec<Vec<i32>>,
}

impl Layout {
    /// Collective over the world: every rank says what it is.
    /// Actor ranks also say how many ranks each env spans.
    pub fn exchange(
        world: &SimpleCommunicator,
        role: Role,
        envs: u32,
        ranks_per_env: u32,
    ) -> Result<Layout, String> {
        let mine = [role.code(), u64::from(envs), u64::from(ranks_per_env)];
        let mut all = vec![0u64; 3 * world.size() as usize];
        world.all_gather_into(&mine[..], &mut all[..]);
        let ranks = all
            .chunks(3)
            .enumerate()
            .map(|(r, c)| match c[0] {
                1 => Ok((Role::Learner, 0)),
                2 => Ok((Role::Actor, c[1] as u32)),
                other => Err(format!("rank {r} announced an unknown role {other}")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Layout {
            rank: world.rank(),
            ranks,
            announced: all.chunks(3).map(|c| c[2] as u32).collect(),
            groups: Vec::new(),
        })
    }

    /// Splits the actor ranks into env groups of `k` consecutive ranks:
    /// each group's first rank stays the actor, the others become
    /// [`Role::EnvRank`]s. Every rank computes the same groups. Fails,
    /// naming the rank, when a rank announced another `k` or the actor
    /// ranks do not divide by `k`.
    pub fn form_groups(&mut self, k: u32) -> Result<(), String> {
        let actors: Vec<(i32, u32)> = self
            .actors()
            .into_iter()
            .map(|r| (r, self.announced[r as usize]))
            .collect();
        let groups = super::env_comm::env_groups(&actors, k)?;
        for g in &groups {
            for &r in &g[1..] {
                self.ranks[r as usize].0 = Role::EnvRank;
            }
        }
        self.groups = groups;
        Ok(())
    }

    /// The env group `rank` belongs to: its index and its ranks.
    pub fn group_of(&self, rank: i32) -> Option<(usize, &[i32])> {
        self.groups
            .iter()
            .enumerate()
            .find(|(_, g)| g.contains(&rank))
            .map(|(i, g)| (i, &g[..]))
    }

    fn with_role(&self, role: Role) -> Vec<i32> {
        (0..self.ranks.len() as i32)
            .filter(|&r| self.ranks[r as usize].0 == role)
            .collect()
    }

    pub fn learners(&self) -> Vec<i32> {
        self.with_role(Role::Learner)
    }

    pub fn actors(&self) -> Vec<i32> {
        self.with_role(Role::Actor)
    }

    /// The learner that talks to actors (the lowest learner rank).
    pub fn lead_learner(&self) -> Option<i32> {
        self.learners().first().copied()
    }

    /// Environments an actor rank runs (0 for learners).
    pub fn envs(&self, rank: i32) -> u32 {
        self.ranks.get(rank as usize).map_or(0, |r| r.1)
    }
}
