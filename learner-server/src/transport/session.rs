//! [`Session`]: one actor's conversation with the learner over any
//! [`Wire`] — check `Hello` (protocol version, token), register the actor,
//! route it to the run the fleet assigns (waiting for one if none will
//! take it), relay its requests to the run's [`Intake`] and the run's
//! replies back, move it when the fleet says so, and say hello again for
//! the next run. Transports supply the wire; refusals come back as
//! [`End`] for the transport to answer and close.

use crate::registry::{MoveSignal, Registry, Wants};
use crate::server_config::tokens_match;
use rlfleet_run::vocab::{ActorView, Answer, ConnId, Departed, RunGone, RunInbox};
use rlfleet_shared::wire::{self, ErrorCode, Hello, Message};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How a session ended.
#[derive(Debug)]
pub enum End {
    /// The actor finished its stream, or was told to stop for good.
    Clean,
    /// The actor sent something unacceptable (not yet answered or counted).
    Refused(ErrorCode, String),
    /// The run refused a request; the `Error` was sent and counted.
    Answered(ErrorCode),
    /// The connection dropped (closed, reset, timed out).
    Lost,
    /// It kept the run waiting past `actor_timeout` (logged, counted).
    Silent(String),
}

/// Messages to and from one actor.
pub trait Wire: Send {
    /// The next message; `None` when the actor finished cleanly.
    fn recv(&mut self) -> impl Future<Output = Result<Option<Message>, End>> + Send;
    /// Sends `msg` (by value: the in-process wire hands it over as it is).
    fn send(&mut self, msg: Message) -> impl Future<Output = Result<(), End>> + Send;
    /// Resolves when the actor's side is gone.
    fn closed(&self) -> impl Future<Output = ()> + Send;
    /// The actor's `Hello` was accepted (version and token): limits kept
    /// for unauthenticated peers may be lifted.
    fn authenticated(&mut self) {}
}

/// Tells the run the connection left: [`LeaveGuard::leave`], or when
/// dropped (a session cancelled mid-exchange).
struct LeaveGuard {
    run: Option<RunInbox>,
    conn: ConnId,
}

impl LeaveGuard {
    /// Tells the run; resolves once it has taken the departure.
    fn leave(mut self) -> Departed {
        let run = self.run.take().expect("leave is called once");
        run.left(self.conn)
    }
}

impl Drop for LeaveGuard {
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            // Nobody waits: the session is gone.
            drop(run.left(self.conn));
        }
    }
}

/// One actor's conversation with the learner, whatever carries it.
#[derive(Debug)]
pub struct Session<W> {
    pub wire: W,
    pub id: ConnId,
    pub registry: Arc<Registry>,
    /// Actors must present this token, when set.
    pub token: Option<String>,
    registered: bool,
    /// How long a new connection has to send its `Hello` (none: no limit).
    pub hello_timeout: Option<Duration>,
    /// How long the actor may take to send its next request (none: ever).
    pub actor_timeout: Option<Duration>,
    /// The last run this actor took part in: batches it had in flight
    /// when that run ended are accounted there.
    last_run: Option<RunInbox>,
    /// Set once registered: says when the fleet moves this actor.
    moves: Option<Arc<MoveSignal>>,
}

impl<W: Wire> Session<W> {
    pub fn new(wire: W, id: ConnId, registry: Arc<Registry>, token: Option<String>) -> Session<W> {
        Session {
            wire,
            id,
            registry,
            token,
            registered: false,
            hello_timeout: None,
            actor_timeout: None,
            last_run: None,
            moves: None,
        }
    }

    /// Reads `Hello` and checks it.
    async fn hello(&mut self) -> Result<Option<Hello>, End> {
        let hello = loop {
            let next = match self.hello_timeout.filter(|_| !self.registered) {
                Some(limit) => tokio::time::timeout(limit, self.wire.recv())
                    .await
                    .map_err(|_| {
                        End::Refused(
                            ErrorCode::Unexpected,
                            format!("no hello within {} ms", limit.as_millis()),
                        )
                    })?,
                None => self.wire.recv().await,
            };
            match next? {
                Some(Message::Hello(h)) => break h,
                // Batches the actor had in flight when its run ended.
                Some(Message::Experience(e)) if self.registered => self.count_late(e),
                // A request for work, or a `seed` actor's observations, sent
                // before it read its stop: moot now (their episodes were
                // abandoned when the session left its run).
                Some(Message::WorkRequest(_) | Message::Observations(_)) if self.registered => {}
                Some(other) => {
                    return Err(End::Refused(
                        ErrorCode::Unexpected,
                        format!("expected hello, got {}", other.kind()),
                    ));
                }
                None => return Ok(None),
            }
        };
        if hello.protocol != wire::PROTOCOL_VERSION {
            return Err(End::Refused(
                ErrorCode::ProtocolVersion,
                format!(
                    "protocol version {} is not supported: this learner speaks {}",
                    hello.protocol,
                    wire::PROTOCOL_VERSION
                ),
            ));
        }
        if let Some(token) = &self.token
            && !tokens_match(token, &hello.token)
        {
            return Err(End::Refused(
                ErrorCode::Unauthorized,
                "missing or wrong token".into(),
            ));
        }
        self.wire.authenticated();
        Ok(Some(hello))
    }

