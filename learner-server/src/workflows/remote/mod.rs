//! The learner side of the workflows in which actors feed the learner over
//! a transport: `async`, `sync` and `seed`. One thread owns the agent and
//! runs [`RemoteRun::run`], a loop over transport [`Event`]s; the transport
//! never touches the model, and the workflow never touches a socket.

mod experience;
mod ledger;
mod seed;

pub use ledger::{EpisodeLedger, Finish};

use super::book::RunBook;
use super::{RunOptions, RunSummary, StopReason, episode_seed};
use crate::agents::{self, Agent, Weights};
use crate::hub::{EpisodeView, RunShared, RunState};
use crate::metrics::Metrics;
use crate::transport::{ConnId, Event, Reply};
use rlfleet_shared::config::{RunConfig, WorkflowKind};
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::wire::{self, EpisodeStart, ErrorCode, Hello, Message, WeightsMsg};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long the loop sleeps when nothing happens (it still polls stop rules
/// and evaluations this often).
const IDLE_TICK: Duration = Duration::from_millis(20);

/// Most events handled between two looks at the stop rules.
const MAX_DRAIN: usize = 64;

/// Answers a request with an error (the transport then closes the
/// connection) and counts it.
fn refuse(metrics: &Metrics, reply: Reply, code: ErrorCode, text: String) {
    tracing::warn!(code = code.label(), "refused: {text}");
    metrics
        .protocol_errors
        .with_label_values(&[code.label()])
        .inc();
    let _ = reply.send(code.message(text));
}

/// An `async`/`sync` request held back until it can be answered (an actor
/// with nothing to do): answered with an `Ack`. (`seed` requests wait in
/// the inference front.)
#[derive(Debug)]
struct Parked {
    seq: u64,
    idle: Vec<u32>,
    reply: Reply,
}

/// Per-environment state of a `seed` actor (the learner assembles its
/// transitions).
#[derive(Debug, Clone, Default)]
struct EnvTrack {
    episode: Option<u64>,
    /// The observation the last action was chosen for (empty until the
    /// episode's first observation arrives).
    prev_obs: Vec<f32>,
    prev_action: Vec<f32>,
    ret: f64,
    len: u32,
}

impl EnvTrack {
    /// The observation an action was just chosen for, and that action.
    fn remember(&mut self, obs: &[f32], action: &[f32]) {
        self.prev_obs.clear();
        self.prev_obs.extend_from_slice(obs);
        self.prev_action.clear();
        self.prev_action.extend_from_slice(action);
    }
}

/// An actor taking part in the run.
#[derive(Debug)]
struct ActorSlot {
    /// Join order in this run (the `actor` column of `episodes.csv`).
    index: u32,
    actor_id: String,
    n_envs: u32,
    /// Version of the weights it holds.
    sent_version: Option<u64>,
    parked: Option<Parked>,
    envs: Vec<EnvTrack>,
}

/// Counts for the API (the same numbers go to the metrics).
#[derive(Debug, Default)]
struct Tally {
    received: u64,
    trained: u64,
    dropped: BTreeMap<&'static str, u64>,
    transitions: u64,
    inference_requests: u64,
}

/// The workflow-specific state.
#[derive(Debug)]
enum Mode {
    Async,
    Sync(experience::Round),
    Seed(Arc<seed::link::SeedLink>),
}

/// A distributed run, ready to take events.
pub struct RemoteRun {
    id: String,
    agent: Box<dyn Agent>,
    book: RunBook,
    spec: EnvSpec,
    ledger: EpisodeLedger,
    actors: BTreeMap<ConnId, ActorSlot>,
    next_index: u32,
    /// Highest sequence number trained per (actor id, session id).
    trained_seq: HashMap<(String, u64), u64>,
    /// The latest weights, copied out once per version.
    weights: Option<Weights>,
    metrics: Arc<Metrics>,
    shared: Arc<RunShared>,
    tally: Tally,
    mode: Mode,
    /// Env steps already offered to `Agent::train`.
    trained_upto: u64,
    last_status: Instant,
}

impl std::fmt::Debug for RemoteRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteRun")
            .field("id", &self.id)
            .field("actors", &self.actors.len())
            .finish()
    }
}

