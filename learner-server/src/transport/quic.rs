//! The QUIC transport, learner side: accepts actor connections and runs a
//! [`Session`] over each one's framed stream ([`QuicWire`]). Refused input
//! gets an `Error` frame, a counter and a closed connection; the run
//! carries on. Before its `Hello` is accepted a connection is held small:
//! frames of at most [`PRE_AUTH_MAX_FRAME`] bytes, `hello_timeout` to say
//! hello, and at most `max_unauthenticated` such connections at once.

use super::session::{End, Session, Wire};
use crate::registry::Registry;
use rlfleet_quic::FramedStream;
use rlfleet_run::metrics::Metrics;
use rlfleet_shared::wire::{self, ErrorCode, FrameError, Message, WeightsApart, WeightsFrames};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The largest frame a connection may send before its `Hello` is
/// accepted (a `Hello` is a few hundred bytes).
pub const PRE_AUTH_MAX_FRAME: u32 = 64 * 1024;
/// How long shutdown waits for connections to say goodbye.
const DRAIN: Duration = Duration::from_secs(5);

/// Settings of the actor listener.
#[derive(Debug, Clone)]
pub struct QuicOptions {
    /// Actors must present this token, when set.
    pub token: Option<String>,
    pub max_frame_bytes: u32,
    /// Connections not yet past `Hello`, at most.
    pub max_unauthenticated: usize,
    /// How long a connection may take to open its stream and say hello.
    pub hello_timeout: Duration,
    /// How long an actor may keep the run waiting (none: forever).
    pub actor_timeout: Option<Duration>,
}

/// Counts a connection as not yet authenticated while it lives.
#[derive(Debug)]
struct Unauthenticated(Arc<AtomicUsize>);

impl Drop for Unauthenticated {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepts actors until the daemon shuts down, then drains and closes.
pub async fn serve(endpoint: quinn::Endpoint, registry: Arc<Registry>, opts: QuicOptions) {
    let tracker = TaskTracker::new();
    let unauthenticated = Arc::new(AtomicUsize::new(0));
    loop {
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                if unauthenticated.fetch_add(1, Ordering::AcqRel) >= opts.max_unauthenticated {
                    unauthenticated.fetch_sub(1, Ordering::AcqRel);
                    registry.metrics.connections_refused.inc();
                    tracing::warn!(
                        remote = %incoming.remote_address(),
                        "refused a connection: {} are not past hello yet (actors.max_unauthenticated)",
                        opts.max_unauthenticated
                    );
                    incoming.refuse();
                    continue;
                }
                let guard = Unauthenticated(unauthenticated.clone());
                tracker.spawn(connection(incoming, registry.clone(), opts.clone(), guard));
            }
            _ = registry.shutdown.cancelled() => break,
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

async fn connection(
    incoming: quinn::Incoming,
    registry: Arc<Registry>,
    opts: QuicOptions,
    unauthenticated: Unauthenticated,
) {
    let conn = match incoming.await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!("QUIC handshake failed: {e}");
            return;
        }
    };
    let addr = conn.remote_address();
    tokio::spawn(rlfleet_quic::echo_nudges(conn.clone()));
    let started = tokio::time::Instant::now();
    let pre_auth = PRE_AUTH_MAX_FRAME.min(opts.max_frame_bytes);
    let stream = match tokio::time::timeout(opts.hello_timeout, conn.accept_bi()).await {
        Ok(Ok((send, recv))) => FramedStream::new(send, recv, pre_auth),
        _ => {
            conn.close(1u32.into(), b"no stream opened");
            return;
        }
    };
    let id = registry.new_conn_id();
    let wire = QuicWire {
        conn: conn.clone(),
        fs: stream,
        metrics: registry.metrics.clone(),
        weights: registry.weights_frames.clone(),
        reported: (0, 0),
        max_frame: opts.max_frame_bytes,
        unauthenticated: Some(unauthenticated),
        weights_apart: None,
    };
    let mut session = Session::new(wire, id, registry.clone(), opts.token.clone());
    // The deadline covers opening the stream and reading the hello.
    session.hello_timeout = Some(opts.hello_timeout.saturating_sub(started.elapsed()));
    session.actor_timeout = opts.actor_timeout;
    let end = session.run(&addr.to_string()).await;
    let wire = &mut session.wire;
    match end {
        End::Clean => wire.close(0, "bye").await,
        End::Refused(code, text) => {
            tracing::warn!(%addr, code = code.label(), "refused actor input: {text}");
            registry
                .metrics
                .protocol_errors
                .with_label_values(&[code.label()])
                .inc();
            let _ = wire.send(code.message(text.clone())).await;
            wire.close(code as u32, &text).await;
        }
        End::Answered(code) => wire.close(code as u32, "refused").await,
        End::Silent(text) => {
            let _ = wire.send(ErrorCode::Unexpected.message(text.clone())).await;
            wire.close(ErrorCode::Unexpected as u32, &text).await;
        }
        End::Lost => tracing::info!(%addr, "actor connection lost"),
    }
    wire.report_bytes();
    registry.actor_disconnected(id);
}