    /// A batch that came after its run ended: dropped `run_ended` by that
    /// run, or counted unrouted when the session never had one.
    fn count_late(&self, e: wire::Experience) {
        if let Some(run) = &self.last_run {
            run.late(self.id, e);
        } else if !e.steps.is_empty() {
            self.registry.metrics.batches_unrouted.inc();
        }
    }

    /// The actor sent nothing for `limit` while the run waited on it:
    /// logged, counted, and the session ends.
    fn silent(&self, limit: Duration) -> End {
        let text = format!(
            "nothing from this actor for {} s while the run waited on it",
            limit.as_secs_f64()
        );
        tracing::warn!(conn = self.id, "dropped a silent actor: {text}");
        self.registry.metrics.actors_timed_out.inc();
        End::Silent(text)
    }

    /// What the actor is told when the fleet moves it: its run goes on
    /// without it; it says hello again and is welcomed into another.
    fn move_message() -> Message {
        Message::Stop(wire::Stop {
            reason: "moved to another run".into(),
            shutdown: false,
        })
    }

    fn stop_message(&self) -> Message {
        let going = self.registry.shutdown.is_cancelled();
        let exit = going && self.registry.actors_exit_at_shutdown();
        Message::Stop(wire::Stop {
            reason: match (going, exit) {
                (false, _) => "the run ended".into(),
                (true, true) => "the learner is shutting down".into(),
                (true, false) => {
                    "the learner is shutting down; reconnect: it resumes its run when it starts again"
                        .into()
                }
            },
            shutdown: exit,
        })
    }

    /// [`Session::run`] to its end, for a transport with no connection to
    /// close (in-process, MPI): a refusal is logged, counted and answered
    /// with an `Error`; then the actor leaves the registry.
    pub async fn serve(mut self, addr: &str) {
        match self.run(addr).await {
            End::Refused(code, text) => {
                tracing::warn!(%addr, code = code.label(), "refused actor input: {text}");
                self.registry
                    .metrics
                    .protocol_errors
                    .with_label_values(&[code.label()])
                    .inc();
                let _ = self.wire.send(code.message(text)).await;
            }
            End::Silent(text) => {
                let _ = self.wire.send(ErrorCode::Unexpected.message(text)).await;
            }
            End::Lost => tracing::info!(%addr, "actor gone"),
            End::Clean | End::Answered(_) => {}
        }
        self.registry.actor_disconnected(self.id);
    }

