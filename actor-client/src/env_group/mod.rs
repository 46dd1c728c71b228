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

use rlfleet_shared::env::{Action, Env, EnvFault, EnvSource, Step};
use rlfleet_shared::mpi::Abandon;
use serde::{Deserialize, Serialize};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};

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
        source: Source,
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

/// [`EnvSource`] as it travels.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Source {
    id: String,
    kwargs_json: String,
    wrappers: Vec<String>,
    python_path: Vec<String>,
    frame_stack: u32,
}

impl From<&EnvSource> for Source {
    fn from(s: &EnvSource) -> Source {
        Source {
            id: s.id.clone(),
            kwargs_json: s.kwargs_json.clone(),
            wrappers: s.wrappers.clone(),
            python_path: s.python_path.clone(),
            frame_stack: s.frame_stack,
        }
    }
}

impl From<Source> for EnvSource {
    fn from(s: Source) -> EnvSource {
        EnvSource {
            id: s.id,
            kwargs_json: s.kwargs_json,
            wrappers: s.wrappers,
            python_path: s.python_path,
            frame_stack: s.frame_stack,
        }
    }
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

/// A call on a [`Worker`]'s env.
enum Call {
    Reset(u64),
    Step(Option<usize>, Vec<f32>),
}

/// What a call returned: the observation, and the step (`None` for a
/// reset).
type Reply = Result<(Vec<f32>, Option<Step>), EnvFault>;

/// One rank's env on a thread of its own, so that the rank can stop
/// waiting for a call (another rank raised). Dropped, the thread ends
/// after its current call, taking the env (and its communicator) with it.
struct Worker {
    calls: Sender<Call>,
    replies: Receiver<Reply>,
    /// Gets a call stuck in one of the env's collectives out.
    abandon: Abandon,
}

impl Worker {
    fn new(mut env: Box<dyn Env>, abandon: Abandon) -> Worker {
        let (calls, inbox) = mpsc::channel::<Call>();
        let (outbox, replies) = mpsc::channel();
        let mut obs = vec![0f32; env.spec().obs_dim()];
        std::thread::Builder::new()
            .name("env-group".into())
            .spawn(move || {
                for call in inbox {
                    let reply = match call {
                        Call::Reset(seed) => env
                            .try_reset(Some(seed), &mut obs)
                            .map(|()| (obs.clone(), None)),
                        Call::Step(discrete, a) => {
                            let action = match discrete {
                                Some(i) => Action::Discrete(i),
                                None => Action::Continuous(&a),
                            };
                            env.try_step(action, &mut obs)
                                .map(|s| (obs.clone(), Some(s)))
                        }
                    };
                    if outbox.send(reply).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn an env thread");
        Worker {
            calls,
            replies,
            abandon,
        }
    }

    /// Stops waiting for the current call: a collective it waits in gives
    /// up, and the thread ends with it.
    fn abandon(self) {
        self.abandon.abandon();
    }

    fn start(&self, call: Call) {
        // A send fails only when the thread ended (it panicked): `poll`
        // then says so.
        let _ = self.calls.send(call);
    }

    /// The reply, once there.
    fn poll(&self) -> Option<Reply> {
        match self.replies.try_recv() {
            Ok(r) => Some(r),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                Some(Err(EnvFault("the env's thread ended (it panicked)".into())))
            }
        }
    }
}

/// The command a reset or step becomes, and the worker's call.
fn call_of(cmd: &Command) -> Option<Call> {
    match cmd {
        Command::Reset { seed, .. } => Some(Call::Reset(*seed)),
        Command::Step {
            discrete, action, ..
        } => Some(Call::Step(discrete.map(|d| d as usize), action.clone())),
        _ => None,
    }
}
