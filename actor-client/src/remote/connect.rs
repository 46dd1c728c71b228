//! Reaching the learner over QUIC: connect with exponential backoff and
//! jitter, run a session, and after a lost connection connect again (a new
//! session id; the batches that were not acknowledged go again).

use super::{ActorOptions, ActorReport, Carry, Link, SessionEnd, session};
use rand::Rng;
use rlfleet_quic::{FrameReader, FramedStream, client_endpoint};
use rlfleet_shared::wire::{self, Message};
use std::time::Duration;
use tokio::sync::mpsc;
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
        let mut link = Patient::new(fs, opts.reply_timeout);
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
struct Patient {
    send: quinn::SendStream,
    wbuf: Vec<u8>,
    replies: mpsc::UnboundedReceiver<Result<Message, String>>,
    reader: tokio::task::JoinHandle<()>,
    limit: Option<Duration>,
    in_run: bool,
}

impl Patient {
    fn new(fs: FramedStream, limit: Option<Duration>) -> Patient {
        let (send, frames) = fs.split();
        let (tx, replies) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_replies(frames, tx));
        Patient {
            send,
            wbuf: Vec::new(),
            replies,
            reader,
            limit,
            in_run: false,
        }
    }

    async fn next_reply(&mut self) -> Result<Message, String> {
        self.replies
            .recv()
            .await
            .unwrap_or_else(|| Err("the reply reader stopped".into()))
    }
}

impl Drop for Patient {
    fn drop(&mut self) {
        self.reader.abort();
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

    /// The learner answers the first request with a reply several times
    /// the stream's flow-control window (quinn's default is 1.25 MB) before
    /// it reads the second, which is itself larger than the window and
    /// already on its way. Read only on demand, each side's write waits for
    /// the other's; with the reply reader both replies arrive.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reply_larger_than_the_window_arrives_while_a_large_request_is_in_flight() {
        let dir = tempfile::tempdir().expect("tempdir");
        let id = ServerIdentity::load_or_generate(dir.path(), &[]).expect("identity");
        let server = server_endpoint(([127, 0, 0, 1], 0).into(), &id, Liveness::default())
            .expect("server endpoint");
        let addr = server.local_addr().expect("address");
        let reply_floats = 2 << 20; // 8 MB
        let learner = tokio::spawn(async move {
            let conn = server
                .accept()
                .await
                .expect("incoming")
                .await
                .expect("handshake");
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
        let client = client_endpoint(&Trust::Pin(id.fingerprint.clone()), Liveness::default())
            .expect("client endpoint");
        let (conn, fs) = open(&client, &addr.to_string(), "localhost", 64 << 20)
            .await
            .expect("connect");
        let mut link = Patient::new(fs, Some(Duration::from_secs(60)));
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
}
