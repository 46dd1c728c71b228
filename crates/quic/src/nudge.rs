//! Nudges: tiny QUIC datagrams that let a lossy link's losses be found
//! sooner than QUIC's probe timeouts find them. A request or reply of one
//! datagram that is lost has nothing after it for the peer to acknowledge,
//! so its sender waits a probe timeout, which doubles with each probe lost
//! too: after a blackout of a few seconds, seconds more. An actor whose
//! reply is overdue on a link that is losing datagrams sends a nudge every
//! [`nudge_interval`]; the learner echoes each one. Each side's
//! acknowledgement of the other's nudge is a later packet acknowledged, and
//! QUIC's loss detection then declares the earlier one lost and sends it
//! again at once.

use bytes::Bytes;
use std::time::Duration;

/// A nudge's payload; the learner echoes datagrams of at most
/// [`MAX_ECHO`] bytes.
const NUDGE: &[u8] = b"n";
const MAX_ECHO: usize = 16;

/// Sends one nudge (dropped quietly if the peer takes no datagrams).
pub fn nudge(conn: &quinn::Connection) {
    let _ = conn.send_datagram(Bytes::from_static(NUDGE));
}

/// How long a reply may be overdue between nudges: two round trips, at
/// least 100 ms and at most a second.
pub fn nudge_interval(rtt: Duration) -> Duration {
    (rtt * 2).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// The learner's side: echoes the connection's small datagrams until it
/// closes.
pub async fn echo_nudges(conn: quinn::Connection) {
    while let Ok(d) = conn.read_datagram().await {
        if d.len() <= MAX_ECHO {
            let _ = conn.send_datagram(d);
        }
    }
}

/// The actor's side: reads the echoes (and drops them) until the
/// connection closes, so that they do not pile up unread.
pub async fn drain_echoes(conn: quinn::Connection) {
    while conn.read_datagram().await.is_ok() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_two_round_trips_within_its_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(nudge_interval(ms(1)), ms(100));
        assert_eq!(nudge_interval(ms(100)), ms(200));
        assert_eq!(nudge_interval(ms(900)), ms(1000));
    }

    /// Over a real connection on loopback the learner's side echoes each
    /// nudge; a datagram too large to be a nudge is not echoed.
    #[tokio::test]
    async fn the_learner_echoes_nudges() {
        use crate::{Liveness, ServerIdentity, Trust, client_endpoint, server_endpoint};
        let dir = tempfile::tempdir().unwrap();
        let id = ServerIdentity::load_or_generate(dir.path(), &[]).unwrap();
        let server = server_endpoint(([127, 0, 0, 1], 0).into(), &id, Liveness::default()).unwrap();
        let addr = server.local_addr().unwrap();
        let learner = tokio::spawn(async move {
            let conn = server.accept().await.unwrap().await.unwrap();
            echo_nudges(conn).await;
        });
        let client =
            client_endpoint(&Trust::Pin(id.fingerprint.clone()), Liveness::default()).unwrap();
        let conn = client.connect(addr, "localhost").unwrap().await.unwrap();
        conn.send_datagram(Bytes::from(vec![7u8; MAX_ECHO + 1]))
            .unwrap();
        nudge(&conn);
        let back = tokio::time::timeout(Duration::from_secs(10), conn.read_datagram())
            .await
            .expect("an echo within 10 s")
            .unwrap();
        assert_eq!(&back[..], NUDGE);
        conn.close(0u32.into(), b"done");
        learner.await.unwrap();
    }
}
