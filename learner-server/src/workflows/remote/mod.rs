//! The learner side of the workflows in which actors feed the learner over
//! a transport: `async`, `nb-async`, `async-window`, `sync`, `rma`,
//! `rma-queue-pop-all`, `random`, `seed`, `seed-a2c`, `orchestrated` and
//! the multi-learner `ml-*` (on the lead learner rank). One thread owns the agent and
//! runs [`RemoteRun::run`], a loop over transport [`Event`]s; the transport
//! never touches the model, and the workflow never touches a socket.

mod accounts;
mod experience;
mod ledger;
mod pools;
mod seed;
mod select;

pub use accounts::BATCH_LOG_HEADER;
pub use ledger::{EpisodeLedger, Finish};
pub use pools::Pools;

use super::book::RunBook;
use super::{RunOptions, RunSummary, StopReason, episode_seed};
use crate::agents::{self, Agent, Weights};
use crate::hub::{EpisodeView, RunShared, RunState};
use crate::metrics::Metrics;
use crate::transport::{ConnId, Event, Reply, RunInbox};
use accounts::Accounts;
use rlfleet_shared::config::{RunConfig, WorkflowKind};
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::wire::{self, EpisodeStart, ErrorCode, Experience, Hello, Message, WeightsMsg};
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long the loop sleeps when nothing happens (it still polls stop rules
/// and evaluations this often).
const IDLE_TICK: Duration = Duration::from_millis(20);

/// Most events handled between two looks at the stop rules.
const MAX_DRAIN: usize = 64;

/// The `Error` a refused request is answered with (the transport then
/// closes the connection), counted and logged.
fn refusal(metrics: &Metrics, code: ErrorCode, text: String) -> Message {
    tracing::warn!(code = code.label(), "refused: {text}");
    metrics
        .protocol_errors
        .with_label_values(&[code.label()])
        .inc();
    code.message(text)
}

/// Hands out episodes to the given envs of `conn`, as far as the ledger
/// allows (the fetch-and-add of the `rma` workflows).
fn issue_starts(
    ledger: &mut EpisodeLedger,
    metrics: &Metrics,
    seed: u64,
    conn: ConnId,
    envs: &[u32],
) -> Vec<EpisodeStart> {
    let mut starts = Vec::new();
    for &env in envs {
        let Some((episode, reissued)) = ledger.issue((conn, env)) else {
            break;
        };
        if reissued {
            metrics.episodes_reissued.inc();
        } else {
            metrics.episodes_issued.inc();
        }
        starts.push(EpisodeStart {
            env,
            episode,
            seed: episode_seed(seed, episode),
        });
    }
    starts
}

/// An experience request held back until it can be answered (an actor
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
pub(super) struct Tally {
    received: u64,
    trained: u64,
    dropped: BTreeMap<&'static str, u64>,
    transitions: u64,
    inference_requests: u64,
}

/// The workflow-specific state.
#[derive(Debug)]
enum Mode {
    /// `async`, `nb-async` (its actors keep up to `in_flight` batches
    /// unanswered) and `random` (no training).
    Async,
    Window(experience::Window),
    Sync(experience::Round),
    Seed(Arc<seed::link::SeedLink>),
    /// `rma` and (`pop_all`) `rma-queue-pop-all`.
    Pools {
        pools: Arc<Pools>,
        pop_all: bool,
    },
    Orchestrated(experience::Orchestra),
}

/// Where the learner's time goes: training (ingest and gradient steps)
/// and waiting for data.
#[derive(Debug, Default, Clone, Copy)]
pub struct LearnerTime {
    pub train: Duration,
    pub wait: Duration,
}

/// A distributed run, ready to take events.
pub struct RemoteRun {
    id: String,
    agent: Box<dyn Agent>,
    book: RunBook,
    spec: EnvSpec,
    ledger: Arc<Mutex<EpisodeLedger>>,
    actors: BTreeMap<ConnId, ActorSlot>,
    next_index: u32,
    /// Highest sequence number trained per (actor id, session id).
    trained_seq: HashMap<(String, u64), u64>,
    /// The latest weights, copied out once per version.
    weights: Option<Weights>,
    metrics: Arc<Metrics>,
    shared: Arc<RunShared>,
    accounts: Arc<Accounts>,
    mode: Mode,
    /// Env steps already offered to `Agent::train`.
    trained_upto: u64,
    last_status: Instant,
    time: LearnerTime,
    /// What of `time` the metrics have.
    time_published: LearnerTime,
    /// The weights version last published to the `rma` pools.
    published_version: u64,
    /// `random`: weights that never change, and the actors' exploration.
    fixed: Option<f32>,
    /// `rma-queue-pop-all`'s fetcher thread.
    fetcher: Option<std::thread::JoinHandle<()>>,
    /// The multi-learner `rma` workflows: which learner takes which batch.
    select: Option<select::Selector>,
    /// The policy as an ONNX model with its weights as an input (every
    /// `Welcome` carries it).
    onnx: Vec<u8>,
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
        // (learner ranks, actor ranks) of a multi-learner job.
        let ranks = (1, 0);
        #[cfg(feature = "mpi")]
        let ranks = match opts.learners.as_ref().and_then(|g| g.lock().ok()?.take()) {
            Some(group) => {
                use rlfleet_shared::mpi::rsmpi::traits::Communicator;
                let batch = u64::from(cfg.dqn.batch_size);
                let ranks = (group.commands.0.size() as usize, group.actor_ranks);
                agent = Box::new(agents::data_parallel::DataParallel::new(
                    agent,
                    group.commands,
                    group.reduce,
                    batch,
                ));
                ranks
            }
            None => ranks,
        };
        let book = RunBook::open(cfg, opts, agent.as_mut())?;
        let ledger = Arc::new(Mutex::new(EpisodeLedger::new(
            cfg.stop.max_episodes,
            book.counters.episodes,
        )));
        let accounts = Arc::new(Accounts::new(
            metrics.clone(),
            cfg.distributed.batch_log,
            &cfg.output_dir,
        )?);
        let fixed = if cfg.workflow == WorkflowKind::Random {
            Some(fixed_policy(cfg, agent.as_mut())?)
        } else {
            None
        };
        let mode = match cfg.workflow {
            WorkflowKind::Async
            | WorkflowKind::MlAsync
            | WorkflowKind::NbAsync
            | WorkflowKind::Random => Mode::Async,
            WorkflowKind::AsyncWindow => Mode::Window(experience::Window::default()),
            WorkflowKind::Orchestrated => {
                let d = &cfg.distributed;
                Mode::Orchestrated(experience::Orchestra::new(
                    crate::replay::RateLimiter::new(
                        d.samples_per_insert,
                        d.min_size_to_sample,
                        d.error_buffer,
                    ),
                    cfg.items_per_sample().unwrap_or(1) as f64,
                ))
            }
            WorkflowKind::Sync => Mode::Sync(experience::Round::default()),
            w if w.deposits() => {
                let d = &cfg.distributed;
                let pop_all = w == WorkflowKind::RmaQueuePopAll;
                // Lossless queues for the workflows that drain them.
                let queues = w.ends_on_sentinels();
                let rules = pools::PoolRules {
                    structure: if queues {
                        rlfleet_shared::config::DataStructure::Queue
                    } else {
                        d.data_structure
                    },
                    length: d.data_structure_length as usize,
                    overflow: if queues {
                        rlfleet_shared::config::Overflow::Reject
                    } else {
                        d.overflow
                    },
                    obs_dim: spec.obs_dim(),
                    action_space: spec.action_space.clone(),
                    seed: cfg.seed,
                };
                let pools = Pools::new(rules, ledger.clone(), accounts.clone(), metrics.clone());
                let w = agent.weights();
                pools.publish(
                    WeightsMsg {
                        version: w.version,
                        data: w.data,
                    },
                    agent.epsilon(book.counters.env_steps) as f32,
                );
                Mode::Pools {
                    pools: Arc::new(pools),
                    pop_all,
                }
            }
            WorkflowKind::Seed | WorkflowKind::SeedA2c => {
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
            onnx: rlfleet_shared::onnx::PolicyGraph::for_run(&book.cfg, &spec).model(None),
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
            accounts,
            mode,
            last_status: Instant::now(),
            time: LearnerTime::default(),
            time_published: LearnerTime::default(),
            published_version: 0,
            fixed,
            fetcher: None,
            select: select::Selector::for_workflow(
                cfg.workflow,
                cfg.distributed.window_selector,
                ranks.0,
                ranks.1,
                cfg.seed,
            ),
        })
    }

    /// Where transports deliver this run's messages: the run thread
    /// (`events`), and the helpers some workflows have beside it — `seed`'s
    /// inference front (spawned on `rt`) and the `rma` pools.
    pub fn inbox(
        &mut self,
        events: std::sync::mpsc::Sender<Event>,
        rt: &tokio::runtime::Handle,
    ) -> RunInbox {
        let deposits = match &self.mode {
            Mode::Pools { pools, .. } => {
                pools.set_wake(events.clone());
                Some(pools.clone())
            }
            _ => None,
        };
        if let Mode::Pools {
            pools,
            pop_all: true,
        } = &self.mode
        {
            let (pools, run) = (pools.clone(), events.clone());
            self.fetcher = Some(
                std::thread::Builder::new()
                    .name(format!("fetch {}", self.id))
                    .spawn(move || pools.fetch_loop(run))
                    .expect("spawn the fetcher thread"),
            );
        }
        RunInbox {
            observations: self.start_front(events.clone(), rt),
            events,
            deposits,
        }
    }

    fn ledger(&self) -> MutexGuard<'_, EpisodeLedger> {
        self.ledger.lock().expect("ledger lock")
    }

    /// The exploration rate actors use now.
    fn actor_epsilon(&self) -> f32 {
        self.fixed
            .unwrap_or_else(|| self.agent.epsilon(self.book.counters.env_steps) as f32)
    }

    /// Batches an actor may have in flight.
    fn in_flight(&self) -> u32 {
        match self.cfg().workflow {
            WorkflowKind::NbAsync | WorkflowKind::AsyncWindow | WorkflowKind::Orchestrated => {
                self.cfg().distributed.in_flight
            }
            w if w.deposits() => self.cfg().distributed.in_flight,
            _ => 1,
        }
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
            if let Some(r) = self.poll_stop()? {
                break r;
            }
            let busy = self.work()?;
            let timeout = if busy {
                Duration::ZERO
            } else {
                self.idle_timeout()
            };
            let waited = Instant::now();
            let got = events.recv_timeout(timeout);
            if !busy {
                self.time.wait += waited.elapsed();
            }
            match got {
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
        self.stop_actors(&reason.to_string())?;
        // Requests that arrived after the end: answered `Stop`, and batches
        // among them counted as received and dropped.
        while let Ok(ev) = events.try_recv() {
            self.refuse_late(ev, &reason);
        }
        // From here on transports see the run as gone (and count late
        // batches themselves).
        drop(events);
        self.publish_status(RunState::Stopping, Some(reason.to_string()));
        self.accounts.flush();
        let t = self.accounts.tally.lock().expect("tally lock");
        self.book.learner = Some(super::LearnerFigures {
            train_secs: self.time.train.as_secs_f64(),
            wait_secs: self.time.wait.as_secs_f64(),
            batches_received: t.received,
            batches_trained: t.trained,
            batches_dropped: t.dropped.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        });
        drop(t);
        let shared = self.shared.clone();
        self.agent.finish_run(&self.cfg().output_dir.clone())?;
        let summary = self.book.finish(reason, self.agent.as_ref())?;
        let mut s = shared.status.lock().expect("status lock");
        s.target_reached = summary.target_reached();
        s.best_eval_return = summary.best_eval.map(|b| b.0);
        s.wall_secs = summary.counters.wall_secs;
        drop(s);
        Ok(summary)
    }

    /// The stop rules. `rma-queue-pop-all` and `ml-rma-queue` end on their
    /// actors' sentinels and empty pools once every episode has finished;
    /// `ml-rma-queue-short` ends when one learner's actor group is
    /// exhausted.
    fn poll_stop(&mut self) -> anyhow::Result<Option<StopReason>> {
        let r = self.book.poll()?;
        let Mode::Pools { pools, .. } = &self.mode else {
            return Ok(r);
        };
        let w = self.cfg().workflow;
        if w == WorkflowKind::MlRmaQueueShort
            && let Some(select) = &self.select
            && let Some(learner) = pools.exhausted_group(select)
        {
            return Ok(Some(StopReason::GroupExhausted { learner }));
        }
        if r == Some(StopReason::MaxEpisodes) && w.ends_on_sentinels() && !pools.all_ended() {
            return Ok(None);
        }
        Ok(r)
    }

    /// Trains on batches taken from the pools and publishes the weights
    /// deposits will read.
    fn train_popped(&mut self, popped: pools::Popped) -> anyhow::Result<()> {
        if popped.is_empty() {
            return Ok(());
        }
        for (conn, e) in popped {
            self.ingest(conn, &e, true)?;
        }
        self.publish_to_pools();
        Ok(())
    }

    /// The multi-learner `rma` workflows: each batch goes to the replay of
    /// the learner that took it, then the learners step together.
    fn train_picked(
        &mut self,
        picked: Vec<(usize, ConnId, Arc<Experience>)>,
    ) -> anyhow::Result<()> {
        if picked.is_empty() {
            return Ok(());
        }
        for (learner, conn, e) in picked {
            self.agent.route_to(learner);
            self.ingest(conn, &e, true)?;
        }
        self.publish_to_pools();
        Ok(())
    }

    fn publish_to_pools(&mut self) {
        let Mode::Pools { pools, .. } = &self.mode else {
            return;
        };
        let pools = pools.clone();
        let w = self.weights_msg();
        if w.version != self.published_version {
            self.published_version = w.version;
            pools.publish(w, self.actor_epsilon());
        } else {
            pools.epsilon(self.actor_epsilon());
        }
    }

    /// `rma-queue-pop-all`: a set the fetcher took. It may take the next
    /// one now, while this one trains.
    fn on_fetched(&mut self, set: pools::Popped) -> anyhow::Result<()> {
        if let Mode::Pools { pools, .. } = &self.mode {
            pools.fetched_taken();
        }
        self.train_popped(set)
    }

    /// How long the loop may wait for an event.
    fn idle_timeout(&self) -> Duration {
        match &self.mode {
            Mode::Window(w) => w.remaining(self.cfg().distributed.window_ms),
            _ => IDLE_TICK,
        }
    }

    /// What the learner does between events: flush an `async-window`
    /// window that closed; pop the `rma` pools and train. True if it
    /// trained.
    fn work(&mut self) -> anyhow::Result<bool> {
        match &self.mode {
            Mode::Window(w) if w.due(self.cfg().distributed.window_ms) => {
                self.flush_window()?;
                Ok(true)
            }
            Mode::Orchestrated(_) => self.orchestrate(),
            Mode::Pools { pools, pop_all } => {
                let (pools, pop_all) = (pools.clone(), *pop_all);
                for f in pools.take_finished() {
                    self.record_episode(f.actor, f.episode, f.ret, f.length)?;
                }
                if pop_all {
                    // Its fetcher hands sets over as `Event::Fetched`.
                    return Ok(false);
                }
                if let Some(select) = &mut self.select {
                    let picked = pools.pop_for_learners(select);
                    let busy = !picked.is_empty();
                    self.train_picked(picked)?;
                    return Ok(busy);
                }
                let popped = pools.pop_round();
                let busy = !popped.is_empty();
                self.train_popped(popped)?;
                Ok(busy)
            }
            _ => Ok(false),
        }
    }

    fn handle(&mut self, ev: Event) -> anyhow::Result<()> {
        match ev {
            Event::Join { conn, hello, reply } => self.on_join(conn, hello, reply),
            Event::Left { conn } => self.on_left(conn),
            Event::Acted(items) => self.on_acted(items)?,
            Event::Wake => {
                if let Mode::Pools { pools, .. } = &self.mode {
                    pools.woken();
                }
            }
            Event::Fetched(set) => self.on_fetched(set)?,
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
                    (
                        Message::Experience(e),
                        Mode::Async | Mode::Sync(_) | Mode::Window(_) | Mode::Orchestrated(_),
                    ) => self.on_experience(conn, e, reply)?,
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
        let _ = reply.send(refusal(&self.metrics, code, text));
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
            Mode::Pools { pools, .. } => {
                let slot = &self.actors[&conn];
                let version = slot.sent_version.unwrap_or(0);
                pools.admit(conn, slot.index, &slot.actor_id, n_envs, version);
            }
            Mode::Async | Mode::Window(_) | Mode::Orchestrated(_) => {}
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
        let epsilon = self.actor_epsilon();
        let in_flight = self.in_flight();
        let slot = self.actors.get_mut(&conn).expect("joined");
        slot.sent_version = weights.as_ref().map(|w| w.version);
        Message::Welcome(wire::Welcome {
            run_id: self.id.clone(),
            workflow: cfg.workflow.to_string(),
            env_id: cfg.env.clone(),
            obs_dim: self.spec.obs_dim() as u32,
            action_dim: self.spec.action_space.flat_dim() as u32,
            agent: cfg.agent.to_string(),
            hidden: cfg.policy_hidden().to_vec(),
            dueling: cfg.dueling(),
            onnx: self.onnx.clone(),
            n_envs: slot.n_envs,
            seed: cfg.seed ^ (u64::from(slot.index) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            batch_step_frequency: cfg.distributed.batch_step_frequency,
            steps_per_round: cfg.distributed.steps_per_round,
            in_flight,
            epsilon,
            weights,
            starts,
        })
    }

    /// Hands out episodes to the given envs of `conn`, as far as the ledger
    /// allows.
    fn issue(&mut self, conn: ConnId, envs: &[u32]) -> Vec<EpisodeStart> {
        let starts = issue_starts(
            &mut self.ledger.lock().expect("ledger lock"),
            &self.metrics,
            self.book.cfg.seed,
            conn,
            envs,
        );
        if let Some(slot) = self.actors.get_mut(&conn) {
            for s in &starts {
                if let Some(track) = slot.envs.get_mut(s.env as usize) {
                    *track = EnvTrack {
                        episode: Some(s.episode),
                        ..EnvTrack::default()
                    };
                }
            }
        }
        starts
    }

    fn on_left(&mut self, conn: ConnId) {
        let Some(slot) = self.actors.remove(&conn) else {
            return;
        };
        let requeued = self.ledger().release(conn);
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
            Mode::Pools { pools, .. } => pools.forget(conn),
            Mode::Async | Mode::Window(_) | Mode::Orchestrated(_) => {}
        }
        if requeued > 0 {
            self.serve_parked();
            if let Mode::Pools { pools, .. } = &self.mode {
                pools.serve_parked();
            }
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
            if !self.ledger().available() {
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
            epsilon: self.actor_epsilon(),
            starts,
            full: false,
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
        let finish = self.ledger().finish(episode, (conn, env));
        if finish != Finish::Counted {
            tracing::debug!(episode, ?finish, "episode end not counted");
            return Ok(());
        }
        self.agent.end_episode(episode);
        let actor = self.actors.get(&conn).map_or(u32::MAX, |s| s.index);
        self.record_episode(actor, episode, ret, length)
    }

    /// Writes out a finished episode the ledger counted.
    fn record_episode(
        &mut self,
        actor: u32,
        episode: u64,
        ret: f64,
        length: u32,
    ) -> anyhow::Result<()> {
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
        let started = Instant::now();
        while self.trained_upto < self.book.counters.env_steps {
            self.trained_upto += 1;
            self.agent.train(self.trained_upto);
        }
        self.time.train += started.elapsed();
        self.count_train_steps(before);
    }

    /// Metrics for the gradient steps taken since the agent was at
    /// version `before`.
    fn count_train_steps(&mut self, before: u64) {
        let steps = self.agent.train_steps() - before;
        if steps > 0 {
            self.metrics.train_steps.inc_by(steps);
            self.metrics
                .policy_version
                .set(self.agent.train_steps() as i64);
        }
    }

    /// Replies `Stop` to every request held back; what the learner already
    /// holds (a window's batches, the pools) is trained on.
    fn stop_actors(&mut self, reason: &str) -> anyhow::Result<()> {
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
        let version = self.agent.train_steps();
        match &mut self.mode {
            Mode::Sync(round) => {
                // Batches of the unfinished round were received, never
                // trained: count them dropped.
                let (untrained, replies) = round.take_all();
                for reply in replies {
                    let _ = reply.send(stop());
                }
                for e in untrained.iter().filter(|e| !e.transitions.is_empty()) {
                    self.accounts.dropped(e, version, "run_ended");
                }
            }
            Mode::Seed(link) => link.end(reason),
            Mode::Window(w) => {
                for (conn, e, reply) in w.take() {
                    self.ingest(conn, &e, false)?;
                    let _ = reply.send(stop());
                }
            }
            Mode::Orchestrated(o) => {
                // Inserts held back by the rate limiter go into replay.
                for (conn, e, reply) in std::mem::take(&mut o.waiting) {
                    self.ingest(conn, &e, false)?;
                    let _ = reply.send(stop());
                }
            }
            Mode::Pools { pools, .. } => {
                let pools = pools.clone();
                pools.close(reason);
                // A set it took before the close is in the channel once it
                // has ended (trained by `refuse_late`).
                if let Some(f) = self.fetcher.take() {
                    let _ = f.join();
                }
                for f in pools.take_finished() {
                    self.record_episode(f.actor, f.episode, f.ret, f.length)?;
                }
                let short = self.cfg().workflow == WorkflowKind::MlRmaQueueShort;
                for (conn, e) in pools.drain() {
                    if short {
                        // Its run ends without the rest of the queues.
                        self.accounts.dropped(&e, version, "run_ended");
                        continue;
                    }
                    if let Some(select) = &self.select {
                        let group = pools.index_of(conn).map_or(0, |i| select.group_of(i));
                        self.agent.route_to(group);
                    }
                    self.ingest(conn, &e, true)?;
                }
            }
            Mode::Async => {}
        }
        Ok(())
    }

    fn publish_status(&mut self, state: RunState, reason: Option<String>) {
        self.last_status = Instant::now();
        let (t, p) = (self.time, self.time_published);
        for (activity, now, before) in [("train", t.train, p.train), ("wait", t.wait, p.wait)] {
            self.metrics
                .loop_seconds
                .with_label_values(&[activity])
                .inc_by((now - before).as_secs_f64());
        }
        self.time_published = t;
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
        let (issued, reissued) = {
            let l = self.ledger();
            (l.issued, l.reissued)
        };
        s.episodes_issued = issued;
        s.episodes_reissued = reissued;
        s.recent_return = self.book.recent_mean();
        s.last_eval_return = self.book.last_eval;
        s.best_eval_return = self.book.best_eval();
        s.policy_version = self.agent.train_steps();
        s.train_steps = self.agent.train_steps();
        s.replay_size = self.agent.replay_len() as u64;
        let t = self.accounts.tally.lock().expect("tally lock");
        s.batches.received = t.received;
        s.batches.trained = t.trained;
        s.batches.dropped = t.dropped.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        s.transitions_ingested = t.transitions;
        s.inference_requests = t.inference_requests;
        drop(t);
        s.actors = self.actors.values().map(|a| a.actor_id.clone()).collect();
    }

    fn refuse_late(&mut self, ev: Event, reason: &StopReason) {
        if let Event::Fetched(set) = ev {
            // Taken out of the pools before they closed: trained like the
            // rest of what they held.
            if let Err(e) = self.train_popped(set) {
                tracing::error!("training the last fetched batches: {e:#}");
            }
            return;
        }
        if let Event::Request { msg, reply, .. } = ev {
            if let Message::Experience(e) = &msg
                && !e.transitions.is_empty()
            {
                self.accounts.received(e);
                self.accounts
                    .dropped(e, self.agent.train_steps(), "run_ended");
            }
            let _ = reply.send(Message::Stop(wire::Stop {
                reason: reason.to_string(),
                shutdown: false,
            }));
        }
    }
}

/// `random`: the exploration rate its actors use — uniformly random actions,
/// or (with `distributed.fixed_policy`) greedy ones from a checkpoint's
/// best evaluated weights (its latest when it has no evaluation), loaded
/// into `agent` here.
fn fixed_policy(cfg: &RunConfig, agent: &mut dyn Agent) -> anyhow::Result<f32> {
    let Some(path) = &cfg.distributed.fixed_policy else {
        return Ok(1.0);
    };
    let ck = crate::checkpoint::Checkpoint::load(path)?;
    ck.check_matches(path, &cfg.env, &cfg.agent.to_string())?;
    let weights = match ck.best {
        Some(best) => best.weights,
        None => Weights {
            version: ck.agent_state.version,
            data: ck.agent_state.tensor("online")?.data.clone(),
        },
    };
    agent
        .load_weights(&weights)
        .map_err(|e| anyhow::anyhow!("`{}`: {e}", path.display()))?;
    tracing::info!(
        version = weights.version,
        "random: acting greedily with the weights of {}",
        path.display()
    );
    Ok(0.0)
}
