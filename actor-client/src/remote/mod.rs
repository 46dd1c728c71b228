//! The actor's side of the learner protocol: say hello, follow the
//! assigned workflow over any [`Link`] — the experience workflows
//! (`experience.rs`: play with local weights, send experience, with the
//! in-flight window in `flight.rs`) or `seed` (`seed.rs`: send
//! observations, play the returned actions). Over QUIC ([`run`],
//! `connect.rs`): connect with backoff, and after a lost connection
//! reconnect with a new session id and resend the batches that were not
//! acknowledged; one process's envs may be split over several such
//! connections (`lanes.rs`). In the learner's own process
//! ([`run_inproc`]): messages as values over channels. As an MPI rank:
//! the `mpi_link` module (feature `mpi`), through [`run_link`].

mod client;
mod connect;
mod experience;
mod flight;
mod lanes;
mod link;
mod loss_watch;
mod seed;

pub use client::{ClientOptions, RunEnded, SeedClient};
pub use connect::run;
pub use lanes::{lane_options, run_lanes};
pub use link::{InprocLink, Link};

use rand::Rng;
use rlfleet_quic::{Liveness, Trust};
use rlfleet_shared::config::WorkflowKind;
use rlfleet_shared::wire::{self, Hello, Message, Submission};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The runtime an actor's connection lives on: one worker thread drives
/// the QUIC endpoint (keep-alives, acknowledgements, retransmissions)
/// while the thread that calls `block_on` steps envs — or, for
/// [`SeedClient`], is away in the user's simulator between calls. On a
/// single-threaded runtime, an env step or a simulator pause longer than
/// the idle timeout (5 s by default) cost the connection; an actor that
/// really hangs is dropped by the learner (`[actors] actor_timeout_secs`).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("rlfleet-actor-io")
        .enable_all()
        .build()
}

/// Who the actor is and how it plays, whatever carries its messages.
#[derive(Debug, Clone)]
pub struct Player {
    pub actor_id: String,
    pub token: String,
    pub envs: u32,
    /// Exit when the first run ends instead of waiting for the next.
    pub once: bool,
    /// Serve only this run (its id or name) of a daemon that holds several.
    pub run: Option<String>,
    /// What runs the policy network.
    pub inference: Inference,
    /// Builds the envs instead of the run's env source (the Python client).
    pub env_factory: Option<crate::envs::EnvFactory>,
}

/// The backend that runs an actor's policy network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Inference {
    /// ONNX Runtime for networks with a convolutional torso, plain Rust
    /// for MLPs.
    #[default]
    Auto,
    /// Plain Rust (`rlfleet_shared::nets::NetCopy`).
    Rust,
    /// ONNX Runtime, from the model in `Welcome.onnx`.
    Ort,
}

impl Inference {
    /// Whether the policy `w` describes runs in ONNX Runtime.
    pub fn uses_ort(self, w: &wire::Welcome) -> bool {
        match self {
            Inference::Auto => w.torso.is_some(),
            Inference::Rust => false,
            Inference::Ort => true,
        }
    }
}

/// How an actor reaches its learner over QUIC.
#[derive(Debug, Clone)]
pub struct ActorOptions {
    /// `HOST:PORT` of the learner's QUIC listener.
    pub server: String,
    /// Name checked against the certificate (default: the host part).
    pub server_name: Option<String>,
    pub trust: Trust,
    pub player: Player,
    pub liveness: Liveness,
    pub max_frame_bytes: u32,
    /// Give up after failing to connect for this long.
    pub give_up_after: Duration,
    /// In a run, a reply the learner owes longer than this ends the
    /// connection and the actor connects again (none: wait for ever).
    pub reply_timeout: Option<Duration>,
}

/// What an actor did, for its exit line and tests.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ActorReport {
    pub sessions: u64,
    pub env_steps: u64,
    pub episodes: u64,
    pub batches_sent: u64,
    pub batches_resent: u64,
    /// Replies saying the learner's pool was full (the batch went again).
    pub batches_refused: u64,
    pub inference_requests: u64,
}

impl std::fmt::Display for ActorReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "actor done: {} env steps, {} episodes, {} batches ({} resent, {} refused), {} inference requests, {} sessions",
            self.env_steps,
            self.episodes,
            self.batches_sent,
            self.batches_resent,
            self.batches_refused,
            self.inference_requests,
            self.sessions
        )
    }
}

/// Why a session ended.
#[derive(Debug)]
enum SessionEnd {
    /// The learner said stop; `shutdown`: it is going away.
    Stopped { shutdown: bool },
    /// This actor cannot play the run it was welcomed into (its env
    /// cannot be built here): why.
    Cannot(String),
    /// The connection dropped.
    Lost(String),
}

/// A refusal from the learner that reconnecting will not fix.
#[derive(Debug, thiserror::Error)]
#[error("the learner refused this actor ({}): {text}", code.label())]
pub struct Refused {
    pub code: wire::ErrorCode,
    pub text: String,
}

/// State that survives reconnects.
#[derive(Debug)]
struct Carry {
    /// Batches sent but not acknowledged, with the run they belong to.
    pending: Option<(String, Vec<Submission>)>,
    seq: u64,
    report: ActorReport,
    /// `once`: the run this actor joined. After a reconnect it plays on
    /// only in that run (a restarted learner resumes it at once); welcomed
    /// into another, or not welcomed within `rejoin_limit`, it leaves.
    joined: Option<String>,
    rejoin_limit: Option<Duration>,
}

