//! Data-parallel learners over MPI (feature `mpi`, the `ml-*` workflows).
//! On the lead learner, [`DataParallel`] wraps the run's agent: it keeps
//! the transitions meant for learner 0 and sends the others to their
//! learner — by episode (`e % L`, `ml-async`), or to the learner the run
//! picked for the batch ([`Parallel::route_to`], the `ml-rma` family); before each group of gradient steps it tells every
//! helper how many to take, and each step's gradient is averaged over the
//! learners (`MPI_Allreduce`, [`AllreduceMean`]) before every learner
//! applies the same optimizer step, so the models stay identical. Helper
//! learner ranks run [`serve_helper`]. At the end the helpers send their
//! weights back and the lead checks they are bit-identical to its own
//! (`learners.toml`).

mod allreduce;
mod command;
mod helper;

use crate::agents::{Act, Learn, Parallel, Persist};
pub use allreduce::AllreduceMean;
pub use helper::serve_helper;

use super::{Agent, AgentError, AgentState, Weights};
use command::{Command, Item, StateMsg, Step};
use rlfleet_replay::Transition;
use rlfleet_shared::mpi::Group;
use rlfleet_shared::mpi::rsmpi::traits::{Communicator, Destination, Source};
use std::collections::HashMap;
use std::path::Path;

/// The lead learner's agent: the run's own agent plus the helpers.
pub struct DataParallel {
    inner: Box<dyn Agent>,
    /// Commands to the helpers (the gradient allreduce has its own
    /// communicator, inside `inner`).
    commands: Group,
    learners: usize,
    /// The agent averages its gradients over the group (false for agents
    /// without gradients, such as `probe`: each learner only observes).
    reduces: bool,
    /// Transitions each learner holds.
    held: Vec<u64>,
    /// What each helper observes next, gathered until the next `Observe`
    /// command (index 0 unused).
    pending: Vec<Vec<Item>>,
    batch_size: u64,
    synced: bool,
    /// The learner the run picked for what is observed next (else by
    /// episode).
    route: Option<usize>,
    /// The learner that was given each open episode's latest step: its
    /// end goes there, and a step routed elsewhere first ends the piece
    /// that learner holds.
    holds: HashMap<u64, usize>,
}

impl std::fmt::Debug for DataParallel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataParallel")
            .field("learners", &self.learners)
            .field("reduces", &self.reduces)
            .field("held", &self.held)
            .finish()
    }
}

impl DataParallel {
    /// Wraps `inner`; `commands` and `reduce` are two communicators over
    /// the same learner ranks, this one first.
    pub fn new(mut inner: Box<dyn Agent>, commands: Group, reduce: Group, batch_size: u64) -> Self {
        let learners = commands.0.size() as usize;
        let reduces = inner.set_gradient_reduce(Box::new(AllreduceMean::new(reduce)));
        DataParallel {
            inner,
            commands,
            learners,
            reduces,
            held: vec![0; learners],
            pending: vec![Vec::new(); learners],
            batch_size,
            synced: false,
            route: None,
            holds: HashMap::new(),
        }
    }

    fn owner(&self, episode: u64) -> usize {
        self.route
            .unwrap_or((episode % self.learners as u64) as usize)
    }

    /// The learner that takes `episode`'s next step; the piece of it
    /// another learner holds is ended there first.
    fn take(&mut self, episode: u64) -> usize {
        let k = self.owner(episode);
        if let Some(h) = self.holds.insert(episode, k)
            && h != k
        {
            self.episode_item(h, episode, Item::End(episode));
        }
        k
    }

    /// An episode's end or abandonment, for learner `k`: this one at once,
    /// a helper with its next commands.
    fn episode_item(&mut self, k: usize, episode: u64, item: Item) {
        if k > 0 {
            return self.pending[k].push(item);
        }
        match item {
            Item::End(_) => self.inner.end_episode(episode),
            _ => self.inner.abandon_episode(episode),
        }
    }

    fn send(&self, k: usize, command: &Command) {
        let bytes = command.encode();
        self.commands.0.process_at_rank(k as i32).send(&bytes[..]);
    }

    /// Sends every helper the transitions gathered for it.
    fn flush(&mut self) {
        for k in 1..self.learners {
            if !self.pending[k].is_empty() {
                let items = std::mem::take(&mut self.pending[k]);
                self.send(k, &Command::Observe(items));
            }
        }
    }

    /// The helpers start from the lead's state (fresh, or resumed).
    fn sync(&mut self) {
        if !self.synced {
            self.synced = true;
            let state = Command::State(StateMsg::from(&self.inner.state()));
            for k in 1..self.learners {
                self.send(k, &state);
            }
        }
    }
}

