//! Reaching the learner over QUIC: connect with exponential backoff and
//! jitter, run a session, and after a lost connection connect again (a new
//! session id; the batches that were not acknowledged go again).

use super::{ActorOptions, ActorReport, Carry, Link, SessionEnd, session};
use rand::Rng;
use rlfleet_shared::quic::{FramedStream, client_endpoint};
use rlfleet_shared::wire::Message;
use std::time::Duration;
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
        let mut link = Patient {
            fs: &mut fs,
            limit: opts.reply_timeout,
            in_run: false,
        };
        let end = tokio::select! {
            r = session(&opts.player, &mut link, &mut carry, &mut backoff) => r,
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

/// The QUIC link of one connection, with the learner's replies timed once
/// the actor is in a run: a `Hello` (asking to join, which waits for a run
/// to start) is not timed; every other request is, and a reply later than
/// `limit` loses the link (the caller connects again).
struct Patient<'a> {
    fs: &'a mut FramedStream,
    limit: Option<Duration>,
    in_run: bool,
}

impl Link for Patient<'_> {
    async fn send(&mut self, msg: &Message) -> Result<(), String> {
        self.in_run = !matches!(msg, Message::Hello(_));
        Link::send(self.fs, msg).await
    }

    async fn recv(&mut self) -> Result<Message, String> {
        match self.limit.filter(|_| self.in_run) {
            Some(limit) => tokio::time::timeout(limit, Link::recv(self.fs))
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "no reply from the learner for {} s",
                        limit.as_secs_f64()
                    ))
                }),
            None => Link::recv(self.fs).await,
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