/// Runs an in-process actor until the learner stops it (or `cancel`
/// fires). An in-process link does not drop, so there is no reconnect.
pub async fn run_inproc(
    player: &Player,
    mut link: InprocLink,
    cancel: CancellationToken,
) -> anyhow::Result<ActorReport> {
    run_link(player, &mut link, cancel)
        .await
        .map_err(|e| e.context("in-process link lost"))
}

/// Runs one session over a link that is never re-established (in-process,
/// an MPI rank) until the learner stops it or `cancel` fires; a lost link
/// is an error.
pub async fn run_link<L: Link>(
    player: &Player,
    link: &mut L,
    cancel: CancellationToken,
) -> anyhow::Result<ActorReport> {
    let mut carry = Carry {
        pending: None,
        seq: 0,
        joined: None,
        rejoin_limit: None,
        report: ActorReport {
            sessions: 1,
            ..ActorReport::default()
        },
    };
    let mut backoff = Duration::ZERO;
    let end = tokio::select! {
        r = session(player, link, &mut carry, &mut backoff) => r?,
        _ = cancel.cancelled() => SessionEnd::Stopped { shutdown: true },
    };
    if let SessionEnd::Lost(why) = end {
        anyhow::bail!("{why}");
    }
    Ok(carry.report)
}

/// A reply as the session sees it: `Ok(Ok(m))` to go on with, `Ok(Err)`
/// when the session ends (the link was lost, or the learner said stop),
/// `Err` when the learner refused this actor (fatal).
fn answer(reply: Result<Message, String>) -> anyhow::Result<Result<Message, SessionEnd>> {
    match reply {
        Err(why) => Ok(Err(SessionEnd::Lost(why))),
        Ok(Message::Stop(s)) => {
            tracing::info!("learner: stop ({})", s.reason);
            Ok(Err(SessionEnd::Stopped {
                shutdown: s.shutdown,
            }))
        }
        Ok(Message::Error(e)) => Err(Refused {
            code: e.code,
            text: e.text,
        }
        .into()),
        Ok(other) => Ok(Ok(other)),
    }
}

/// Hello, then the workflow the learner assigns, run after run (unless
/// `once`), until the learner stops the actor or the link is lost.
async fn session<L: Link>(
    opts: &Player,
    fs: &mut L,
    carry: &mut Carry,
    backoff: &mut Duration,
) -> anyhow::Result<SessionEnd> {
    let session_id: u64 = connect::fresh_rng().random();
    loop {
        let hello = Message::Hello(Hello {
            protocol: wire::PROTOCOL_VERSION,
            software: wire::SOFTWARE_VERSION.into(),
            actor_id: opts.actor_id.clone(),
            session_id,
            token: opts.token.clone(),
            env_capacity: opts.envs,
            run: opts.run.clone().unwrap_or_default(),
            once: opts.once,
        });
        let call = fs.call(hello);
        let reply = match (&carry.joined, carry.rejoin_limit) {
            (Some(run), Some(limit)) if opts.once => {
                match tokio::time::timeout(limit, call).await {
                    Ok(r) => r,
                    Err(_) => {
                        tracing::warn!(
                            run = %run,
                            "its run did not come back within {} s: it is over; leaving (--once)",
                            limit.as_secs_f64()
                        );
                        return Ok(SessionEnd::Stopped { shutdown: true });
                    }
                }
            }
            _ => call.await,
        };
        let welcome = match answer(reply)? {
            Ok(Message::Welcome(w)) => w,
            Ok(other) => anyhow::bail!("expected welcome, got {}", other.kind()),
            Err(end) => return Ok(end),
        };
        if opts.once {
            match &carry.joined {
                Some(run) if *run != welcome.run_id => {
                    tracing::warn!(
                        run = %run,
                        next = %welcome.run_id,
                        "its run is over; leaving (--once)"
                    );
                    return Ok(SessionEnd::Stopped { shutdown: true });
                }
                _ => carry.joined = Some(welcome.run_id.clone()),
            }
        }
        *backoff = Duration::from_millis(100);
        tracing::info!(run = %welcome.run_id, workflow = %welcome.workflow, n_envs = welcome.n_envs, "joined");
        let end = match welcome.workflow {
            WorkflowKind::Seed | WorkflowKind::SeedA2c => {
                seed::play_seed(opts, fs, &welcome, carry).await?
            }
            k if k.sends_experience() => {
                experience::play_experience(opts, fs, &welcome, session_id, carry).await?
            }
            k => anyhow::bail!("workflow `{k}` has no actors"),
        };
        match end {
            SessionEnd::Stopped { shutdown: false } if !opts.once => continue,
            // A daemon with other runs offers them instead.
            SessionEnd::Cannot(why) if !opts.once && opts.run.is_none() => {
                tracing::warn!(run = %welcome.run_id, "cannot take part in this run ({why}); declined: the learner offers other runs");
                let decline = Message::Decline(wire::Decline {
                    run_id: welcome.run_id.clone(),
                    reason: why,
                });
                if let Err(why) = fs.send(decline).await {
                    return Ok(SessionEnd::Lost(why));
                }
                continue;
            }
            SessionEnd::Cannot(why) => {
                anyhow::bail!("cannot take part in run `{}`: {why}", welcome.run_id)
            }
            end => return Ok(end),
        }
    }
}
