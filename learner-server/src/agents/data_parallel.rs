//! Data-parallel learners over MPI (feature `mpi`, the `ml-*` workflows).
//! On the lead learner, [`DataParallel`] wraps the run's agent: it keeps
//! the transitions meant for learner 0 and sends the others to their
//! learner — by episode (`e % L`, `ml-async`), or to the learner the run
//! picked for the batch ([`Agent::route_to`], the `ml-rma` family); before each group of gradient steps it tells every
//! helper how many to take, and each step's gradient is averaged over the
//! learners (`MPI_Allreduce`, [`AllreduceMean`]) before every learner
//! applies the same optimizer step, so the models stay identical. Helper
//! learner ranks run [`serve_helper`]. At the end the helpers send their
//! weights back and the lead checks they are bit-identical to its own
//! (`learners.toml`).

use super::{Agent, AgentError, AgentState, GradientReduce, NamedTensor, Weights};
use crate::replay::Transition;
use rlfleet_shared::mpi::rsmpi::collective::SystemOperation;
use rlfleet_shared::mpi::rsmpi::traits::{
    Communicator, CommunicatorCollectives, Destination, MatchedReceiveVec, Source,
};
use rlfleet_shared::mpi::{Backoff, Group};
use std::path::Path;

/// Averages gradients over the learners' group.
#[derive(Debug)]
pub struct AllreduceMean {
    pub group: Group,
    sum: Vec<f32>,
}

impl AllreduceMean {
    pub fn new(group: Group) -> AllreduceMean {
        AllreduceMean {
            group,
            sum: Vec::new(),
        }
    }
}

impl GradientReduce for AllreduceMean {
    fn mean(&mut self, grad: &mut [f32]) {
        self.sum.resize(grad.len(), 0.0);
        self.group
            .0
            .all_reduce_into(&grad[..], &mut self.sum[..], SystemOperation::sum());
        let n = self.group.0.size() as f32;
        for (g, s) in grad.iter_mut().zip(&self.sum) {
            *g = s / n;
        }
    }
}

/// Commands from the lead learner to a helper (one message each).
mod command {
    pub const OBSERVE: u8 = 1;
    pub const TRAIN: u8 = 2;
    pub const STATE: u8 = 3;
    pub const FINISH: u8 = 4;
    /// Within `OBSERVE`: one transition, or one episode's end.
    pub const ITEM_TRANSITION: u8 = 1;
    pub const ITEM_END: u8 = 2;
    pub const ITEM_ABANDON: u8 = 3;
}

fn put_f32s(out: &mut Vec<u8>, v: &[f32]) {
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

/// A little-endian reader over a command's bytes.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().expect("4 bytes"))
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().expect("8 bytes"))
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        self.take(4 * n)
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect()
    }
}

fn encode_state(s: &AgentState) -> Vec<u8> {
    let mut out = vec![command::STATE];
    for v in [s.train_steps, s.version, s.optimizer_steps] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&(s.tensors.len() as u32).to_le_bytes());
    for t in &s.tensors {
        out.extend_from_slice(&(t.name.len() as u32).to_le_bytes());
        out.extend_from_slice(t.name.as_bytes());
        out.extend_from_slice(&(t.shape.len() as u32).to_le_bytes());
        for d in &t.shape {
            out.extend_from_slice(&(*d as u64).to_le_bytes());
        }
        out.extend_from_slice(&(t.data.len() as u64).to_le_bytes());
        put_f32s(&mut out, &t.data);
    }
    out
}

fn decode_state(r: &mut Reader) -> AgentState {
    let (train_steps, version, optimizer_steps) = (r.u64(), r.u64(), r.u64());
    let n = r.u32();
    let tensors = (0..n)
        .map(|_| {
            let len = r.u32() as usize;
            let name = String::from_utf8_lossy(r.take(len)).into_owned();
            let dims = r.u32();
            let shape = (0..dims).map(|_| r.u64() as usize).collect();
            let numel = r.u64() as usize;
            NamedTensor {
                name,
                shape,
                data: r.f32s(numel),
            }
        })
        .collect();
    AgentState {
        tensors,
        train_steps,
        version,
        optimizer_steps,
    }
}

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
    /// `OBSERVE` commands being built, per learner (index 0 unused).
    pending: Vec<Vec<u8>>,
    batch_size: u64,
    synced: bool,
    /// The learner the run picked for what is observed next (else by
    /// episode).
    route: Option<usize>,
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
    /// An episode's end or abandonment, for the learner that owns the
    /// episode: this one at once, a helper with its next commands.
    fn episode_item(&mut self, episode: u64, item: u8) {
        let k = self.owner(episode);
        if k == 0 {
            return match item {
                command::ITEM_END => self.inner.end_episode(episode),
                _ => self.inner.abandon_episode(episode),
            };
        }
        let p = self.pending_for(k);
        p.push(item);
        p.extend_from_slice(&episode.to_le_bytes());
    }

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
        }
    }

    fn owner(&self, episode: u64) -> usize {
        self.route
            .unwrap_or((episode % self.learners as u64) as usize)
    }

    fn pending_for(&mut self, k: usize) -> &mut Vec<u8> {
        let p = &mut self.pending[k];
        if p.is_empty() {
            p.push(command::OBSERVE);
        }
        p
    }

    fn send(&self, k: usize, bytes: &[u8]) {
        self.commands.0.process_at_rank(k as i32).send(bytes);
    }

    /// Sends every helper the transitions gathered for it.
    fn flush(&mut self) {
        for k in 1..self.learners {
            if !self.pending[k].is_empty() {
                let p = std::mem::take(&mut self.pending[k]);
                self.send(k, &p);
            }
        }
    }

    /// The helpers start from the lead's state (fresh, or resumed).
    fn sync(&mut self) {
        if !self.synced {
            self.synced = true;
            let state = encode_state(&self.inner.state());
            for k in 1..self.learners {
                self.send(k, &state);
            }
        }
    }
}

