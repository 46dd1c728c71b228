//! Env groups (feature `mpi`, `ranks_per_env` above 1): one environment
//! instance spans K consecutive actor ranks, as EXARL's
//! `process_per_env` splits its env communicators. The group's first rank
//! is the actor ([`lead::GroupLead`]: its [`lead::GroupEnv`]s stand in for
//! the envs in [`crate::envs::EnvSlots`]); the others follow
//! ([`follow::serve`]). Every `reset` and `step` is collective: the
//! leader sends the command (episode seed, action) to every rank, each
//! rank calls its own copy of the env — which partitions its work over
//! the env's own communicator ([`rlfleet_shared::mpi::EnvComm`], a fresh
//! duplicate per env instance) — and reports back; the leader's result is
//! the step's.
//!
//! Faults stay inside the group's episode. Each rank runs its env on a
//! thread ([`Worker`]), so a rank can stop waiting for it: when a rank's
//! env raises, that rank tells every other rank, and each abandons its
//! call — a call waiting in a collective that the raising rank never
//! reached gives up ([`rlfleet_shared::mpi::Abandon`]: the env's
//! collectives are non-blocking underneath, and so are a Python env's
//! buffer collectives through its `comm`) — the leader reports the
//! episode as an env fault naming the rank, and the group builds a new env
//! on every rank.

pub mod follow;
pub mod lead;

use rlfleet_shared::env::{Env, EnvCall, EnvReply, EnvSource, EnvThread};
use rlfleet_shared::mpi::Abandon;
use serde::{Deserialize, Serialize};

/// Commands, leader to each other rank of the group.
const TAG_COMMAND: i32 = 21;
/// A rank's outcome of a command, to the leader.
const TAG_STATUS: i32 = 22;
/// "My env raised at command `seq`": from the raising rank to the others.
const TAG_NOTICE: i32 = 23;

/// What the leader asks of the group.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Command {
    /// Build env `id` from the run's source (each rank duplicates the
    /// control communicator for it, collectively).
    Build {
        id: u64,
        seq: u64,
        source: EnvSource,
    },
    Reset {
        id: u64,
        seq: u64,
        seed: u64,
    },
    Step {
        id: u64,
        seq: u64,
        /// A discrete action, or else `action`.
        discrete: Option<u64>,
        action: Vec<f32>,
    },
    /// Env `id` is gone on the leader (replaced or finished).
    Drop {
        id: u64,
    },
    /// The run is over: leave.
    Stop,
}

/// A rank's answer to command `seq`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Status {
    seq: u64,
    /// The rank in the group.
    rank: u32,
    outcome: Outcome,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Outcome {
    /// Done; for a build, the env's observation and action sizes.
    Done { obs_dim: u64, action_dim: u64 },
    /// This rank's env raised (or could not be built).
    Raised(String),
    /// Another rank raised, and this rank stopped waiting for its env.
    Abandoned,
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("group messages serialize")
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("a malformed env-group message: {e}"))
}

/// One rank's env on a thread of its own ([`EnvThread`]), so that the
/// rank can stop waiting for a call (another rank raised).
struct Worker {
    thread: EnvThread,
    /// Gets a call stuck in one of the env's collectives out.
    abandon: Abandon,
}

impl Worker {
    fn new(env: Box<dyn Env>, abandon: Abandon) -> Worker {
        Worker {
            thread: EnvThread::spawn(env),
            abandon,
        }
    }

    /// Stops waiting for the current call: a collective it waits in gives
    /// up, and the thread ends with it.
    fn abandon(self) {
        self.abandon.abandon();
    }

    fn start(&self, call: EnvCall) {
        self.thread.start(call);
    }

    /// The reply, once there.
    fn poll(&self) -> Option<EnvReply> {
        self.thread.try_reply()
    }
}

/// The worker's call a reset or step command becomes.
fn call_of(cmd: &Command) -> Option<EnvCall> {
    match cmd {
        Command::Reset { seed, .. } => Some(EnvCall::Reset(Some(*seed))),
        Command::Step {
            discrete, action, ..
        } => Some(EnvCall::Step(discrete.map(|d| d as usize), action.clone())),
        _ => None,
    }
}
