//! [`Cutter`]: cuts each episode into R2D2's sequences as its steps
//! arrive. Sequence k trains on steps `[kU, (k+1)U)` (U = the unroll
//! length) and starts `B` steps earlier (the burn-in, clipped at the
//! episode's start), from the recurrent state the episode had there; so
//! consecutive sequences overlap by `B + 1` observations, every step takes
//! its loss in exactly one sequence, and an episode's first sequence
//! starts from zeros with nothing to burn. An episode's last, shorter
//! sequence goes out when it ends.
//!
//! The state each step starts from is the cutter's own: it advances every
//! open episode's state through the caller's copy of the network as the
//! steps come in, as the actor that played them did.

use rlfleet_replay::{ObsStore, SeqObs, Sequence};
use rlfleet_shared::nets::Rows;
use std::collections::{HashMap, VecDeque};

/// One episode whose steps are still coming.
#[derive(Debug)]
struct Open {
    /// The absolute index of the first step held.
    first: usize,
    /// A uint8 env's observations as bytes.
    obs: ObsStore,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    /// The state before each step a sequence will start at (index, state).
    starts: VecDeque<(usize, Vec<f32>)>,
    /// The state before the next step.
    state: Vec<f32>,
    /// Steps seen.
    next: usize,
    /// Sequences sent out.
    sent: usize,
    /// The observation after the latest step, and whether that step
    /// terminated the episode.
    last_next: ObsStore,
    terminated: bool,
}

/// The open episodes.
#[derive(Debug)]
pub(super) struct Cutter {
    unroll: usize,
    burn_in: usize,
    obs_dim: usize,
    state_len: usize,
    open: HashMap<u64, Open>,
}

/// One arriving step (a uint8 env's observations as bytes).
pub(super) struct Step<'a> {
    pub episode: u64,
    pub obs: Rows<'a>,
    pub action: f32,
    pub reward: f32,
    pub next_obs: Rows<'a>,
    pub terminated: bool,
}

impl Cutter {
    pub fn new(unroll: usize, burn_in: usize, obs_dim: usize, state_len: usize) -> Cutter {
        Cutter {
            unroll,
            burn_in,
            obs_dim,
            state_len,
            open: HashMap::new(),
        }
    }

    /// Steps a sequence holds at most.
    pub fn max_steps(&self) -> usize {
        self.unroll + self.burn_in
    }

    /// Where sequence `k` starts.
    fn start_of(&self, k: usize) -> usize {
        (k * self.unroll).saturating_sub(self.burn_in)
    }

    /// Takes one step; `advance` runs the network one step from a state
    /// (in place); `emit` gets each sequence the step completes.
    pub fn push(
        &mut self,
        s: &Step<'_>,
        advance: impl FnOnce(Rows<'_>, &mut [f32]),
        emit: impl FnOnce(&Sequence<'_>),
    ) {
        let (od, sl) = (self.obs_dim, self.state_len);
        let bytes = matches!(s.obs, Rows::Bytes(_));
        let ep = self.open.entry(s.episode).or_insert_with(|| Open {
            first: 0,
            obs: ObsStore::empty(bytes),
            actions: Vec::new(),
            rewards: Vec::new(),
            starts: VecDeque::from([(0, vec![0.0; sl])]),
            state: vec![0.0; sl],
            next: 0,
            sent: 0,
            last_next: ObsStore::empty(bytes),
            terminated: false,
        });
        let i = ep.next;
        if i > 0 && (i + self.burn_in).is_multiple_of(self.unroll) {
            ep.starts.push_back((i, ep.state.clone()));
        }
        advance(s.obs, &mut ep.state);
        ep.obs.push_rows(s.obs);
        ep.actions.push(s.action);
        ep.rewards.push(s.reward);
        ep.last_next.set_rows(s.next_obs);
        ep.terminated = s.terminated;
        ep.next += 1;
        if ep.next == (ep.sent + 1) * self.unroll {
            let k = ep.sent;
            let (start, drop_to) = (self.start_of(k), self.start_of(k + 1));
            let ep = self.open.get_mut(&s.episode).expect("just used");
            send((s.episode, ep), start, k * self.unroll - start, od, emit);
            ep.sent += 1;
            // What the next sequence does not read goes.
            let cut = drop_to - ep.first;
            ep.obs.drain_front(cut * od);
            ep.actions.drain(..cut);
            ep.rewards.drain(..cut);
            ep.first = drop_to;
            while ep.starts.front().is_some_and(|&(j, _)| j < drop_to) {
                ep.starts.pop_front();
            }
        }
    }

    /// The episode ended: its last sequence goes out, if it has steps to
    /// train on.
    pub fn end(&mut self, episode: u64, emit: impl FnOnce(&Sequence<'_>)) {
        let Some(ep) = self.open.remove(&episode) else {
            return;
        };
        let k = ep.sent;
        if ep.next > k * self.unroll {
            let start = self.start_of(k);
            send(
                (episode, &ep),
                start,
                k * self.unroll - start,
                self.obs_dim,
                emit,
            );
        }
    }

    /// The episode is played again from its start: what was held goes.
    pub fn abandon(&mut self, episode: u64) {
        self.open.remove(&episode);
    }

    /// Every open episode goes (a checkpoint's replay was restored).
    pub fn abandon_all(&mut self) {
        self.open.clear();
    }

    /// Episodes whose steps it holds.
    pub fn open(&self) -> usize {
        self.open.len()
    }
}

/// Sends the held steps of `episode` from `start` to the latest as one
/// sequence whose first `burn` steps only rebuild the state.
fn send(
    (episode, ep): (u64, &Open),
    start: usize,
    burn: usize,
    od: usize,
    emit: impl FnOnce(&Sequence<'_>),
) {
    let from = start - ep.first;
    let state = &ep
        .starts
        .iter()
        .find(|&&(j, _)| j == start)
        .expect("a state is kept for every sequence start")
        .1;
    let mut obs = ObsStore::empty(ep.obs.is_bytes());
    obs.push_rows(ep.obs.rows(from * od, ep.obs.len() - from * od));
    obs.push_rows(ep.last_next.rows(0, ep.last_next.len()));
    emit(&Sequence {
        obs: SeqObs::Rows(obs.rows(0, obs.len())),
        actions: &ep.actions[from..],
        rewards: &ep.rewards[from..],
        state,
        burn: burn as u32,
        terminated: ep.terminated,
        episode,
        first: start as u32,
    });
}
