//! The actor's side of the learner protocol: say hello, follow the
//! assigned workflow — the experience workflows (play with local weights,
//! send experience) or `seed` (send observations, play the returned actions) —
//! over any [`Link`]. Over QUIC ([`run`]): connect with exponential backoff
//! and jitter, and after a lost connection reconnect with a new session id
//! and resend the batch that was not acknowledged. In the learner's own
//! process ([`run_inproc`]): messages as values over channels. As an MPI
//! rank: `crate::mpi_link` (feature `mpi`), through [`run_link`].

use crate::envs::EnvSlots;
use rand::Rng;
use rlfleet_shared::config::WorkflowKind;
use rlfleet_shared::policy::ActorPolicy;
use rlfleet_shared::quic::{FramedStream, Liveness, Trust, client_endpoint};
use rlfleet_shared::wire::{
    self, EpisodeResult, Experience, Hello, Message, Observations, Transitions, Welcome, flags,
};
use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Who the actor is and how it plays, whatever carries its messages.
#[derive(Debug, Clone)]
pub struct Player {
    pub actor_id: String,
    pub token: String,
    pub envs: u32,
    /// Exit when the first run ends instead of waiting for the next.
    pub once: bool,
    /// What runs the policy network.
    pub inference: Inference,
}

/// The backend that runs an actor's policy network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Inference {
    /// Plain Rust (`rlfleet_shared::nets::MlpCopy`).
    #[default]
    Rust,
    /// ONNX Runtime, from the model in `Welcome.onnx`.
    Ort,
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
enum SessionEnd {
    /// The learner said stop; `shutdown`: it is going away.
    Stopped { shutdown: bool },
    /// The connection dropped.
    Lost(String),
}

/// A refusal from the learner that reconnecting will not fix.
#[derive(Debug, thiserror::Error)]
#[error("the learner refused this actor ({code}): {text}")]
pub struct Refused {
    pub code: u16,
    pub text: String,
}

/// State that survives reconnects.
#[derive(Debug)]
struct Carry {
    /// Batches sent but not acknowledged, with the run they belong to.
    pending: Option<(String, Vec<Experience>)>,
    seq: u64,
    report: ActorReport,
}

/// One request to the learner and its reply. `Err` says why the link was
/// lost.
pub trait Link: Send {
    fn send(&mut self, msg: &Message) -> impl Future<Output = Result<(), String>> + Send;
    /// The next reply (replies come in request order).
    fn recv(&mut self) -> impl Future<Output = Result<Message, String>> + Send;
    fn call(&mut self, msg: &Message) -> impl Future<Output = Result<Message, String>> + Send {
        async move {
            self.send(msg).await?;
            self.recv().await
        }
    }
}

impl Link for FramedStream {
    async fn send(&mut self, msg: &Message) -> Result<(), String> {
        FramedStream::send(self, msg)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }

