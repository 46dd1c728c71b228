//! [`Layout`]: which world rank is a learner and which an actor (and how
//! many environments each actor runs), learned by every rank from one
//! allgather at start-up.

use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;

/// What a rank runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Learner,
    Actor,
}

impl Role {
    fn code(self) -> u64 {
        match self {
            Role::Learner => 1,
            Role::Actor => 2,
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
}

impl Layout {
    /// Collective over the world: every rank says what it is.
    pub fn exchange(world: &SimpleCommunicator, role: Role, envs: u32) -> Result<Layout, String> {
        let mine = [role.code(), u64::from(envs)];
        let mut all = vec![0u64; 2 * world.size() as usize];
        world.all_gather_into(&mine[..], &mut all[..]);
        let ranks = all
            .chunks(2)
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
        })
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