impl Act for DataParallel {
    fn act(&mut self, obs: &[f32], env_steps: u64, action: &mut [f32]) {
        self.inner.act(obs, env_steps, action)
    }

    fn act_batch(&mut self, obs: &[f32], n: usize, env_steps: u64, actions: &mut [f32]) {
        self.inner.act_batch(obs, n, env_steps, actions)
    }

    fn last_logp(&self) -> Option<f32> {
        self.inner.last_logp()
    }

    fn epsilon(&self, env_steps: u64) -> f64 {
        self.inner.epsilon(env_steps)
    }

    fn actor_epsilon(&self, env_steps: u64, actor: u64) -> f64 {
        self.inner.actor_epsilon(env_steps, actor)
    }
}

impl Learn for DataParallel {
    fn observe(&mut self, t: &Transition<'_>) {
        let k = self.take(t.episode);
        self.held[k] += 1;
        if k == 0 {
            return self.inner.observe(t);
        }
        self.pending[k].push(Item::Transition(Step::of(t)));
    }

    fn observe_bytes(&mut self, t: &Transition<'_, u8>) {
        let k = self.take(t.episode);
        self.held[k] += 1;
        if k == 0 {
            return self.inner.observe_bytes(t);
        }
        self.pending[k].push(Item::Bytes(Step::of(t)));
    }

    fn end_episode(&mut self, episode: u64) {
        let k = self.holds.remove(&episode).unwrap_or(self.owner(episode));
        self.episode_item(k, episode, Item::End(episode));
    }

    fn abandon_episode(&mut self, episode: u64) {
        let k = self.holds.remove(&episode).unwrap_or(self.owner(episode));
        self.episode_item(k, episode, Item::Abandon(episode));
    }

    fn open_episodes(&self) -> usize {
        self.holds.len().max(self.inner.open_episodes())
    }

    fn train(&mut self, env_steps: u64) -> u32 {
        self.flush();
        if !self.reduces {
            return self.inner.train(env_steps);
        }
        let n = self.inner.scheduled_steps(env_steps);
        if n == 0 || self.held.iter().any(|&h| h < self.batch_size) {
            return 0;
        }
        self.sync();
        for k in 1..self.learners {
            self.send(k, &Command::Train(n));
        }
        for _ in 0..n {
            self.inner.sample_step();
        }
        n
    }

    fn last_loss(&self) -> Option<f64> {
        self.inner.last_loss()
    }

    fn scalars(&self, env_steps: u64) -> Vec<(&'static str, f64)> {
        self.inner.scalars(env_steps)
    }

    fn train_steps(&self) -> u64 {
        self.inner.train_steps()
    }

    fn replay_len(&self) -> usize {
        self.held.iter().sum::<u64>() as usize
    }
}

impl Persist for DataParallel {
    fn weights(&self) -> Weights {
        self.inner.weights()
    }

    fn load_weights(&mut self, w: &Weights) -> Result<(), AgentError> {
        self.inner.load_weights(w)
    }

    fn state(&self) -> AgentState {
        self.inner.state()
    }

    fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError> {
        self.synced = false;
        self.inner.load_state(s)
    }
}

impl Parallel for DataParallel {
    fn route_to(&mut self, learner: usize) {
        self.route = Some(learner % self.learners);
    }

    /// Collects every helper's weights and checks them against the
    /// lead's, bit for bit; writes `learners.toml`.
    fn finish_run(&mut self, output_dir: &Path) -> anyhow::Result<()> {
        self.flush();
        let mine = self.inner.weights().data;
        let mut identical = true;
        for k in 1..self.learners {
            self.send(k, &Command::Finish);
            let (theirs, _) = self
                .commands
                .0
                .process_at_rank(k as i32)
                .receive_vec::<f32>();
            let same = theirs.len() == mine.len()
                && theirs
                    .iter()
                    .zip(&mine)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
            if !same {
                tracing::error!("learner {k}'s weights differ from learner 0's");
            }
            identical &= same;
        }
        let text = format!(
            "# Written by the lead learner of a data-parallel run.\nlearners = {}\n\
             gradient_reduce = {}\nparameters = {}\ntrain_steps = {}\nidentical = {identical}\n",
            self.learners,
            self.reduces,
            mine.len(),
            self.inner.train_steps()
        );
        std::fs::write(output_dir.join("learners.toml"), text)?;
        tracing::info!(
            learners = self.learners,
            identical,
            "data-parallel learners checked"
        );
        self.inner.finish_run(output_dir)
    }
}
