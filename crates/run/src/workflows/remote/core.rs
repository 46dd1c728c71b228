//! [`Core`]: what every distributed workflow shares on the run thread — the
//! agent, the [`RunBook`], the [`EpisodeLedger`], the batch [`Accounts`]
//! and the table of actors — with the steps every workflow is made of:
//! admit, release, welcome, acknowledge (`actors.rs`). (Episodes are in
//! `episodes.rs`, ingesting and training in `ingest.rs`.)

use super::accounts::Accounts;
use super::frames::Frames;
use super::ledger::EpisodeLedger;
use crate::metrics::Metrics;
use crate::vocab::RunShared;
use crate::vocab::{ConnId, Reply};
use crate::workflows::book::RunBook;
use rlfleet_learning::agents::Agent;
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::wire::{self, ErrorCode, Message, WeightsMsg};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The `Error` a refused request is answered with (the transport then
/// closes the connection), counted and logged.
pub(super) fn refusal(metrics: &Metrics, code: ErrorCode, text: String) -> Message {
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
}

/// What every workflow of a run shares; owned by the run thread.
pub(super) struct Core {
    pub id: String,
    pub agent: Box<dyn Agent>,
    pub book: RunBook,
    pub spec: EnvSpec,
    /// Shared with the `rma` pools, which issue episodes at deposit.
    pub ledger: Arc<Mutex<EpisodeLedger>>,
    pub actors: BTreeMap<ConnId, ActorSlot>,
    pub(super) next_index: u32,
    /// Env steps ingested per (connection, episode) and not yet matched by
    /// that episode's counted end (its length is subtracted; an `rma` end
    /// can come before its steps are popped, so counts may be negative).
    pub(super) episode_steps: HashMap<(ConnId, u64), i64>,
    /// Env steps of episodes whose actor left before finishing them.
    pub abandoned: u64,
    /// Batches received after a checkpoint by a learner process that then
    /// died, over the run's restarts.
    pub batches_lost: u64,
    /// Highest sequence number trained per (actor id, session id).
    pub(super) trained_seq: HashMap<(String, u64), u64>,
    /// The workflow's part of the books: what the checkpoint restored,
    /// then what the workflow puts there before each checkpoint.
    pub(super) workflow_books: Option<serde_json::Value>,
    /// The session of every connection admitted to the run, kept after it
    /// leaves (`rma` batches are trained after their connection is gone):
    /// a batch of another session is a resend.
    pub(super) sessions: HashMap<ConnId, u64>,
    /// The latest weights, copied out once per version and shared by every
    /// message that carries them.
    pub(super) weights: Option<WeightsMsg>,
    pub metrics: Arc<Metrics>,
    pub shared: Arc<RunShared>,
    pub accounts: Arc<Accounts>,
    /// Env steps already offered to `Learn::train`.
    pub(super) trained_upto: u64,
    /// Training is paced by the workflow (`orchestrated`'s rate limiter),
    /// not by the agent's schedule.
    pub paced: bool,
    pub time: LearnerTime,
    /// What the `seed` front did, put here by the workflow when the run
    /// ends (`seed` and `seed-a2c` only).
    pub front: Option<crate::workflows::FrontFigures>,
    /// `random`: the exploration its actors use, whatever the agent says.
    pub fixed_epsilon: Option<f32>,
    /// Most actors connected at once (`actors.max_actors`): what bounds
    /// the run's inboxes.
    pub max_actors: usize,
    /// Batches an actor may have in flight (`Welcome.in_flight`).
    pub in_flight: u32,
    /// The policy as an ONNX model with its weights as an input (every
    /// `Welcome` carries it).
    pub(super) onnx: Vec<u8>,
    /// With `frame_stack` > 1, each actor env's stack (batches carry
    /// single frames).
    pub(super) frames: Option<Frames>,
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
        metrics: Arc<Metrics>,
        shared: Arc<RunShared>,
        max_actors: usize,
    ) -> anyhow::Result<Core> {
        book.defer_checkpoints = true;
        let saved = book.restored_run.take();
        let cfg = &book.cfg;
        let ledger = EpisodeLedger::new(cfg.stop.max_episodes, book.counters.episodes);
        let accounts = Accounts::new(metrics.clone(), cfg.distributed.batch_log, &cfg.output_dir)?;
        let k = cfg.frame_stack.max(1) as usize;
        let mut core = Core {
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
            abandoned: 0,
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
        };
        let restored = core.restore_books(saved)?;
        if let Some(mut from) = core.book.resumed_from.clone() {
            from.batches_lost = restored.lost_now;
            tracing::info!(
                run = %core.id,
                env_steps = from.env_steps,
                batches_lost = from.batches_lost,
                "run resumed from {}",
                from.checkpoint
            );
            // The API's curve holds what the files hold.
            let rows = rlfleet_output::read_episodes(&core.cfg().output_dir.join("episodes.csv"))
                .unwrap_or_default();
            *core.shared.episodes.lock().expect("episodes lock") = rows
                .into_iter()
                .map(|r| crate::vocab::EpisodeView {
                    episode: r.episode,
                    actor: r.actor,
                    ret: r.ret,
                    length: r.length,
                    policy_version: r.policy_version,
                    env_steps: r.env_steps,
                    wall_secs: r.wall_secs,
                })
                .collect();
            let mut s = core.shared.status.lock().expect("status lock");
            s.resumed_from = Some(from);
        }
        Ok(core)
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
    pub(super) fn shapes(&self) -> super::checks::Shapes {
        super::checks::Shapes {
            obs_dim: self.frame_dim(),
            obs_u8: self.spec.obs_dtype.is_bytes(),
            action_space: self.spec.action_space.clone(),
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
    pub fn refuse(&self, reply: Reply, code: ErrorCode, text: String) {
        let _ = reply.send(refusal(&self.metrics, code, text));
    }
}
