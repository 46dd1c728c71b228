//! What the control API shows about runs and actors: snapshots the run
//! thread and the transports keep current, and [`RunShared`], the part of
//! a run the API reads while the run thread writes it.

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Mutex;
use utoipa::ToSchema;

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Accepted, waiting for a slot (`[runs] max_active`).
    Queued,
    Running,
    Stopping,
    Finished,
    Failed,
}

/// Batches by fate: `received = trained + sum(dropped)` once a run ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema)]
pub struct BatchTally {
    pub received: u64,
    pub trained: u64,
    /// Dropped batches by reason (`duplicate`, `stale`, `invalid`).
    pub dropped: BTreeMap<String, u64>,
}

/// A run as `GET /v1/runs/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct RunStatus {
    pub id: String,
    pub name: String,
    pub workflow: String,
    pub env: String,
    pub agent: String,
    pub state: RunState,
    /// Why it ended (once it has).
    pub reason: Option<String>,
    /// The error that ended it, if it failed.
    pub error: Option<String>,
    pub env_steps: u64,
    pub episodes_finished: u64,
    pub episodes_issued: u64,
    pub episodes_reissued: u64,
    /// Env steps of episodes abandoned by actors that left (those episodes
    /// were played again): `env_steps` = the finished episodes' lengths +
    /// this + the steps of episodes still being played.
    pub env_steps_abandoned: u64,
    /// Env steps of episodes still being played (once the run has ended:
    /// of those its stop cut off).
    pub env_steps_in_play: u64,
    /// Exceptions the run's environments raised (Python envs); each
    /// episode they broke was re-issued.
    pub env_errors: u64,
    /// Batches a learner process received after the run's last checkpoint
    /// and lost when it died, over every restart (never silently).
    pub batches_lost: u64,
    /// The checkpoint this process resumed the run from.
    pub resumed_from: Option<ResumedFrom>,
    /// Mean return of the last 20 finished episodes.
    pub recent_return: Option<f64>,
    pub last_eval_return: Option<f64>,
    pub best_eval_return: Option<f64>,
    pub target_reached: bool,
    pub policy_version: u64,
    pub train_steps: u64,
    pub replay_size: u64,
    /// Bytes the replay holds, by its own accounting (uint8 observations
    /// take a quarter of f32's).
    pub replay_bytes: u64,
    pub batches: BatchTally,
    pub transitions_ingested: u64,
    pub inference_requests: u64,
    /// Actor ids taking part now.
    pub actors: Vec<String>,
    /// Envs of the actors the daemon's fleet gives the run now.
    pub envs: u32,
    /// Where it waits while queued (`priority`).
    pub priority: i64,
    /// Why it waits, while queued (a slot, or device memory).
    pub queued_reason: Option<String>,
    /// Device memory the daemon reserves for it (`[fleet]
    /// device_memory_mb`, or the daemon's estimate), in MB.
    pub device_memory_mb: u64,
    /// Seconds its gradient steps held the daemon's device.
    pub device_secs: f64,
    /// Seconds its gradient steps waited for other runs' turns on it.
    pub device_wait_secs: f64,
    /// Checkpoint writes that failed (each try; they are retried).
    pub checkpoint_failures: u64,
    /// Why checkpoints fail, while they do.
    pub checkpoint_error: Option<String>,
    /// Env steps of the last checkpoint written (the resume point).
    pub checkpoint_env_steps: Option<u64>,
    pub wall_secs: f64,
    pub output_dir: String,
}

impl RunStatus {
    /// The status of a run that is just starting.
    pub fn starting(id: &str, cfg: &rlfleet_shared::config::RunConfig) -> RunStatus {
        RunStatus {
            id: id.to_string(),
            name: cfg.name.clone(),
            workflow: cfg.workflow.to_string(),
            env: cfg.env.clone(),
            agent: cfg.agent.to_string(),
            state: RunState::Running,
            reason: None,
            error: None,
            env_steps: 0,
            episodes_finished: 0,
            episodes_issued: 0,
            episodes_reissued: 0,
            env_steps_abandoned: 0,
            env_steps_in_play: 0,
            env_errors: 0,
            batches_lost: 0,
            resumed_from: None,
            recent_return: None,
            last_eval_return: None,
            best_eval_return: None,
            target_reached: false,
            policy_version: 0,
            train_steps: 0,
            replay_size: 0,
            replay_bytes: 0,
            batches: BatchTally::default(),
            transitions_ingested: 0,
            inference_requests: 0,
            actors: Vec::new(),
            envs: 0,
            priority: cfg.priority,
            queued_reason: None,
            device_memory_mb: 0,
            device_secs: 0.0,
            device_wait_secs: 0.0,
            checkpoint_failures: 0,
            checkpoint_error: None,
            checkpoint_env_steps: None,
            wall_secs: 0.0,
            output_dir: cfg.output_dir.display().to_string(),
        }
    }
}

/// Where a resumed run came from (`resumed_from` in the API's status).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ResumedFrom {
    pub checkpoint: String,
    pub env_steps: u64,
    /// The run's wall seconds at the checkpoint.
    pub wall_secs: f64,
    /// Batches received after that checkpoint and lost with the process
    /// that died (0 after a clean stop).
    pub batches_lost: u64,
}

/// A finished episode, as `GET /v1/runs/{id}/episodes` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct EpisodeView {
    pub episode: u64,
    /// Index of the actor in the run (join order).
    pub actor: u32,
    #[serde(rename = "return")]
    pub ret: f64,
    pub length: u32,
    pub policy_version: u64,
    pub env_steps: u64,
    pub wall_secs: f64,
}

impl From<rlfleet_output::EpisodeRecord> for EpisodeView {
    /// A row of `episodes.csv`.
    fn from(r: rlfleet_output::EpisodeRecord) -> EpisodeView {
        EpisodeView {
            episode: r.episode,
            actor: r.actor,
            ret: r.ret,
            length: r.length,
            policy_version: r.policy_version,
            env_steps: r.env_steps,
            wall_secs: r.wall_secs,
        }
    }
}

/// A connected actor, as `GET /v1/actors` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ActorView {
    pub connection: u64,
    pub actor_id: String,
    pub session_id: u64,
    pub address: String,
    pub software: String,
    pub env_capacity: u32,
    /// The run it takes part in, if any.
    pub run: Option<String>,
    /// The run it serves alone (`actor-client --run`), if any.
    pub pinned: Option<String>,
    /// Active runs it cannot take part in, and why (it could not build
    /// their env, say): they are not offered to it again.
    pub declined: BTreeMap<String, String>,
    pub connected_secs: f64,
}

/// The state a run shares with the API.
#[derive(Debug)]
pub struct RunShared {
    pub status: Mutex<RunStatus>,
    pub episodes: Mutex<Vec<EpisodeView>>,
    /// The daemon's systemd watchdog, pinged from the run's loop.
    pub watchdog: std::sync::Arc<crate::notify::Watchdog>,
}
