//! Reaching the learner over QUIC: connect with exponential backoff and
//! jitter, run a session, and after a lost connection connect again (a new
//! session id; the batches that were not acknowledged go again).

use super::loss_watch::LossWatch;
use super::{ActorOptions, ActorReport, Carry, Link, SessionEnd, session};
use rand::Rng;
use rlfleet_quic::{FrameReader, FramedStream, client_endpoint, nudge, nudge_interval};
use rlfleet_shared::wire::{self, Message, WeightsApart, WeightsMsg};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// Runs the actor over QUIC until the learner stops it (or `cancel` fires).
pub async fn run(opts: ActorOptions, cancel: CancellationToken) -> anyhow::Result<ActorReport> {
    let endpoint = client_endpoint(&opts.trust, opts.liveness)?;
    let server_name = server_name(&opts.server, opts.server_name.as_deref());
    let mut carry = Carry {
        pending: None,
        seq: 0,
        joined: None,
        rejoin_limit: Some(opts.give_up_after),
        report: ActorReport::default(),
    };
    let mut backoff = Duration::from_millis(100);
    let mut failing_since: Option<std::time::Instant> = None;
    loop {
        if cancel.is_cancelled() {
            break;
        }
        let attempt = open(&endpoint, &opts.server, &server_name, opts.max_frame_bytes);
        let (conn, fs) = match attempt.await {
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
        let mut link = Patient::new(fs, &conn, opts.reply_timeout, opts.max_frame_bytes);
        let end = tokio::select! {
            r = session(&opts.player, &mut link, &mut carry, &mut backoff) => r,
            _ = cancel.cancelled() => Ok(SessionEnd::Stopped { shutdown: true }),
        };
        match end {
            Ok(SessionEnd::Stopped { shutdown }) => {
                let _ = link.send.finish();
                conn.close(0u32.into(), b"done");
                if shutdown || opts.player.once {
                    break;
                }
            }
            Ok(SessionEnd::Lost(why)) => {
                tracing::warn!("connection lost ({why}); reconnecting");
            }
            // A session settles these itself (declines, or fails).
            Ok(SessionEnd::Cannot(why)) => {
                conn.close(1u32.into(), b"error");
                anyhow::bail!("{why}");
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

/// The QUIC link of one connection, with the learner's replies timed once
/// the actor is in a run: a `Hello` (asking to join, which waits for a run
/// to start) is not timed; every other request is, and a reply later than
/// `limit` loses the link (the caller connects again).
///
/// Replies are read by a task of their own as they arrive, not only when
/// the actor asks for one. A reply larger than the stream's flow-control
/// window (an `Ack` with a CNN's weights) otherwise stalls the learner's
/// session mid-write while the actor, with batches in flight, is itself
/// mid-write of a batch the session is not reading: each waits on the
/// other until a timer breaks the tie.
///
/// An `Ack`'s weights come on a stream of their own (`Ack.weights_apart`),
/// read by another task into [`Patient::weights`].
struct Patient {
    send: quinn::SendStream,
    wbuf: Vec<u8>,
    replies: mpsc::UnboundedReceiver<Result<Message, String>>,
    reader: tokio::task::JoinHandle<()>,
    /// The weights of the newest weights stream read whole, with its id.
    weights: watch::Receiver<Option<(u64, WeightsMsg)>>,
    weights_reader: tokio::task::JoinHandle<()>,
    echoes: tokio::task::JoinHandle<()>,
    conn: quinn::Connection,
    loss: LossWatch,
    limit: Option<Duration>,
    in_run: bool,
}

impl Patient {
    fn new(
        fs: FramedStream,
        conn: &quinn::Connection,
        limit: Option<Duration>,
        max_frame: u32,
    ) -> Patient {
        let (send, frames) = fs.split();
        let (tx, replies) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_replies(frames, tx));
        let (tx, weights) = watch::channel(None);
        let weights_reader = tokio::spawn(read_weights(conn.clone(), max_frame, tx));
        Patient {
            send,
            wbuf: Vec::new(),
            replies,
            reader,
            weights,
            weights_reader,
            echoes: tokio::spawn(rlfleet_quic::drain_echoes(conn.clone())),
            conn: conn.clone(),
            loss: LossWatch::new(),
            limit,
            in_run: false,
        }
    }

    /// The next reply. While it is overdue on a link that is losing
    /// datagrams, the learner is nudged every [`nudge_interval`].
    async fn next_reply(&mut self) -> Result<Message, String> {
        let nudging = self.in_run && self.loss.losing();
        with_nudges(&self.conn, nudging, self.replies.recv())
            .await
            .unwrap_or_else(|| Err("the reply reader stopped".into()))
    }
}

impl Drop for Patient {
    fn drop(&mut self) {
        self.reader.abort();
        self.weights_reader.abort();
        self.echoes.abort();
    }
}

/// Awaits `fut`, nudging the learner every [`nudge_interval`] meanwhile
/// when `nudging`.
async fn with_nudges<F: Future>(conn: &quinn::Connection, nudging: bool, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    loop {
        tokio::select! {
            r = &mut fut => return r,
            () = tokio::time::sleep(nudge_interval(conn.rtt())), if nudging => nudge(conn),
        }
    }
}

/// Reads the learner's weights streams, one after another, until the
/// connection goes; keeps the newest stream's weights. A stream the
/// learner reset (newer weights superseded it) is passed over.
async fn read_weights(
    conn: quinn::Connection,
    max_frame: u32,
    tx: watch::Sender<Option<(u64, WeightsMsg)>>,
) {
    while let Ok(mut recv) = conn.accept_uni().await {
        let stream = u64::from(recv.id());
        match wire::read_weights(&mut recv, max_frame).await {
            Ok(w) => {
                tx.send_if_modified(|held| {
                    let newer = held.as_ref().is_none_or(|(s, _)| *s < stream);
                    if newer {
                        *held = Some((stream, w));
                    }
                    newer
                });
            }
            Err(e) => tracing::debug!(stream, "a weights stream ended early: {e}"),
        }
    }
}

/// Reads the learner's frames until the stream ends or fails; the last
/// item says why it ended.
async fn read_replies(mut frames: FrameReader, tx: mpsc::UnboundedSender<Result<Message, String>>) {
    loop {
        let item = match frames.recv().await {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err("the learner closed the stream".to_string()),
            Err(e) => Err(e.to_string()),
        };
        let last = item.is_err();
        if tx.send(item).is_err() || last {
            return;
        }
    }
}

impl Link for Patient {
    async fn send(&mut self, msg: Message) -> Result<(), String> {
        self.in_run = !matches!(msg, Message::Hello(_));
        wire::write_frame(&mut self.send, &msg, &mut self.wbuf)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }

    async fn recv(&mut self) -> Result<Message, String> {
        match self.limit.filter(|_| self.in_run) {
            Some(limit) => tokio::time::timeout(limit, self.next_reply())
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "no reply from the learner for {} s",
                        limit.as_secs_f64()
                    ))
                }),
            None => self.next_reply().await,
        }
    }

    fn losing(&mut self) -> bool {
        let path = self.conn.stats().path;
        self.loss.observe(
            std::time::Instant::now(),
            path.sent_packets,
            path.lost_packets,
        )
    }

    fn weights_landed(&mut self, from_stream: u64, version: u64) -> Option<WeightsMsg> {
        let held = self.weights.borrow();
        let (stream, w) = held.as_ref()?;
        (*stream >= from_stream && w.version > version).then(|| w.clone())
    }

    async fn await_weights(
        &mut self,
        apart: WeightsApart,
        grace: Option<Duration>,
    ) -> Result<(), String> {
        // Waiting for them all (not a grace), nudge while the link loses.
        let nudging = grace.is_none() && self.loss.losing();
        let landed = with_nudges(
            &self.conn,
            nudging,
            self.weights
                .wait_for(|held| held.as_ref().is_some_and(|(s, _)| *s >= apart.stream)),
        );
        let gone = || "the connection closed before the weights landed".to_string();
        let Some(limit) = grace.or(self.limit) else {
            return landed.await.map(drop).map_err(|_| gone());
        };
        match tokio::time::timeout(limit, landed).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(gone()),
            Err(_) if grace.is_some() => Ok(()),
            Err(_) => Err(format!(
                "weights version {} did not land within {} s",
                apart.version,
                limit.as_secs_f64()
            )),
        }
    }
}