    async fn recv(&mut self) -> Result<Message, String> {
        match FramedStream::recv(self).await {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err("the learner closed the stream".into()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// An actor in the learner's process: messages as values over channels
/// (the learner's in-process transport holds the other ends).
#[derive(Debug)]
pub struct InprocLink {
    pub to_learner: mpsc::Sender<Message>,
    pub from_learner: mpsc::Receiver<Message>,
}

impl Link for InprocLink {
    async fn send(&mut self, msg: &Message) -> Result<(), String> {
        self.to_learner
            .send(msg.clone())
            .await
            .map_err(|_| "the learner is gone".to_string())
    }

    async fn recv(&mut self) -> Result<Message, String> {
        self.from_learner
            .recv()
            .await
            .ok_or_else(|| "the learner is gone".to_string())
    }
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

/// Runs the actor until the learner stops it (or `cancel` fires).
pub async fn run(opts: ActorOptions, cancel: CancellationToken) -> anyhow::Result<ActorReport> {
    let endpoint = client_endpoint(&opts.trust, opts.liveness)?;
    let host = opts
        .server
        .rsplit_once(':')
        .map(|(h, _)| h.trim_matches(['[', ']']).to_string())
        .unwrap_or_else(|| opts.server.clone());
    let server_name = opts.server_name.clone().unwrap_or(host);
    let mut carry = Carry {
        pending: None,
        seq: 0,
        report: ActorReport::default(),
    };
    let mut backoff = Duration::from_millis(100);
    let mut failing_since: Option<std::time::Instant> = None;
    loop {
        if cancel.is_cancelled() {
            break;
        }
        let attempt = async {
            let addr = tokio::net::lookup_host(&opts.server)
                .await?
                .next()
                .ok_or_else(|| anyhow::anyhow!("`{}` resolves to no address", opts.server))?;
            let conn = endpoint.connect(addr, &server_name)?.await?;
            let (send, recv) = conn.open_bi().await?;
            anyhow::Ok((conn, FramedStream::new(send, recv, opts.max_frame_bytes)))
        };
        let (conn, mut fs) = match attempt.await {
            Ok(c) => c,
            Err(e) => {
                let since = *failing_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() > opts.give_up_after {
                    anyhow::bail!("cannot reach the learner at {}: {e:#}", opts.server);
                }
                let jitter = fresh_rng().random_range(0.5..1.5);
                tracing::warn!(
                    "cannot connect to {}: {e:#}; retrying in {:.0?}",
                    opts.server,
                    backoff.mul_f64(jitter)
                );
                tokio::time::sleep(backoff.mul_f64(jitter)).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        failing_since = None;
        carry.report.sessions += 1;
        let end = tokio::select! {
            r = session(&opts.player, &mut fs, &mut carry, &mut backoff) => r,
            _ = cancel.cancelled() => Ok(SessionEnd::Stopped { shutdown: true }),
        };
        match end {
            Ok(SessionEnd::Stopped { shutdown }) => {
                let _ = fs.send.finish();
                conn.close(0u32.into(), b"done");
                if shutdown || opts.player.once {
                    break;
                }
            }
            Ok(SessionEnd::Lost(why)) => {
                tracing::warn!("connection lost ({why}); reconnecting");
            }
            Err(e) => {
                conn.close(1u32.into(), b"error");
                return Err(e);
            }
        }
    }
    endpoint.wait_idle().await;
    Ok(carry.report)
}

/// A generator seeded from the clock and the process id (session ids and
/// backoff jitter need to differ between processes, not be reproducible).
fn fresh_rng() -> rand_pcg::Pcg64 {
    use rand::SeedableRng;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    rand_pcg::Pcg64::seed_from_u64(nanos ^ (u64::from(std::process::id()) << 32))
}

/// Sends and waits for the reply; maps link trouble to `Lost`.
async fn call<L: Link>(link: &mut L, msg: &Message) -> Result<Message, SessionEnd> {
    link.call(msg).await.map_err(SessionEnd::Lost)
}

/// Unwraps a reply: `Stop` ends the session, `Error` is fatal.
fn expect_reply(m: Message) -> anyhow::Result<Result<Message, SessionEnd>> {
    match m {
        Message::Stop(s) => {
            tracing::info!("learner: stop ({})", s.reason);
            Ok(Err(SessionEnd::Stopped {
                shutdown: s.shutdown,
            }))
        }
        Message::Error(e) => Err(Refused {
            code: e.code,
            text: e.text,
        }
        .into()),
        other => Ok(Ok(other)),
    }
}

macro_rules! reply {
    ($e:expr) => {
        match $e {
            Ok(m) => match expect_reply(m)? {
                Ok(m) => m,
                Err(end) => return Ok(end),
            },
            Err(end) => return Ok(end),
        }
    };
}

async fn session<L: Link>(
    opts: &Player,
    fs: &mut L,
    carry: &mut Carry,
    backoff: &mut Duration,
) -> anyhow::Result<SessionEnd> {
    let session_id: u64 = fresh_rng().random();
    loop {
        let hello = Message::Hello(Hello {
            protocol: wire::PROTOCOL_VERSION,
            software: wire::SOFTWARE_VERSION.into(),
            actor_id: opts.actor_id.clone(),
            session_id,
            token: opts.token.clone(),
            env_capacity: opts.envs,
        });
        let welcome = match reply!(call(fs, &hello).await) {
            Message::Welcome(w) => w,
            other => anyhow::bail!("expected welcome, got {}", other.kind()),
        };
        *backoff = Duration::from_millis(100);
        tracing::info!(run = %welcome.run_id, workflow = %welcome.workflow, n_envs = welcome.n_envs, "joined");
        let end = match WorkflowKind::from_name(&welcome.workflow) {
            Some(WorkflowKind::Seed | WorkflowKind::SeedA2c) => {
                play_seed(fs, &welcome, carry).await?
            }
            Some(k) if k.sends_experience() => {
                play_experience(opts, fs, &welcome, session_id, carry).await?
            }
            _ => anyhow::bail!("this actor does not know workflow `{}`", welcome.workflow),
        };
        match end {
            SessionEnd::Stopped { shutdown: false } if !opts.once => continue,
            end => return Ok(end),
        }
    }
}

/// The experience workflows (`async`, `sync`, `nb-async`, `async-window`,
/// `rma`, `rma-queue-pop-all`, `random`): act with local weights and send a
/// batch every `batch_step_frequency` steps or at an episode end
/// (`steps_per_round` steps, episode ends included, for `sync`). Up to
/// `in_flight` batches may be unacknowledged while the actor keeps playing;
/// replies arrive in order and carry newer weights and episodes. A batch the
/// learner's pool refused (full) is sent again, in order, after a pause.
async fn play_experience<L: Link>(
    opts: &Player,
    fs: &mut L,
    w: &Welcome,
    session_id: u64,
    carry: &mut Carry,
) -> anyhow::Result<SessionEnd> {
    let mut envs = EnvSlots::new(w)?;
    let mut policy = ActorPolicy::for_welcome(w).map_err(anyhow::Error::msg)?;
    if opts.inference == Inference::Ort {
        let net = policy.net().clone();
        let forward = crate::ort_net::OrtForward::new(&w.onnx, net)?;
        policy = policy
            .with_forward(Box::new(forward))
            .map_err(anyhow::Error::msg)?;
    }
    if let Some(weights) = &w.weights {
        policy
            .load(weights.version, &weights.data)
            .map_err(anyhow::Error::msg)?;
    }
    policy.set_exploration(w.epsilon);
    envs.start(&w.starts)?;
    let mut flight = Flight {
        window: w.in_flight.max(1) as usize,
        ..Flight::default()
    };
    // Batches the previous session sent but never saw acknowledged.
    if let Some((run, pending)) = carry.pending.take()
        && run == w.run_id
    {
        for mut e in pending {
            e.idle_envs.clear();
            carry.report.batches_resent += 1;
            if let Err(end) = send(fs, &mut flight, e).await {
                return Ok(end);
            }
        }
    }
    let result = experience_loop(
        opts,
        fs,
        w,
        session_id,
        carry,
        &mut envs,
        &mut policy,
        &mut flight,
    )
    .await;
    if !flight.sent.is_empty() || !flight.refused.is_empty() {
        let mut pending: Vec<Experience> = flight.refused.drain(..).collect();
        pending.extend(flight.sent.drain(..));
        pending.sort_by_key(|e| e.seq);
        carry.pending = Some((w.run_id.clone(), pending));
    }
    result
}

/// Batches between the actor and the learner.
#[derive(Debug, Default)]
struct Flight {
    /// Most batches sent and not yet acknowledged.
    window: usize,
    /// Sent, awaiting their `Ack`, oldest first.
    sent: VecDeque<Experience>,
    /// Refused because the learner's pool was full: sent again, in order.
    refused: Vec<Experience>,
    /// Envs reported idle in a batch whose reply has not come yet.
    asked: Vec<bool>,
}

async fn send<L: Link>(fs: &mut L, flight: &mut Flight, e: Experience) -> Result<(), SessionEnd> {
    let msg = Message::Experience(e);
    let sent = fs.send(&msg).await;
    let Message::Experience(e) = msg else {
        unreachable!("built above")
    };
    flight.sent.push_back(e);
    sent.map_err(SessionEnd::Lost)
}

#[allow(clippy::too_many_arguments)]
async fn experience_loop<L: Link>(
    opts: &Player,
    fs: &mut L,
    w: &Welcome,
    session_id: u64,
    carry: &mut Carry,
    envs: &mut EnvSlots,
    policy: &mut ActorPolicy,
    flight: &mut Flight,
) -> anyhow::Result<SessionEnd> {
    let sync = WorkflowKind::from_name(&w.workflow) == Some(WorkflowKind::Sync);
    let every = if sync {
        w.steps_per_round
    } else {
        w.batch_step_frequency
    } as usize;
    let (od, n) = (envs.obs_dim, envs.slots.len());
    flight.asked = vec![false; n];
    let mut obs = Vec::with_capacity(n * od);
    let mut actions = Vec::new();
    let mut running = Vec::with_capacity(n);
    let mut pause = Duration::from_millis(1);
    loop {
        let any_running = envs.slots.iter().any(|s| s.episode.is_some());
        // Take replies while the window is full, while there is nothing to
        // play and replies are due, and before sending refused batches again.
        while flight.sent.len() >= flight.window
            || (!flight.sent.is_empty() && (!any_running || !flight.refused.is_empty()))
        {
            let m = match fs.recv().await {
                Ok(m) => m,
                Err(why) => return Ok(SessionEnd::Lost(why)),
            };
            let m = match expect_reply(m)? {
                Ok(m) => m,
                Err(end) => return Ok(end),
            };
            on_ack(m, envs, policy, flight, carry)?;
            if envs.slots.iter().any(|s| s.episode.is_some()) && flight.refused.is_empty() {
                break;
            }
        }
        if !flight.refused.is_empty() && flight.sent.is_empty() {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
            for e in std::mem::take(&mut flight.refused) {
                if let Err(end) = send(fs, flight, e).await {
                    return Ok(end);
                }
            }
            continue;
        }
        pause = Duration::from_millis(1);
        let mut batch = Transitions::default();
        let mut finished = Vec::new();
        let mut steps = 0;
        while steps < every {
            running.clear();
            running.extend((0..n).filter(|&i| envs.slots[i].episode.is_some()));
            if running.is_empty() {
                break;
            }
            obs.clear();
            for &i in &running {
                obs.extend_from_slice(&envs.slots[i].obs);
            }
            policy.act(&obs, running.len(), &mut actions);
            let mut ended = false;
            for (k, &i) in running.iter().enumerate() {
                let a = &actions[k..k + 1];
                let step = envs.step(i, a);
                let slot = &mut envs.slots[i];
                batch.obs.extend_from_slice(&obs[k * od..(k + 1) * od]);
                batch.actions.extend_from_slice(a);
                batch.rewards.push(step.reward as f32);
                batch.next_obs.extend_from_slice(&slot.obs);
                batch.terminated.push(u8::from(step.terminated));
                batch.episode.push(slot.episode.expect("running"));
                if step.done() {
                    finished.push(EpisodeResult {
                        episode: slot.episode.take().expect("running"),
                        env: i as u32,
                        ret: slot.ret,
                        length: slot.len,
                    });
                    ended = true;
                }
            }
            steps += 1;
            if ended && !sync {
                break;
            }
        }
        let idle: Vec<u32> = envs
            .idle()
            .into_iter()
            .filter(|&i| !flight.asked[i as usize])
            .collect();
        if batch.is_empty() && idle.is_empty() && !flight.sent.is_empty() {
            // Nothing to report: wait for the replies due.
            continue;
        }
        for &i in &idle {
            flight.asked[i as usize] = true;
        }
        carry.seq += 1;
        carry.report.env_steps += batch.len() as u64;
        carry.report.episodes += finished.len() as u64;
        if !batch.is_empty() {
            carry.report.batches_sent += 1;
        }
        let e = Experience {
            actor_id: opts.actor_id.clone(),
            session_id,
            seq: carry.seq,
            policy_version: policy.version(),
            last: envs.slots.iter().all(|s| s.episode.is_none()),
            transitions: batch,
            finished,
            idle_envs: idle,
        };
        if let Err(end) = send(fs, flight, e).await {
            return Ok(end);
        }
    }
}

/// Applies the reply to the oldest batch in flight.
fn on_ack(
    m: Message,
    envs: &mut EnvSlots,
    policy: &mut ActorPolicy,
    flight: &mut Flight,
    carry: &mut Carry,
) -> anyhow::Result<()> {
    let Message::Ack(ack) = m else {
        anyhow::bail!("expected ack, got {}", m.kind());
    };
    let Some(e) = flight.sent.pop_front() else {
        anyhow::bail!("an ack for seq {} with no batch in flight", ack.seq);
    };
    anyhow::ensure!(
        ack.seq == e.seq,
        "an ack for seq {}, the oldest batch in flight is {}",
        ack.seq,
        e.seq
    );
    if ack.full {
        if !e.transitions.is_empty() {
            carry.report.batches_refused += 1;
        }
        flight.refused.push(e);
        return Ok(());
    }
    for &i in &e.idle_envs {
        flight.asked[i as usize] = false;
    }
    if let Some(weights) = &ack.weights {
        anyhow::ensure!(
            weights.version >= policy.version(),
            "the learner sent weights version {} after version {}",
            weights.version,
            policy.version()
        );
        policy
            .load(weights.version, &weights.data)
            .map_err(anyhow::Error::msg)?;
    }
    policy.set_exploration(ack.epsilon);
    envs.start(&ack.starts)
}

/// `seed`: no model here. Send every env's observation (with the outcome
/// of its last action), play the actions that come back.
async fn play_seed<L: Link>(
    fs: &mut L,
    w: &Welcome,
    carry: &mut Carry,
) -> anyhow::Result<SessionEnd> {
    let mut envs = EnvSlots::new(w)?;
    envs.start(&w.starts)?;
    let (od, ad, n) = (envs.obs_dim, envs.act_dim, envs.slots.len());
    // Per env: the flags and reward to report next.
    let mut flag: Vec<u8> = envs
        .slots
        .iter()
        .map(|s| {
            if s.episode.is_some() {
                flags::FRESH
            } else {
                flags::IDLE
            }
        })
        .collect();
    let mut rewards = vec![0f32; n];
    let mut seq = 0;
    loop {
        seq += 1;
        let mut obs = Vec::with_capacity(n * od);
        for s in &envs.slots {
            obs.extend_from_slice(&s.obs);
        }
        let req = Observations {
            seq,
            obs,
            rewards: rewards.clone(),
            flags: flag.clone(),
        };
        carry.report.inference_requests += 1;
        let m = reply!(call(fs, &Message::Observations(req)).await);
        let Message::Actions(a) = m else {
            anyhow::bail!("expected actions, got {}", m.kind());
        };
        anyhow::ensure!(
            a.actions.len() == n * ad,
            "actions for {} values, expected {}",
            a.actions.len(),
            n * ad
        );
        for i in 0..n {
            let acting = flag[i] & (flags::IDLE | flags::TERMINATED | flags::TRUNCATED) == 0;
            if acting && envs.slots[i].episode.is_some() {
                let step = envs.step(i, &a.actions[i * ad..(i + 1) * ad]);
                carry.report.env_steps += 1;
                rewards[i] = step.reward as f32;
                flag[i] = (u8::from(step.terminated) * flags::TERMINATED)
                    | (u8::from(step.truncated) * flags::TRUNCATED);
                if step.done() {
                    envs.slots[i].episode = None;
                    carry.report.episodes += 1;
                }
            } else {
                envs.slots[i].episode = None;
                rewards[i] = 0.0;
                flag[i] = flags::IDLE;
            }
        }
        envs.start(&a.starts)?;
        for s in &a.starts {
            flag[s.env as usize] = flags::FRESH;
            rewards[s.env as usize] = 0.0;
        }
    }
}
