//! The QUIC transport, learner side: accepts actor connections, checks
//! `Hello` (protocol version, token), routes each actor to the active run
//! and carries its request/reply exchange as [`Event`]s. Refused input gets
//! an `Error` frame, a counter and a closed connection; the run carries on.

use super::{ConnId, Event, RunInbox};
use crate::hub::{ActorView, Hub};
use crate::server_config::tokens_match;
use rlfleet_shared::quic::FramedStream;
use rlfleet_shared::wire::{self, ErrorCode, FrameError, Hello, Message};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio_util::task::TaskTracker;

/// How long a connection may take to open its stream and say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for connections to say goodbye.
const DRAIN: Duration = Duration::from_secs(5);

/// Settings of the actor listener.
#[derive(Debug, Clone)]
pub struct QuicOptions {
    /// Actors must present this token, when set.
    pub token: Option<String>,
    pub max_frame_bytes: u32,
}

/// How a connection ended.
enum End {
    /// The actor finished its stream, or was told to stop for good.
    Clean,
    /// The actor sent something unacceptable.
    Refused(ErrorCode, String),
    /// The connection dropped (closed, reset, timed out).
    Lost,
}

/// Tells the run the connection left when dropped.
struct LeaveGuard {
    events: RunInbox,
    conn: ConnId,
}

impl Drop for LeaveGuard {
    fn drop(&mut self) {
        let _ = self.events.send(Event::Left { conn: self.conn });
    }
}

/// Accepts actors until the hub shuts down, then drains and closes.
pub async fn serve(endpoint: quinn::Endpoint, hub: Arc<Hub>, opts: QuicOptions) {
    let tracker = TaskTracker::new();
    loop {
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                tracker.spawn(connection(incoming, hub.clone(), opts.clone()));
            }
            _ = hub.shutdown.cancelled() => break,
        }
    }
    tracker.close();
    if tokio::time::timeout(DRAIN, tracker.wait()).await.is_err() {
        tracing::warn!("some actor connections did not close within {DRAIN:?}");
    }
    endpoint.close(0u32.into(), b"shutdown");
    let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
}

/// Classifies a read failure.
fn read_failure(e: FrameError) -> End {
    match e {
        FrameError::TooLarge { .. } => End::Refused(ErrorCode::FrameTooLarge, e.to_string()),
        FrameError::Invalid(_) => End::Refused(ErrorCode::BadFrame, e.to_string()),
        FrameError::Truncated | FrameError::Io(_) => End::Lost,
    }
}

async fn connection(incoming: quinn::Incoming, hub: Arc<Hub>, opts: QuicOptions) {
    let conn = match incoming.await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!("QUIC handshake failed: {e}");
            return;
        }
    };
    let addr = conn.remote_address();
    let stream = match tokio::time::timeout(HELLO_TIMEOUT, conn.accept_bi()).await {
        Ok(Ok((send, recv))) => FramedStream::new(send, recv, opts.max_frame_bytes),
        _ => {
            conn.close(1u32.into(), b"no stream opened");
            return;
        }
    };
    let id = hub.new_conn_id();
    let mut session = Session {
        conn: conn.clone(),
        fs: stream,
        id,
        hub: hub.clone(),
        opts,
        reported: (0, 0),
        registered: false,
    };
    let end = session.run(addr).await;
    session.report_bytes();
    match end {
        End::Clean => session.close(0, "bye").await,
        End::Refused(code, text) => {
            tracing::warn!(%addr, code = code.label(), "refused actor input: {text}");
            hub.metrics
                .protocol_errors
                .with_label_values(&[code.label()])
                .inc();
            let _ = session.fs.send(&code.message(text.clone())).await;
            session.close(code as u32, &text).await;
        }
        End::Lost => tracing::info!(%addr, "actor connection lost"),
    }
    session.report_bytes();
    hub.actor_disconnected(id);
}

struct Session {
    conn: quinn::Connection,
    fs: FramedStream,
    id: ConnId,
    hub: Arc<Hub>,
    opts: QuicOptions,
    /// Bytes already added to the metrics (in, out).
    reported: (u64, u64),
    registered: bool,
}

impl Session {
    fn report_bytes(&mut self) {
        let m = &self.hub.metrics;
        m.bytes_received
            .with_label_values(&["quic"])
            .inc_by(self.fs.bytes_in - self.reported.0);
        m.bytes_sent
            .with_label_values(&["quic"])
            .inc_by(self.fs.bytes_out - self.reported.1);
        self.reported = (self.fs.bytes_in, self.fs.bytes_out);
    }

    /// Finishes our side so the last frame is delivered, then closes.
    async fn close(&mut self, code: u32, reason: &str) {
        let _ = self.fs.send.finish();
        let _ = tokio::time::timeout(Duration::from_millis(500), self.fs.send.stopped()).await;
        self.conn.close(code.into(), reason.as_bytes());
    }

    async fn send(&mut self, msg: &Message) -> Result<(), End> {
        self.fs.send(msg).await.map_err(|_| End::Lost)?;
        self.report_bytes();
        Ok(())
    }