impl RemoteRun {
    pub fn new(
        id: &str,
        cfg: &RunConfig,
        opts: &RunOptions,
        metrics: Arc<Metrics>,
        shared: Arc<RunShared>,
    ) -> anyhow::Result<RemoteRun> {
        let spec = rlfleet_shared::env::spec(&cfg.env)?;
        let device = crate::device::select(1);
        let mut agent = agents::build_agent(cfg, &spec, device);
        let book = RunBook::open(cfg, opts, agent.as_mut())?;
        let ledger = EpisodeLedger::new(cfg.stop.max_episodes, book.counters.episodes);
        let mode = match cfg.workflow {
            WorkflowKind::Async => Mode::Async,
            WorkflowKind::Sync => Mode::Sync(experience::Round::default()),
            WorkflowKind::Seed => {
                let w = agent.weights();
                Mode::Seed(Arc::new(seed::link::SeedLink::new(
                    seed::link::PolicySnapshot {
                        version: w.version,
                        params: Arc::new(w.data),
                        epsilon: agent.epsilon(book.counters.env_steps) as f32,
                    },
                )))
            }
            other => anyhow::bail!("workflow `{other}` does not run with remote actors"),
        };
        Ok(RemoteRun {
            id: id.to_string(),
            trained_upto: book.counters.env_steps,
            agent,
            book,
            spec,
            ledger,
            actors: BTreeMap::new(),
            next_index: 0,
            trained_seq: HashMap::new(),
            weights: None,
            metrics,
            shared,
            tally: Tally::default(),
            mode,
            last_status: Instant::now(),
        })
    }

    fn cfg(&self) -> &RunConfig {
        &self.book.cfg
    }

    fn obs_dim(&self) -> usize {
        self.spec.obs_dim()
    }

    fn act_dim(&self) -> usize {
        self.spec.action_space.flat_dim()
    }

