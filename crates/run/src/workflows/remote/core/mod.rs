//! [`Core`]: what every distributed workflow shares on the run thread — the
//! agent, the [`RunBook`], the [`EpisodeLedger`], the batch [`Accounts`]
//! and the table of actors. Its fields are its own: workflows read it and
//! change it through methods (`access.rs`), and through the steps every
//! workflow is made of — admit, release, welcome, acknowledge
//! (`actors.rs`), episodes (`episodes.rs`), ingesting and training
//! (`ingest.rs`), its books in checkpoints (`books.rs`), status and end
//! (`status.rs`). It reads no clock (the driver tells it the time) and
//! writes no file but the batch log: the book queues what is to be written
//! for the driver's desk.

mod access;
mod actors;
mod books;
mod episodes;
mod give;
mod ingest;
mod plays;
mod status;

pub(super) use episodes::issue_starts;

use crate::metrics::RunMetrics;
use crate::vocab::RunShared;
use crate::vocab::{ConnId, Reply};
use crate::workflows::book::RunBook;
use crate::workflows::remote::accounts::Accounts;
use crate::workflows::remote::frames::Frames;
use crate::workflows::remote::ledger::EpisodeLedger;
use rlfleet_learning::agents::Agent;
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::wire::{self, ErrorCode, Message, WeightsMsg};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The `Error` a refused request is answered with (the transport then
/// closes the connection), counted and logged.
pub(super) fn refusal(metrics: &RunMetrics, code: ErrorCode, text: String) -> Message {
    tracing::warn!(code = code.label(), "refused: {text}");
    metrics
        .protocol_errors
        .with_label_values(&[code.label()])
        .inc();
    code.message(text)
}

/// The `Stop` a run's held-back requests are answered with.
pub(super) fn stop_message(reason: &str) -> Message {
    Message::Stop(wire::Stop {
        reason: reason.to_string(),
        shutdown: false,
    })
}

/// An experience request held back until it can be answered (an actor
/// with nothing to do): answered with an `Ack`.
#[derive(Debug)]
pub(super) struct Parked {
    pub seq: u64,
    pub idle: Vec<u32>,
    pub reply: Reply,
}

/// An actor taking part in the run.
#[derive(Debug)]
pub(super) struct ActorSlot {
    /// Join order in this run (the `actor` column of `episodes.csv`).
    pub index: u32,
    pub actor_id: String,
    /// The session of its `Hello` (a batch of another session is a resend
    /// from an earlier connection).
    pub session_id: u64,
    pub n_envs: u32,
    /// Version of the weights it holds.
    pub sent_version: Option<u64>,
    pub parked: Option<Parked>,
}

/// Where the learner's time goes: busy in the workflow (ingest, gradient
/// steps, answers, checkpoints), or waiting for data. The driver measures
/// both.
#[derive(Debug, Default, Clone, Copy)]
pub struct LearnerTime {
    pub train: Duration,
    pub wait: Duration,
    /// Of `train`: holding the daemon's device for gradient steps.
    pub device: Duration,
    /// Of `train`: waiting for other runs' turns on the device.
    pub device_wait: Duration,
}

/// What every workflow of a run shares; owned by the run thread.
pub(super) struct Core {
    id: String,
    agent: Box<dyn Agent>,
    book: RunBook,
    spec: EnvSpec,
    /// Shared with the `rma` pools, which issue episodes at deposit.
    ledger: Arc<Mutex<EpisodeLedger>>,
    actors: BTreeMap<ConnId, ActorSlot>,
    next_index: u32,
    /// Env steps ingested per (connection, episode) and not yet matched by
    /// that episode's counted end (its length is subtracted; an `rma` end
    /// can come before its steps are popped, so counts may be negative).
    episode_steps: HashMap<(ConnId, u64), i64>,
    /// What the agent holds of each episode's play.
    plays: plays::Plays,
    /// Env steps of episodes whose actor left before finishing them.
    abandoned: u64,
    /// Env errors since the last finished episode, and the last one's
    /// text (`distributed.max_env_errors_in_a_row`).
    errors_in_a_row: (u32, String),
    /// Batches received after a checkpoint by a learner process that then
    /// died, over the run's restarts.
    batches_lost: u64,
    /// Highest sequence number trained per (actor id, session id).
    trained_seq: HashMap<(String, u64), u64>,
    /// The workflow's part of the books: what the checkpoint restored,
    /// then what the workflow puts there before each checkpoint.
    workflow_books: Option<serde_json::Value>,
    /// The session of every connection admitted to the run, kept after it
    /// leaves (`rma` batches are trained after their connection is gone):
    /// a batch of another session is a resend.
    sessions: HashMap<ConnId, u64>,
    /// The latest weights, copied out once per version and shared by every
    /// message that carries them.
    weights: Option<WeightsMsg>,
    metrics: Arc<RunMetrics>,
    shared: Arc<RunShared>,
    accounts: Arc<Accounts>,
    /// Env steps already offered to `Learn::train`.
    trained_upto: u64,
    /// Training is paced by the workflow (`orchestrated`'s rate limiter),
    /// not by the agent's schedule.
    paced: bool,
    time: LearnerTime,
    /// The run's seat at the daemon's device (none: the device is its own).
    device: Option<crate::turns::Turn>,
    /// What the `seed` front did, put here by the workflow when the run
    /// ends (`seed` and `seed-a2c` only).
    front: Option<crate::workflows::FrontFigures>,
    /// `random`: the exploration its actors use, whatever the agent says.
    fixed_epsilon: Option<f32>,
    /// Most actors connected at once (`actors.max_actors`): what bounds
    /// the run's inboxes.
    max_actors: usize,
    /// Batches an actor may have in flight (`Welcome.in_flight`).
    in_flight: u32,
    /// The policy as an ONNX model with its weights as an input (every
    /// `Welcome` carries it).
    onnx: Vec<u8>,
    /// With `frame_stack` > 1, each actor env's stack (batches carry
    /// single frames).
    frames: Option<Frames>,
    /// The time now, as the driver last told it ([`Core::tell_time`]):
    /// the run core reads no clock.
    now: Instant,
    /// Answers to send, oldest first: the driver sends them after each
    /// call ([`Core::take_replies`]).
    replies: Vec<(Reply, Message)>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("id", &self.id)
            .field("actors", &self.actors.len())
            .finish()
    }
}