    /// Reads `Hello` and checks it.
    async fn hello(&mut self) -> Result<Option<Hello>, End> {
        let hello = match self.fs.recv().await {
            Ok(Some(Message::Hello(h))) => h,
            Ok(Some(other)) => {
                return Err(End::Refused(
                    ErrorCode::Unexpected,
                    format!("expected hello, got {}", other.kind()),
                ));
            }
            Ok(None) => return Ok(None),
            Err(e) => return Err(read_failure(e)),
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
        if let Some(token) = &self.opts.token
            && !tokens_match(token, &hello.token)
        {
            return Err(End::Refused(
                ErrorCode::Unauthorized,
                "missing or wrong token".into(),
            ));
        }
        Ok(Some(hello))
    }

    fn stop_message(&self) -> Message {
        Message::Stop(wire::Stop {
            reason: if self.hub.shutdown.is_cancelled() {
                "the learner is shutting down".into()
            } else {
                "the run ended".into()
            },
            shutdown: self.hub.shutdown.is_cancelled(),
        })
    }

    async fn run(&mut self, addr: std::net::SocketAddr) -> End {
        loop {
            let hello = match self.hello().await {
                Ok(Some(h)) => h,
                Ok(None) => return End::Clean,
                Err(end) => return end,
            };
            if !self.registered {
                self.registered = true;
                tracing::info!(%addr, actor = %hello.actor_id, session = hello.session_id, "actor connected");
                self.hub.actor_connected(ActorView {
                    connection: self.id,
                    actor_id: hello.actor_id.clone(),
                    session_id: hello.session_id,
                    address: addr.to_string(),
                    software: hello.software.clone(),
                    env_capacity: hello.env_capacity,
                    run: None,
                    connected_secs: 0.0,
                });
            }
            let (active, rx) = loop {
                let active = tokio::select! {
                    a = self.hub.wait_active() => a,
                    _ = self.conn.closed() => return End::Lost,
                };
                let Some(active) = active else {
                    let stop = self.stop_message();
                    let _ = self.send(&stop).await;
                    return End::Clean;
                };
                let (tx, rx) = oneshot::channel();
                let join = Event::Join {
                    conn: self.id,
                    hello: hello.clone(),
                    reply: tx,
                };
                if active.events.send(join).is_ok() {
                    break (active, rx);
                }
                // That run is ending; wait for the next one.
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            self.hub.actor_assigned(self.id, Some(active.id.clone()));
            let guard = LeaveGuard {
                events: active.events.clone(),
                conn: self.id,
            };
            let outcome = self.exchange(rx, &active.events).await;
            drop(guard);
            self.hub.actor_assigned(self.id, None);
            match outcome {
                // The run ended: the actor says hello again for the next.
                Ok(false) if !self.hub.shutdown.is_cancelled() => continue,
                Ok(_) => return End::Clean,
                Err(end) => return end,
            }
        }
    }

    /// Relays requests to the run until it says stop. `Ok(false)`: the run
    /// ended (the actor may stay for the next); `Ok(true)`: the actor
    /// finished its stream.
    async fn exchange(
        &mut self,
        mut reply: oneshot::Receiver<Message>,
        events: &RunInbox,
    ) -> Result<bool, End> {
        loop {
            let answer = tokio::select! {
                r = &mut reply => r.ok(),
                _ = self.conn.closed() => return Err(End::Lost),
            };
            match answer {
                Some(Message::Error(e)) => {
                    let code = e.code;
                    self.send(&Message::Error(e)).await?;
                    self.close(u32::from(code), "refused").await;
                    return Err(End::Lost);
                }
                Some(m @ Message::Stop(_))
                | Some(m @ Message::Welcome(_))
                | Some(m @ Message::Actions(_))
                | Some(m @ Message::Ack(_)) => {
                    let stop = matches!(m, Message::Stop(_));
                    let m = if stop { self.stop_message() } else { m };
                    self.send(&m).await?;
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
                    self.send(&stop).await?;
                    return Ok(false);
                }
            }
            let msg = match self.fs.recv().await {
                Ok(Some(m @ (Message::Observations(_) | Message::Experience(_)))) => m,
                Ok(Some(other)) => {
                    return Err(End::Refused(
                        ErrorCode::Unexpected,
                        format!("expected observations or experience, got {}", other.kind()),
                    ));
                }
                Ok(None) => return Ok(true),
                Err(e) => return Err(read_failure(e)),
            };
            self.report_bytes();
            let (tx, rx) = oneshot::channel();
            let request = Event::Request {
                conn: self.id,
                msg,
                received: Instant::now(),
                reply: tx,
            };
            if let Err(refused) = events.send(request)
                && let Event::Request { msg, .. } = *refused
            {
                if matches!(msg, Message::Experience(_)) {
                    // The run ended before this batch reached it.
                    self.hub.metrics.batches_received.inc();
                    self.hub
                        .metrics
                        .batches_dropped
                        .with_label_values(&["run_ended"])
                        .inc();
                }
                let stop = self.stop_message();
                self.send(&stop).await?;
                return Ok(false);
            }
            reply = rx;
        }
    }
}