    /// Runs until a stop rule fires, `cancel` fires or the transport goes.
    pub fn run(
        mut self,
        events: Receiver<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<RunSummary> {
        let reason = loop {
            if cancel.is_cancelled() {
                break StopReason::Cancelled;
            }
            if let Some(r) = self.book.poll()? {
                break r;
            }
            match events.recv_timeout(IDLE_TICK) {
                Ok(ev) => {
                    self.handle(ev)?;
                    // Take what else is queued (bounded, so that stop
                    // rules and status still run under a steady stream).
                    for _ in 0..MAX_DRAIN {
                        let Ok(ev) = events.try_recv() else { break };
                        self.handle(ev)?;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break StopReason::Cancelled,
            }
            if self.last_status.elapsed() > Duration::from_millis(100) {
                self.publish_status(RunState::Running, None);
            }
        };
        self.stop_actors(&reason.to_string());
        // Requests that arrived after the end: answered `Stop`, and batches
        // among them counted as received and dropped.
        while let Ok(ev) = events.try_recv() {
            self.refuse_late(ev, &reason);
        }
        // From here on transports see the run as gone (and count late
        // batches themselves).
        drop(events);
        self.publish_status(RunState::Stopping, Some(reason.to_string()));
        let shared = self.shared.clone();
        let summary = self.book.finish(reason, self.agent.as_ref())?;
        let mut s = shared.status.lock().expect("status lock");
        s.target_reached = summary.target_reached();
        s.best_eval_return = summary.best_eval.map(|b| b.0);
        s.wall_secs = summary.counters.wall_secs;
        drop(s);
        Ok(summary)
    }

    fn handle(&mut self, ev: Event) -> anyhow::Result<()> {
        match ev {
            Event::Join { conn, hello, reply } => self.on_join(conn, hello, reply),
            Event::Left { conn } => self.on_left(conn),
            Event::Acted(items) => self.on_acted(items)?,
            Event::Request {
                conn, msg, reply, ..
            } => {
                if !self.actors.contains_key(&conn) {
                    let _ = reply.send(ErrorCode::Unexpected.message(format!(
                        "{} before a welcome into run {}",
                        msg.kind(),
                        self.id
                    )));
                    return Ok(());
                }
                match (msg, &self.mode) {
                    (Message::Experience(e), Mode::Async | Mode::Sync(_)) => {
                        self.on_experience(conn, e, reply)?
                    }
                    (other, _) => {
                        self.protocol_error(
                            reply,
                            ErrorCode::Unexpected,
                            format!(
                                "`{}` messages have no place in workflow `{}`",
                                other.kind(),
                                self.cfg().workflow
                            ),
                        );
                    }
                }
            }
        }
        Ok(())
    }

    fn protocol_error(&self, reply: Reply, code: ErrorCode, text: String) {
        refuse(&self.metrics, reply, code, text);
    }

    fn on_join(&mut self, conn: ConnId, hello: Hello, reply: Reply) {
        let n_envs = hello
            .env_capacity
            .clamp(1, self.cfg().distributed.max_envs_per_actor);
        let index = self.next_index;
        self.next_index += 1;
        tracing::info!(
            run = %self.id,
            actor = %hello.actor_id,
            session = hello.session_id,
            n_envs,
            index,
            "actor joined"
        );
        let envs = vec![EnvTrack::default(); n_envs as usize];
        self.actors.insert(
            conn,
            ActorSlot {
                index,
                actor_id: hello.actor_id,
                n_envs,
                sent_version: None,
                parked: None,
                envs,
            },
        );
        if let Mode::Sync(round) = &mut self.mode
            && round.in_progress()
        {
            // Joins at the next round boundary.
            round.joiners.push((conn, reply));
            return;
        }
        let welcome = self.welcome(conn);
        match &mut self.mode {
            Mode::Sync(round) => {
                round.participants.insert(conn);
            }
            Mode::Seed(link) => link.admit(conn, n_envs),
            Mode::Async => {}
        }
        let _ = reply.send(welcome);
    }

    /// The assignment for a newly admitted actor, with an episode for each
    /// of its envs that can get one.
    fn welcome(&mut self, conn: ConnId) -> Message {
        let all: Vec<u32> = (0..self.actors[&conn].n_envs).collect();
        let starts = self.issue(conn, &all);
        let with_weights = !matches!(self.mode, Mode::Seed(_));
        let weights = with_weights.then(|| self.weights_msg());
        let cfg = self.cfg().clone();
        let slot = self.actors.get_mut(&conn).expect("joined");
        slot.sent_version = weights.as_ref().map(|w| w.version);
        let epsilon = self.agent.epsilon(self.book.counters.env_steps) as f32;
        Message::Welcome(wire::Welcome {
            run_id: self.id.clone(),
            workflow: cfg.workflow.to_string(),
            env_id: cfg.env.clone(),
            obs_dim: self.spec.obs_dim() as u32,
            action_dim: self.spec.action_space.flat_dim() as u32,
            agent: cfg.agent.to_string(),
            hidden: cfg.dqn.hidden.clone(),
            n_envs: slot.n_envs,
            seed: cfg.seed ^ (u64::from(slot.index) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            batch_step_frequency: cfg.distributed.batch_step_frequency,
            steps_per_round: cfg.distributed.steps_per_round,
            epsilon,
            weights,
            starts,
        })
    }

    /// Hands out episodes to the given envs of `conn`, as far as the ledger
    /// allows.
    fn issue(&mut self, conn: ConnId, envs: &[u32]) -> Vec<EpisodeStart> {
        let seed = self.cfg().seed;
        let mut starts = Vec::new();
        for &env in envs {
            let Some((episode, reissued)) = self.ledger.issue((conn, env)) else {
                break;
            };
            if reissued {
                self.metrics.episodes_reissued.inc();
            } else {
                self.metrics.episodes_issued.inc();
            }
            if let Some(track) = self
                .actors
                .get_mut(&conn)
                .and_then(|s| s.envs.get_mut(env as usize))
            {
                *track = EnvTrack {
                    episode: Some(episode),
                    ..EnvTrack::default()
                };
            }
            starts.push(EpisodeStart {
                env,
                episode,
                seed: episode_seed(seed, episode),
            });
        }
        starts
    }

    fn on_left(&mut self, conn: ConnId) {
        let Some(slot) = self.actors.remove(&conn) else {
            return;
        };
        let requeued = self.ledger.release(conn);
        tracing::info!(
            run = %self.id,
            actor = %slot.actor_id,
            requeued,
            "actor left; its unfinished episodes go to others"
        );
        match &mut self.mode {
            Mode::Sync(round) => {
                round.participants.remove(&conn);
                if let Some((e, _reply)) = round.submitted.remove(&conn) {
                    round.orphans.push(e);
                }
            }
            Mode::Seed(link) => link.forget(conn),
            Mode::Async => {}
        }
        if requeued > 0 {
            self.serve_parked();
        }
        if requeued > 0 && matches!(self.mode, Mode::Seed(_)) {
            let conns: Vec<ConnId> = self.actors.keys().copied().collect();
            for c in conns {
                self.reissue_idle(c);
            }
        }
        if matches!(self.mode, Mode::Sync(_)) {
            // The round may have been waiting only for this actor.
            if let Err(e) = self.maybe_finish_round() {
                tracing::error!("round: {e:#}");
            }
        }
    }

    /// Gives episodes that became available to actors parked without one.
    fn serve_parked(&mut self) {
        let conns: Vec<ConnId> = self
            .actors
            .iter()
            .filter(|(_, s)| s.parked.is_some())
            .map(|(&c, _)| c)
            .collect();
        for conn in conns {
            if !self.ledger.available() {
                break;
            }
            let parked = self.actors.get_mut(&conn).and_then(|s| s.parked.take());
            if let Some(Parked { seq, idle, reply }) = parked {
                let starts = self.issue(conn, &idle);
                let ack = self.ack(conn, seq, false, starts);
                let _ = reply.send(ack);
            }
        }
    }

    /// The latest weights as a message (copied out once per version).
    fn weights_msg(&mut self) -> WeightsMsg {
        let version = self.agent.train_steps();
        if self.weights.as_ref().is_none_or(|w| w.version != version) {
            self.weights = Some(self.agent.weights());
        }
        let w = self.weights.as_ref().expect("just set");
        WeightsMsg {
            version: w.version,
            data: w.data.clone(),
        }
    }

    /// An `Ack`, with the weights when the actor's are older.
    fn ack(
        &mut self,
        conn: ConnId,
        seq: u64,
        duplicate: bool,
        starts: Vec<EpisodeStart>,
    ) -> Message {
        let version = self.agent.train_steps();
        let stale = self
            .actors
            .get(&conn)
            .is_some_and(|s| s.sent_version != Some(version));
        let weights = stale.then(|| self.weights_msg());
        if let (Some(w), Some(slot)) = (&weights, self.actors.get_mut(&conn)) {
            slot.sent_version = Some(w.version);
        }
        Message::Ack(wire::Ack {
            seq,
            duplicate,
            weights,
            epsilon: self.agent.epsilon(self.book.counters.env_steps) as f32,
            starts,
        })
    }

    /// Counts a finished episode reported for (conn, env) if the ledger
    /// agrees it is the reporter's to finish.
    fn finish_episode(
        &mut self,
        conn: ConnId,
        env: u32,
        episode: u64,
        ret: f64,
        length: u32,
    ) -> anyhow::Result<()> {
        match self.ledger.finish(episode, (conn, env)) {
            Finish::Counted => {}
            other => {
                tracing::debug!(episode, ?other, "episode end not counted");
                return Ok(());
            }
        }
        let actor = self.actors.get(&conn).map_or(u32::MAX, |s| s.index);
        let version = self.agent.train_steps();
        self.book.episode(episode, actor, ret, length, version)?;
        self.metrics.episodes_finished.inc();
        self.metrics.episode_return.observe(ret);
        self.shared
            .episodes
            .lock()
            .expect("episodes lock")
            .push(EpisodeView {
                episode,
                actor,
                ret,
                length,
                policy_version: version,
                env_steps: self.book.counters.env_steps,
                wall_secs: self.book.counters.wall_secs,
            });
        Ok(())
    }

    /// Offers every ingested env step to the agent's training schedule.
    fn train_pending(&mut self) {
        let before = self.agent.train_steps();
        while self.trained_upto < self.book.counters.env_steps {
            self.trained_upto += 1;
            self.agent.train(self.trained_upto);
        }
        let steps = self.agent.train_steps() - before;
        if steps > 0 {
            self.metrics.train_steps.inc_by(steps);
            self.metrics
                .policy_version
                .set(self.agent.train_steps() as i64);
        }
    }

    /// Replies `Stop` to every request held back.
    fn stop_actors(&mut self, reason: &str) {
        let stop = || {
            Message::Stop(wire::Stop {
                reason: reason.to_string(),
                shutdown: false,
            })
        };
        for slot in self.actors.values_mut() {
            if let Some(p) = slot.parked.take() {
                let _ = p.reply.send(stop());
            }
        }
        match &mut self.mode {
            Mode::Sync(round) => {
                // Batches of the unfinished round were received, never
                // trained: count them dropped.
                let untrained = round.submitted.len() + std::mem::take(&mut round.orphans).len();
                for reply in round.take_replies() {
                    let _ = reply.send(stop());
                }
                for _ in 0..untrained {
                    self.drop_batch("run_ended");
                }
            }
            Mode::Seed(link) => link.end(reason),
            Mode::Async => {}
        }
    }

    fn publish_status(&mut self, state: RunState, reason: Option<String>) {
        self.last_status = Instant::now();
        self.metrics.replay_size.set(self.agent.replay_len() as i64);
        let loss = self.agent.last_loss();
        if let Some(l) = loss {
            self.metrics.loss.set(l);
        }
        let mut s = self.shared.status.lock().expect("status lock");
        s.state = state;
        if reason.is_some() {
            s.reason = reason;
        }
        let c = &self.book.counters;
        s.env_steps = c.env_steps;
        s.episodes_finished = c.episodes;
        s.wall_secs = c.wall_secs;
        s.episodes_issued = self.ledger.issued;
        s.episodes_reissued = self.ledger.reissued;
        s.recent_return = self.book.recent_mean();
        s.last_eval_return = self.book.last_eval;
        s.best_eval_return = self.book.best_eval();
        s.policy_version = self.agent.train_steps();
        s.train_steps = self.agent.train_steps();
        s.replay_size = self.agent.replay_len() as u64;
        s.batches.received = self.tally.received;
        s.batches.trained = self.tally.trained;
        s.batches.dropped = self
            .tally
            .dropped
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        s.transitions_ingested = self.tally.transitions;
        s.inference_requests = self.tally.inference_requests;
        s.actors = self.actors.values().map(|a| a.actor_id.clone()).collect();
    }

    fn refuse_late(&mut self, ev: Event, reason: &StopReason) {
        if let Event::Request { msg, reply, .. } = ev {
            if matches!(msg, Message::Experience(_)) {
                self.tally.received += 1;
                self.metrics.batches_received.inc();
                self.drop_batch("run_ended");
            }
            let _ = reply.send(Message::Stop(wire::Stop {
                reason: reason.to_string(),
                shutdown: false,
            }));
        }
    }

    /// Counts a dropped batch.
    fn drop_batch(&mut self, reason: &'static str) {
        *self.tally.dropped.entry(reason).or_default() += 1;
        self.metrics
            .batches_dropped
            .with_label_values(&[reason])
            .inc();
    }
}