/// A framed QUIC stream as a session's wire; counts bytes into the metrics.
#[derive(Debug)]
struct QuicWire {
    conn: quinn::Connection,
    fs: FramedStream,
    metrics: Arc<Metrics>,
    /// Weights frames shared by every session.
    weights: Arc<WeightsFrames>,
    /// Bytes already added to the metrics (in, out).
    reported: (u64, u64),
    /// The largest frame once the actor is authenticated.
    max_frame: u32,
    /// Held until the actor's `Hello` is accepted.
    unauthenticated: Option<Unauthenticated>,
    /// Cancels the latest weights stream while it is still being sent.
    weights_apart: Option<CancellationToken>,
}

impl QuicWire {
    fn report_bytes(&mut self) {
        let m = &self.metrics;
        m.bytes_received
            .with_label_values(&["quic"])
            .inc_by(self.fs.bytes_in - self.reported.0);
        m.bytes_sent
            .with_label_values(&["quic"])
            .inc_by(self.fs.bytes_out - self.reported.1);
        self.reported = (self.fs.bytes_in, self.fs.bytes_out);
    }

    /// Sends an `Ack`'s weights frame on a unidirectional stream of its
    /// own and returns the stream's id. What the stream's flow-control
    /// credit allows is written at once, ahead of the `Ack` (and sent
    /// first: the stream has the higher priority), the rest by a task. The
    /// previous weights stream, if still being sent, is reset: its lost
    /// datagrams are never sent again, and its reader moves on to this one.
    async fn send_apart(&mut self, frame: Arc<Vec<u8>>) -> Result<u64, End> {
        if let Some(older) = self.weights_apart.take() {
            older.cancel();
        }
        let mut stream = self.conn.open_uni().await.map_err(|_| End::Lost)?;
        let _ = stream.set_priority(1);
        let id = u64::from(stream.id());
        let now = stream.write(&frame).await.map_err(|_| End::Lost)?;
        self.fs.bytes_out += frame.len() as u64;
        let cancel = CancellationToken::new();
        let superseded = cancel.clone();
        tokio::spawn(async move {
            let sent = async {
                stream.write_all(&frame[now..]).await.ok()?;
                stream.finish().ok()?;
                stream.stopped().await.ok()
            };
            let reset = tokio::select! {
                _ = sent => false,
                () = superseded.cancelled() => true,
            };
            if reset {
                let _ = stream.reset(0u32.into());
            }
        });
        self.weights_apart = Some(cancel);
        Ok(id)
    }

    /// Finishes our side so the last frame is delivered, then closes.
    async fn close(&mut self, code: u32, reason: &str) {
        let _ = self.fs.send.finish();
        let _ = tokio::time::timeout(Duration::from_millis(500), self.fs.send.stopped()).await;
        self.conn.close(code.into(), reason.as_bytes());
    }
}

impl Wire for QuicWire {
    async fn recv(&mut self) -> Result<Option<Message>, End> {
        let m = self.fs.recv().await.map_err(read_failure)?;
        self.report_bytes();
        Ok(m)
    }

    /// A `Welcome` with weights goes as the shared weights frame and then
    /// the message without them; an `Ack`'s weights go on a stream of
    /// their own ([`QuicWire::send_apart`]), announced in the `Ack`.
    async fn send(&mut self, mut msg: Message) -> Result<(), End> {
        let version = wire::weights_of(&msg).map(|w| w.version);
        let frame = super::weights_frame(&self.weights, &self.metrics, "quic", &mut msg);
        if let (Some(frame), Some(version)) = (frame, version) {
            if let Message::Ack(ack) = &mut msg {
                let stream = self.send_apart(frame).await?;
                ack.weights_apart = Some(WeightsApart { version, stream });
            } else {
                self.fs.send_frame(&frame).await.map_err(|_| End::Lost)?;
            }
        }
        self.fs.send(&msg).await.map_err(|_| End::Lost)?;
        self.report_bytes();
        Ok(())
    }

    async fn closed(&self) {
        self.conn.closed().await;
    }

    fn authenticated(&mut self) {
        self.fs.set_max_frame(self.max_frame);
        self.unauthenticated = None;
    }
}