    /// Hello, then the actor's requests relayed to the active run (and to
    /// the next run, unless it leaves) until it stops or is refused.
    pub async fn run(&mut self, addr: &str) -> End {
        loop {
            let hello = match self.hello().await {
                Ok(Some(h)) => h,
                Ok(None) => return End::Clean,
                Err(end) => return end,
            };
            if !self.registered {
                let view = ActorView {
                    connection: self.id,
                    actor_id: hello.actor_id.clone(),
                    session_id: hello.session_id,
                    address: addr.to_string(),
                    software: hello.software.clone(),
                    env_capacity: hello.env_capacity,
                    run: None,
                    pinned: (!hello.run.is_empty()).then(|| hello.run.clone()),
                    declined: Default::default(),
                    connected_secs: 0.0,
                };
                let wants = Wants {
                    pin: view.pinned.clone(),
                    once: hello.once,
                };
                let registered = self.registry.actor_connected(view, wants);
                if let Err(text) = registered.await {
                    return End::Refused(ErrorCode::TooManyActors, text);
                }
                self.registered = true;
                self.moves = self.registry.move_signal(self.id);
                tracing::info!(%addr, actor = %hello.actor_id, session = hello.session_id, "actor connected");
            }
            let (active, rx) = loop {
                let active = tokio::select! {
                    a = self.registry.assign(self.id) => a,
                    _ = self.wire.closed() => return End::Lost,
                };
                let Some(active) = active else {
                    let stop = self.stop_message();
                    let _ = self.wire.send(stop).await;
                    return End::Clean;
                };
                if let Ok(rx) = active.events.join(self.id, hello.clone()) {
                    break (active, rx);
                }
                // That run is ending; wait for the next one.
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            let guard = LeaveGuard {
                run: Some(active.events.clone()),
                conn: self.id,
            };
            self.last_run = Some(active.events.clone());
            let outcome = self.exchange(rx, &active.events).await;
            // Until the run has taken the departure, this connection's
            // requests may still be queued there: its registry slot (which
            // bounds the run's inbox) is freed only after.
            let _ = guard.leave().await;
            self.registry.actor_left_run(self.id);
            match outcome {
                // The run ended: the actor says hello again for the next.
                Ok(false) if !self.registry.shutdown.is_cancelled() => continue,
                Ok(_) => return End::Clean,
                Err(end) => return end,
            }
        }
    }

    /// Relays requests to the run until it says stop. `Ok(false)`: the run
    /// ended (the actor may stay for the next); `Ok(true)`: the actor
    /// finished its stream.
    async fn exchange(&mut self, mut reply: Answer, run: &RunInbox) -> Result<bool, End> {
        loop {
            let moves = self.moves.clone();
            let answer = tokio::select! {
                r = &mut reply => Some(r.ok()),
                _ = self.wire.closed() => return Err(End::Lost),
                () = MoveSignal::wait(moves.as_deref()) => None,
            };
            let Some(answer) = answer else {
                // The run's answer, when it comes, goes nowhere: the
                // actor's open episodes are abandoned when the session
                // leaves, and played again by others.
                self.wire.send(Self::move_message()).await?;
                return Ok(false);
            };
            match answer {
                Some(Message::Error(e)) => {
                    let code = e.code;
                    self.wire.send(Message::Error(e)).await?;
                    return Err(End::Answered(code));
                }
                Some(m @ Message::Stop(_))
                | Some(m @ Message::Welcome(_))
                | Some(m @ Message::Actions(_))
                | Some(m @ Message::Ack(_)) => {
                    let stop = matches!(m, Message::Stop(_));
                    let m = if stop { self.stop_message() } else { m };
                    self.wire.send(m).await?;
                    if stop {
                        return Ok(false);
                    }
                }
                Some(other) => {
                    tracing::error!("the run answered with {}", other.kind());
                    return Err(End::Lost);
                }
                None => {
                    let stop = self.stop_message();
                    self.wire.send(stop).await?;
                    return Ok(false);
                }
            }
            let limit = self.actor_timeout;
            let wire = &mut self.wire;
            let next = tokio::select! {
                n = async {
                    match limit {
                        Some(l) => tokio::time::timeout(l, wire.recv()).await.map_err(|_| l),
                        None => Ok(wire.recv().await),
                    }
                } => Some(n),
                () = MoveSignal::wait(moves.as_deref()) => None,
            };
            let next = match next {
                Some(Ok(next)) => next,
                Some(Err(limit)) => Err(self.silent(limit)),
                None => {
                    // What the actor sends after this reaches the next
                    // hello as late, and is counted by this run.
                    self.wire.send(Self::move_message()).await?;
                    return Ok(false);
                }
            };
            let msg = match next? {
                Some(
                    m @ (Message::Observations(_)
                    | Message::Experience(_)
                    | Message::WorkRequest(_)),
                ) => m,
                // It cannot play this run: not offered again; it says
                // hello for another.
                Some(Message::Decline(d)) => {
                    self.registry.declined(self.id, &d.run_id, &d.reason);
                    return Ok(false);
                }
                Some(other) => {
                    return Err(End::Refused(
                        ErrorCode::Unexpected,
                        format!(
                            "expected observations, experience or a work request, got {}",
                            other.kind()
                        ),
                    ));
                }
                None => return Ok(true),
            };
            match run.request(self.id, msg) {
                Ok(rx) => reply = rx,
                Err(RunGone(msg)) => {
                    if let Message::Experience(e) = *msg {
                        self.count_late(e);
                    }
                    let stop = self.stop_message();
                    self.wire.send(stop).await?;
                    return Ok(false);
                }
            }
        }
    }
}