/// A generator seeded from the clock and the process id (session ids and
/// backoff jitter need to differ between processes, not be reproducible).
/// The name checked against the learner's certificate: `explicit`, else
/// the host part of `server` (`HOST:PORT`, IPv6 in brackets).
pub(super) fn server_name(server: &str, explicit: Option<&str>) -> String {
    explicit.map(str::to_string).unwrap_or_else(|| {
        server
            .rsplit_once(':')
            .map(|(h, _)| h.trim_matches(['[', ']']).to_string())
            .unwrap_or_else(|| server.to_string())
    })
}

/// Resolves `server`, connects and opens the session's stream.
pub(super) async fn open(
    endpoint: &quinn::Endpoint,
    server: &str,
    name: &str,
    max_frame_bytes: u32,
) -> anyhow::Result<(quinn::Connection, FramedStream)> {
    let addr = tokio::net::lookup_host(server)
        .await?
        .next()
        .ok_or_else(|| anyhow::anyhow!("`{server}` resolves to no address"))?;
    let conn = endpoint.connect(addr, name)?.await?;
    let (send, recv) = conn.open_bi().await?;
    Ok((conn, FramedStream::new(send, recv, max_frame_bytes)))
}

pub(super) fn fresh_rng() -> rand_pcg::Pcg64 {
    use rand::SeedableRng;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    rand_pcg::Pcg64::seed_from_u64(nanos ^ (u64::from(std::process::id()) << 32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_quic::{Liveness, ServerIdentity, Trust, server_endpoint};
    use rlfleet_shared::wire::{Actions, Observations};

    fn observations(seq: u64, values: usize) -> Message {
        Message::Observations(Observations {
            seq,
            obs: vec![0.5; values],
            obs_u8: vec![],
            rewards: vec![],
            flags: vec![],
            faults: vec![],
        })
    }

    /// A learner endpoint on loopback (its identity's folder kept with
    /// it), to accept connections and connect actors' links to.
    struct Loopback {
        _dir: tempfile::TempDir,
        server: quinn::Endpoint,
        addr: std::net::SocketAddr,
        pin: String,
    }

    impl Loopback {
        fn new() -> Loopback {
            let dir = tempfile::tempdir().expect("tempdir");
            let id = ServerIdentity::load_or_generate(dir.path(), &[]).expect("identity");
            let server = server_endpoint(([127, 0, 0, 1], 0).into(), &id, Liveness::default())
                .expect("server endpoint");
            let addr = server.local_addr().expect("address");
            Loopback {
                _dir: dir,
                server,
                addr,
                pin: id.fingerprint,
            }
        }

        /// The learner's side of the next connection.
        fn accept(&self) -> impl Future<Output = quinn::Connection> + use<> {
            let server = self.server.clone();
            async move {
                server
                    .accept()
                    .await
                    .expect("incoming")
                    .await
                    .expect("handshake")
            }
        }

        /// An actor's link to the learner, replies timed at 60 s.
        async fn link(&self) -> (quinn::Connection, Patient) {
            let client = client_endpoint(&Trust::Pin(self.pin.clone()), Liveness::default())
                .expect("client endpoint");
            let (conn, fs) = open(&client, &self.addr.to_string(), "localhost", 64 << 20)
                .await
                .expect("connect");
            let link = Patient::new(fs, &conn, Some(Duration::from_secs(60)), 64 << 20);
            (conn, link)
        }
    }

    /// The learner answers the first request with a reply several times
    /// the stream's flow-control window (quinn's default is 1.25 MB) before
    /// it reads the second, which is itself larger than the window and
    /// already on its way. Read only on demand, each side's write waits for
    /// the other's; with the reply reader both replies arrive.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reply_larger_than_the_window_arrives_while_a_large_request_is_in_flight() {
        let lo = Loopback::new();
        let reply_floats = 2 << 20; // 8 MB
        let accept = lo.accept();
        let learner = tokio::spawn(async move {
            let conn = accept.await;
            let (send, recv) = conn.accept_bi().await.expect("stream");
            let mut fs = FramedStream::new(send, recv, 64 << 20);
            let mut sizes = Vec::new();
            while let Ok(Some(Message::Observations(o))) = fs.recv().await {
                sizes.push(o.obs.len());
                let reply = Message::Actions(Actions {
                    seq: o.seq,
                    policy_version: 0,
                    actions: vec![1.0; reply_floats],
                    starts: vec![],
                });
                fs.send(&reply).await.expect("reply");
            }
            sizes
        });
        let (conn, mut link) = lo.link().await;
        let exchange = async {
            link.send(observations(1, 4)).await?;
            link.send(observations(2, 1 << 20)).await?; // 4 MB
            let mut seqs = Vec::new();
            for _ in 0..2 {
                match link.recv().await? {
                    Message::Actions(a) if a.actions.len() == reply_floats => seqs.push(a.seq),
                    _ => return Err("a reply other than the 8 MB `Actions`".to_string()),
                }
            }
            Ok::<_, String>(seqs)
        };
        let seqs = tokio::time::timeout(Duration::from_secs(60), exchange)
            .await
            .expect("both replies within 60 s (a stalled exchange never ends)")
            .expect("the exchange");
        assert_eq!(seqs, vec![1, 2]);
        let _ = link.send.finish();
        conn.close(0u32.into(), b"done");
        let sizes = learner.await.expect("learner task");
        assert_eq!(sizes, vec![4, 1 << 20]);
    }

    fn weights_frame(version: u64) -> Vec<u8> {
        wire::encode(&Message::Weights(WeightsMsg {
            version,
            data: vec![version as f32; 5000].into(),
        }))
    }

    /// Weights sent apart from their `Ack` land for the actor: a stream the
    /// learner reset half-sent is passed over, the newest stream's weights
    /// are kept, weights from a stream before the run's first are not
    /// taken, and a wait with a grace ends when the grace does.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn weights_sent_apart_land_and_a_reset_stream_is_passed_over() {
        let lo = Loopback::new();
        let accept = lo.accept();
        let learner = tokio::spawn(async move {
            let conn = accept.await;
            let mut ids = Vec::new();
            for version in 1..=3 {
                let mut s = conn.open_uni().await.expect("weights stream");
                ids.push(u64::from(s.id()));
                let frame = weights_frame(version);
                if version == 2 {
                    s.write_all(&frame[..frame.len() / 2]).await.expect("write");
                    s.reset(0u32.into()).expect("reset");
                } else {
                    s.write_all(&frame).await.expect("write");
                    s.finish().expect("finish");
                }
            }
            (conn, ids)
        });
        let (conn, mut link) = lo.link().await;
        let (_learner_conn, ids) = learner.await.expect("learner task");
        let apart = WeightsApart {
            version: 3,
            stream: ids[2],
        };
        tokio::time::timeout(Duration::from_secs(30), link.await_weights(apart, None))
            .await
            .expect("the weights land within 30 s")
            .expect("the link stays up");
        let landed = link.weights_landed(ids[0], 0).expect("weights landed");
        assert_eq!(landed.version, 3);
        assert_eq!(landed.data.len(), 5000);
        assert!(landed.data.iter().all(|&x| x == 3.0));
        assert!(link.weights_landed(ids[0], 3).is_none(), "not newer");
        // A run that starts on a later stream takes none of these.
        let later = ids[2] + 4;
        assert!(link.weights_landed(later, 0).is_none());
        let t = std::time::Instant::now();
        let never = WeightsApart {
            version: 4,
            stream: later,
        };
        let grace = Duration::from_millis(100);
        link.await_weights(never, Some(grace))
            .await
            .expect("a grace that ends is not an error");
        assert!(t.elapsed() >= grace);
        conn.close(0u32.into(), b"done");
    }
}