impl Agent for DataParallel {
    fn act(&mut self, obs: &[f32], env_steps: u64, action: &mut [f32]) {
        self.inner.act(obs, env_steps, action)
    }
    fn act_batch(&mut self, obs: &[f32], n: usize, env_steps: u64, actions: &mut [f32]) {
        self.inner.act_batch(obs, n, env_steps, actions)
    }
    fn epsilon(&self, env_steps: u64) -> f64 {
        self.inner.epsilon(env_steps)
    }

    fn observe(&mut self, t: &Transition<'_>) {
        let k = self.owner(t.episode);
        self.held[k] += 1;
        if k == 0 {
            return self.inner.observe(t);
        }
        let p = self.pending_for(k);
        p.push(command::ITEM_TRANSITION);
        p.extend_from_slice(&t.episode.to_le_bytes());
        p.push(u8::from(t.terminated));
        p.extend_from_slice(&(t.obs.len() as u32).to_le_bytes());
        p.extend_from_slice(&(t.action.len() as u32).to_le_bytes());
        put_f32s(p, t.obs);
        put_f32s(p, t.action);
        p.extend_from_slice(&t.reward.to_le_bytes());
        put_f32s(p, t.next_obs);
    }

    fn end_episode(&mut self, episode: u64) {
        self.episode_item(episode, command::ITEM_END);
    }

    fn abandon_episode(&mut self, episode: u64) {
        self.episode_item(episode, command::ITEM_ABANDON);
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
        let mut msg = vec![command::TRAIN];
        msg.extend_from_slice(&n.to_le_bytes());
        for k in 1..self.learners {
            self.send(k, &msg);
        }
        for _ in 0..n {
            self.inner.sample_step();
        }
        n
    }

    fn route_to(&mut self, learner: usize) {
        self.route = Some(learner % self.learners);
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

    /// Collects every helper's weights and checks them against the
    /// lead's, bit for bit; writes `learners.toml`.
    fn finish_run(&mut self, output_dir: &Path) -> anyhow::Result<()> {
        self.flush();
        let mine = self.inner.weights().data;
        let mut identical = true;
        for k in 1..self.learners {
            self.send(k, &[command::FINISH]);
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

/// A helper learner rank: builds the same agent (its output, if any, under
/// `learner-RANK/`), then follows the lead's commands until `FINISH`, when
/// it sends its weights back.
pub fn serve_helper(mut agent: Box<dyn Agent>, commands: Group, reduce: Group) {
    let reduces = agent.set_gradient_reduce(Box::new(AllreduceMean::new(reduce)));
    let lead = commands.0.process_at_rank(0);
    loop {
        // Polls (yielding, then pausing briefly) rather than block in MPI,
        // which spins: the ranks share few cores with the actors.
        let mut backoff = Backoff::new(1000, std::time::Duration::from_micros(20));
        let probed = loop {
            if let Some(p) = lead.immediate_matched_probe() {
                break p;
            }
            backoff.wait();
        };
        let (msg, _) = probed.matched_receive_vec::<u8>();
        let mut r = Reader(&msg);
        match r.u8() {
            command::OBSERVE => {
                while !r.0.is_empty() {
                    match r.u8() {
                        command::ITEM_TRANSITION => {
                            let episode = r.u64();
                            let terminated = r.u8() != 0;
                            let (od, ad) = (r.u32() as usize, r.u32() as usize);
                            let obs = r.f32s(od);
                            let action = r.f32s(ad);
                            let reward = f32::from_le_bytes(r.take(4).try_into().expect("4"));
                            let next_obs = r.f32s(od);
                            agent.observe(&Transition {
                                episode,
                                obs: &obs,
                                action: &action,
                                reward,
                                next_obs: &next_obs,
                                terminated,
                            });
                        }
                        command::ITEM_END => agent.end_episode(r.u64()),
                        command::ITEM_ABANDON => agent.abandon_episode(r.u64()),
                        other => rlfleet_shared::mpi::abort(
                            &format!("a helper learner: unknown item {other}"),
                            1,
                        ),
                    }
                }
            }
            command::TRAIN => {
                let n = r.u32();
                for _ in 0..n {
                    agent.sample_step();
                }
            }
            command::STATE => {
                let state = decode_state(&mut r);
                if let Err(e) = agent.load_state(&state) {
                    rlfleet_shared::mpi::abort(&format!("a helper learner: {e}"), 1);
                }
            }
            _ => {
                let w = agent.weights().data;
                lead.send(&w[..]);
                tracing::info!(reduces, "helper learner done");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_state_round_trips_through_the_state_command() {
        let s = AgentState {
            tensors: vec![
                NamedTensor {
                    name: "params".into(),
                    shape: vec![2, 3],
                    data: vec![1.0, -2.5, 3.25, f32::MIN_POSITIVE, 0.0, -0.0],
                },
                NamedTensor {
                    name: "adam.m".into(),
                    shape: vec![],
                    data: vec![],
                },
            ],
            train_steps: 7,
            version: 9,
            optimizer_steps: 11,
        };
        let bytes = encode_state(&s);
        assert_eq!(bytes[0], command::STATE);
        let mut r = Reader(&bytes[1..]);
        let back = decode_state(&mut r);
        assert!(r.0.is_empty());
        assert_eq!(back, s);
        let bits = |t: &AgentState| -> Vec<u32> {
            t.tensors[0].data.iter().map(|x| x.to_bits()).collect()
        };
        assert_eq!(bits(&back), bits(&s), "-0.0 stays -0.0");
    }
}
