//! [`Core`]: what every distributed workflow shares on the run thread — the
//! agent, the [`RunBook`], the [`EpisodeLedger`], the batch [`Accounts`]
//! and the table of actors — with the steps every workflow is made of:
//! admit, welcome, issue episodes, acknowledge, record finished episodes.
//! (Ingesting and training are in `ingest.rs`.)

use super::accounts::Accounts;
use super::ledger::{EpisodeLedger, Finish};
use crate::agents::{Agent, Weights};
use crate::hub::{EpisodeView, RunShared};
use crate::metrics::Metrics;
use crate::transport::{ConnId, Reply};
use crate::workflows::book::RunBook;
use crate::workflows::episode_seed;
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::wire::{self, EpisodeStart, ErrorCode, Hello, Message, WeightsMsg};
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

/// Hands out episodes to the given envs of `conn`, as far as the ledger
/// allows (the fetch-and-add of the `rma` workflows).
pub(super) fn issue_starts(
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
    pub n_envs: u32,
    /// Version of the weights it holds.
    pub sent_version: Option<u64>,
    pub parked: Option<Parked>,
}

/// Where the learner's time goes: training (ingest and gradient steps)
/// and waiting for data.
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
    next_index: u32,
    /// Env steps ingested per (connection, episode) and not yet matched by
    /// that episode's counted end (its length is subtracted; an `rma` end
    /// can come before its steps are popped, so counts may be negative).
    episode_steps: HashMap<(ConnId, u64), i64>,
    /// Env steps of episodes whose actor left before finishing them.
    pub abandoned: u64,
    /// Highest sequence number trained per (actor id, session id).
    pub(super) trained_seq: HashMap<(String, u64), u64>,
    /// The latest weights, copied out once per version and shared by every
    /// message that carries them.
    weights: Option<(u64, Arc<Vec<f32>>)>,
    pub metrics: Arc<Metrics>,
    pub shared: Arc<RunShared>,
    pub accounts: Arc<Accounts>,
    /// Env steps already offered to `Agent::train`.
    pub(super) trained_upto: u64,
    /// Training is paced by the workflow (`orchestrated`'s rate limiter),
    /// not by the agent's schedule.
    pub paced: bool,
    pub time: LearnerTime,
    /// `random`: the exploration its actors use, whatever the agent says.
    pub fixed_epsilon: Option<f32>,
    /// Batches an actor may have in flight (`Welcome.in_flight`).
    pub in_flight: u32,
    /// The policy as an ONNX model with its weights as an input (every
    /// `Welcome` carries it).
    onnx: Vec<u8>,
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
        book: RunBook,
        spec: EnvSpec,
        metrics: Arc<Metrics>,
        shared: Arc<RunShared>,
    ) -> anyhow::Result<Core> {
        let cfg = &book.cfg;
        let ledger = EpisodeLedger::new(cfg.stop.max_episodes, book.counters.episodes);
        let accounts = Accounts::new(metrics.clone(), cfg.distributed.batch_log, &cfg.output_dir)?;
        Ok(Core {
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
            episode_steps: HashMap::new(),
            abandoned: 0,
            weights: None,
            metrics,
            shared,
            accounts: Arc::new(accounts),
            paced: false,
            time: LearnerTime::default(),
            fixed_epsilon: None,
            in_flight: 1,
        })
    }

    pub fn cfg(&self) -> &RunConfig {
        &self.book.cfg
    }

    pub fn obs_dim(&self) -> usize {
        self.spec.obs_dim()
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

    /// Answers `reply` with a counted, logged `Error`.
    pub fn refuse(&self, reply: Reply, code: ErrorCode, text: String) {
        let _ = reply.send(refusal(&self.metrics, code, text));
    }

    /// Enters an actor into the run's table (envs clamped to the run's
    /// maximum).
    pub fn admit(&mut self, conn: ConnId, hello: Hello) {
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
        self.actors.insert(
            conn,
            ActorSlot {
                index,
                actor_id: hello.actor_id,
                n_envs,
                sent_version: None,
                parked: None,
            },
        );
    }

    /// Takes `conn` out of the table; its unfinished episodes go back to
    /// the ledger. `None` if it was not in the run; else how many went back.
    pub fn release(&mut self, conn: ConnId) -> Option<usize> {
        let slot = self.actors.remove(&conn)?;
        let requeued = self.ledger().release(conn);
        // Its unfinished episodes will be played again from their start.
        let mut abandoned = 0;
        self.episode_steps.retain(|&(c, _), n| {
            let keep = c != conn || *n < 0;
            if !keep {
                abandoned += *n as u64;
            }
            keep
        });
        self.abandon(abandoned);
        tracing::info!(
            run = %self.id,
            actor = %slot.actor_id,
            requeued,
            "actor left; its unfinished episodes go to others"
        );
        Some(requeued)
    }

    /// The assignment for a newly admitted actor, with an episode for each
    /// of its envs that can get one (and the weights, `with_weights`).
    pub fn welcome(&mut self, conn: ConnId, with_weights: bool) -> Message {
        let all: Vec<u32> = (0..self.actors[&conn].n_envs).collect();
        let starts = self.issue(conn, &all);
        self.welcome_with(conn, with_weights, starts)
    }

    /// [`Core::welcome`] with the episode starts already issued.
    pub fn welcome_with(
        &mut self,
        conn: ConnId,
        with_weights: bool,
        starts: Vec<EpisodeStart>,
    ) -> Message {
        let weights = with_weights.then(|| self.weights_msg());
        let epsilon = self.actor_epsilon();
        let slot = self.actors.get_mut(&conn).expect("joined");
        slot.sent_version = weights.as_ref().map(|w| w.version);
        let (index, n_envs) = (slot.index, slot.n_envs);
        let cfg = &self.book.cfg;
        Message::Welcome(wire::Welcome {
            run_id: self.id.clone(),
            workflow: cfg.workflow,
            env_id: cfg.env.clone(),
            obs_dim: self.spec.obs_dim() as u32,
            action_dim: self.spec.action_space.flat_dim() as u32,
            agent: cfg.agent,
            hidden: cfg.policy_hidden().to_vec(),
            dueling: cfg.dueling(),
            onnx: self.onnx.clone(),
            n_envs,
            seed: cfg.seed ^ (u64::from(index) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            batch_step_frequency: cfg.distributed.batch_step_frequency,
            steps_per_round: cfg.distributed.steps_per_round,
            in_flight: self.in_flight,
            epsilon,
            weights,
            starts,
        })
    }

    /// Hands out episodes to the given envs of `conn`, as far as the ledger
    /// allows.
    pub fn issue(&mut self, conn: ConnId, envs: &[u32]) -> Vec<EpisodeStart> {
        issue_starts(
            &mut self.ledger.lock().expect("ledger lock"),
            &self.metrics,
            self.book.cfg.seed,
            conn,
            envs,
        )
    }

    /// The latest weights: copied out of the agent once per version, the
    /// copy shared by every message that carries them.
    pub fn weights(&mut self) -> (u64, Arc<Vec<f32>>) {
        let version = self.agent.train_steps();
        if self.weights.as_ref().is_none_or(|w| w.0 != version) {
            let Weights { version, data } = self.agent.weights();
            self.weights = Some((version, Arc::new(data)));
        }
        self.weights.clone().expect("just set")
    }

    /// The latest weights as a message.
    pub fn weights_msg(&mut self) -> WeightsMsg {
        let (version, data) = self.weights();
        WeightsMsg {
            version,
            data: data.as_ref().clone(),
        }
    }

    /// An `Ack`, with the weights when the actor's are older.
    pub fn ack(
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

    /// `n` env steps of `episode`, played by `conn`, were ingested.
    pub fn steps_ingested(&mut self, conn: ConnId, episode: u64, n: u64) {
        let key = (conn, episode);
        if let Some(open) = self.episode_steps.get_mut(&key) {
            *open += n as i64;
            if *open == 0 {
                self.episode_steps.remove(&key);
            }
        } else if self.actors.contains_key(&conn) {
            self.episode_steps.insert(key, n as i64);
        } else {
            // Its actor left: the episode was re-issued.
            self.abandon(n);
        }
    }

    /// `conn`'s `episode` of `length` steps was counted finished.
    pub fn episode_counted(&mut self, conn: ConnId, episode: u64, length: u32) {
        let key = (conn, episode);
        let open = self.episode_steps.entry(key).or_default();
        *open -= i64::from(length);
        if *open == 0 {
            self.episode_steps.remove(&key);
        }
    }

    fn abandon(&mut self, steps: u64) {
        self.abandoned += steps;
        self.metrics.env_steps_abandoned.inc_by(steps);
    }

    /// Counts a finished episode reported for (conn, env) if the ledger
    /// agrees it is the reporter's to finish.
    pub fn finish_episode(
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
        self.episode_counted(conn, episode, length);
        let actor = self.actors.get(&conn).map_or(u32::MAX, |s| s.index);
        self.record_episode(actor, episode, ret, length)
    }

    /// Writes out a finished episode the ledger counted.
    pub fn record_episode(
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

    /// Replies `Stop` to every request held back.
    pub fn stop_parked(&mut self, reason: &str) {
        for slot in self.actors.values_mut() {
            if let Some(p) = slot.parked.take() {
                let _ = p.reply.send(stop_message(reason));
            }
        }
    }
}