impl Core {
    pub fn new(
        id: &str,
        agent: Box<dyn Agent>,
        mut book: RunBook,
        spec: EnvSpec,
        metrics: Arc<RunMetrics>,
        shared: Arc<RunShared>,
        max_actors: usize,
    ) -> anyhow::Result<Core> {
        book.defer_checkpoints = true;
        let cfg = &book.cfg;
        let ledger = EpisodeLedger::new(cfg.stop.max_episodes, book.counters.episodes);
        let accounts = Accounts::new(metrics.clone(), cfg.distributed.batch_log, &cfg.output_dir)?;
        let k = cfg.frame_stack.max(1) as usize;
        Ok(Core {
            now: book.started(),
            replies: Vec::new(),
            frames: (k > 1).then(|| Frames::new(k, spec.obs_dim() / k, spec.obs_dtype.is_bytes())),
            onnx: rlfleet_shared::onnx::PolicyGraph::for_run(cfg, &spec).model(None),
            id: id.to_string(),
            trained_upto: book.counters.env_steps,
            agent,
            book,
            spec,
            ledger: Arc::new(Mutex::new(ledger)),
            actors: BTreeMap::new(),
            next_index: 0,
            trained_seq: HashMap::new(),
            sessions: HashMap::new(),
            workflow_books: None,
            episode_steps: HashMap::new(),
            plays: plays::Plays::default(),
            abandoned: 0,
            errors_in_a_row: (0, String::new()),
            batches_lost: 0,
            weights: None,
            metrics,
            shared,
            accounts: Arc::new(accounts),
            paced: false,
            time: LearnerTime::default(),
            front: None,
            fixed_epsilon: None,
            in_flight: 1,
            max_actors,
            device: None,
        })
    }

    /// Seats the run at the daemon's device: its gradient steps take turns.
    pub fn seat(&mut self, device: Option<crate::turns::Turn>) {
        self.device = device;
    }

    /// The driver tells the core the time before each call into it.
    pub fn tell_time(&mut self, now: Instant) {
        self.now = now;
    }

    /// The time now, as the driver last told it.
    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn cfg(&self) -> &RunConfig {
        &self.book.cfg
    }

    pub fn obs_dim(&self) -> usize {
        self.spec.obs_dim()
    }

    /// Values of one frame: what batches and requests carry per
    /// observation (the observation itself unless `frame_stack` > 1).
    pub fn frame_dim(&self) -> usize {
        self.obs_dim() / self.cfg().frame_stack.max(1) as usize
    }

    /// The shapes this run's batches must have.
    pub(super) fn shapes(&self) -> crate::workflows::remote::checks::Shapes {
        crate::workflows::remote::checks::Shapes {
            obs_dim: self.frame_dim(),
            obs_u8: self.spec.obs_dtype.is_bytes(),
            action_space: self.spec.action_space.clone(),
            state_len: self
                .cfg()
                .policy_net(&self.spec)
                .core
                .map_or(0, |c| c.state_len()),
        }
    }

    pub fn act_dim(&self) -> usize {
        self.spec.action_space.flat_dim()
    }

    pub fn ledger(&self) -> MutexGuard<'_, EpisodeLedger> {
        self.ledger.lock().expect("ledger lock")
    }

    /// The exploration rate actors use now.
    pub fn actor_epsilon(&self) -> f32 {
        self.fixed_epsilon
            .unwrap_or_else(|| self.agent.epsilon(self.book.counters.env_steps) as f32)
    }

    /// The exploration rate of actor `conn` now (R2D2 gives each actor
    /// its rung of a ladder, by the order they joined).
    pub fn epsilon_of(&self, conn: ConnId) -> f32 {
        match (self.fixed_epsilon, self.actors.get(&conn)) {
            (None, Some(slot)) => self
                .agent
                .actor_epsilon(self.book.counters.env_steps, u64::from(slot.index))
                as f32,
            _ => self.actor_epsilon(),
        }
    }

    /// Answers `reply` with a counted, logged `Error`.
    pub fn refuse(&mut self, reply: Reply, code: ErrorCode, text: String) {
        let answer = refusal(&self.metrics, code, text);
        self.reply(reply, answer);
    }

    /// Queues `msg` as the answer to `reply`, for the driver to send.
    pub fn reply(&mut self, reply: Reply, msg: Message) {
        self.replies.push((reply, msg));
    }

    /// The answers queued since the last call, oldest first.
    pub fn take_replies(&mut self) -> Vec<(Reply, Message)> {
        std::mem::take(&mut self.replies)
    }
}
