//! A lossy UDP link in user space (the kernel here has no netem): a relay
//! between actors and the learner that drops a share of the datagrams each
//! way, delays the rest by a fixed time, and drops everything during a
//! blackout. Each client address gets its own upstream socket, so the
//! learner sees one peer per actor as it would without the relay.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the link does to each datagram.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Link {
    /// Share of datagrams dropped, each way.
    pub loss: f64,
    /// One-way delay, ms.
    pub delay_ms: u64,
}

/// Datagrams through the relay, both ways.
#[derive(Debug, Default)]
pub struct Counts {
    pub passed: AtomicU64,
    /// Bytes of the datagrams that passed.
    pub bytes: AtomicU64,
    pub dropped: AtomicU64,
}

/// Decides each datagram's fate and sends the ones that pass, late.
#[derive(Debug)]
struct Shaper {
    link: Link,
    rng: Mutex<Pcg64>,
    /// While `now` is in it, nothing passes.
    blackout: Mutex<Option<(Instant, Instant)>>,
    counts: Arc<Counts>,
}

impl Shaper {
    fn passes(&self) -> bool {
        let now = Instant::now();
        let dark = self
            .blackout
            .lock()
            .expect("blackout lock")
            .is_some_and(|(from, to)| now >= from && now < to);
        let pass = !dark && self.rng.lock().expect("rng lock").random::<f64>() >= self.link.loss;
        let counter = if pass {
            &self.counts.passed
        } else {
            &self.counts.dropped
        };
        counter.fetch_add(1, Ordering::Relaxed);
        pass
    }

    /// Queues `data` on `line` to be sent after the link's delay, unless
    /// the link drops it.
    fn forward(&self, line: &DelayLine, data: &[u8]) {
        if !self.passes() {
            return;
        }
        self.counts
            .bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        let due = tokio::time::Instant::now() + Duration::from_millis(self.link.delay_ms);
        let _ = line.send((due, data.to_vec()));
    }
}

/// One direction of one client's link: datagrams leave in the order they
/// came, each its delay after it came (a timer per datagram would let
/// those of one millisecond overtake each other, and QUIC reads a
/// reordered packet as a lost one).
type DelayLine = mpsc::UnboundedSender<(tokio::time::Instant, Vec<u8>)>;

/// A delay line sending through `sock` (to `to`, or its connected peer).
fn delay_line(sock: Arc<UdpSocket>, to: Option<SocketAddr>) -> DelayLine {
    let (tx, mut rx) = mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    tokio::spawn(async move {
        while let Some((due, data)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            let _ = match to {
                Some(addr) => sock.send_to(&data, addr).await,
                None => sock.send(&data).await,
            };
        }
    });
    tx
}

/// A running relay; dropped, it stops.
#[derive(Debug)]
pub struct Relay {
    /// Where actors connect instead of the learner.
    pub addr: SocketAddr,
    pub counts: Arc<Counts>,
    shaper: Arc<Shaper>,
    cancel: CancellationToken,
}

impl Relay {
    /// A relay on a loopback port to `upstream`, shaping with `link`
    /// (losses drawn from `seed`).
    pub async fn start(upstream: SocketAddr, link: Link, seed: u64) -> std::io::Result<Relay> {
        let front = Arc::new(UdpSocket::bind(("127.0.0.1", 0)).await?);
        let addr = front.local_addr()?;
        let counts = Arc::new(Counts::default());
        let shaper = Arc::new(Shaper {
            link,
            rng: Mutex::new(Pcg64::seed_from_u64(seed)),
            blackout: Mutex::new(None),
            counts: counts.clone(),
        });
        let cancel = CancellationToken::new();
        tokio::spawn(relay_front(front, upstream, shaper.clone(), cancel.clone()));
        Ok(Relay {
            addr,
            counts,
            shaper,
            cancel,
        })
    }

    /// Drops every datagram, both ways, from `from` for `secs`.
    pub fn black_out(&self, from: Instant, secs: f64) {
        *self.shaper.blackout.lock().expect("blackout lock") =
            Some((from, from + Duration::from_secs_f64(secs)));
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Client → learner: each client's datagrams through its own upstream
/// socket, whose replies a task of its own relays back.
async fn relay_front(
    front: Arc<UdpSocket>,
    upstream: SocketAddr,
    shaper: Arc<Shaper>,
    cancel: CancellationToken,
) {
    let mut peers: HashMap<SocketAddr, DelayLine> = HashMap::new();
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from) = tokio::select! {
            r = front.recv_from(&mut buf) => match r {
                Ok(got) => got,
                Err(_) => continue,
            },
            _ = cancel.cancelled() => return,
        };
        let up = match peers.get(&from) {
            Some(s) => s.clone(),
            None => {
                let Ok(s) = UdpSocket::bind(("127.0.0.1", 0)).await else {
                    continue;
                };
                if s.connect(upstream).await.is_err() {
                    continue;
                }
                let s = Arc::new(s);
                tokio::spawn(relay_back(
                    s.clone(),
                    front.clone(),
                    from,
                    shaper.clone(),
                    cancel.clone(),
                ));
                let line = delay_line(s, None);
                peers.insert(from, line.clone());
                line
            }
        };
        shaper.forward(&up, &buf[..n]);
    }
}

/// Learner → one client.
async fn relay_back(
    up: Arc<UdpSocket>,
    front: Arc<UdpSocket>,
    client: SocketAddr,
    shaper: Arc<Shaper>,
    cancel: CancellationToken,
) {
    let line = delay_line(front, Some(client));
    let mut buf = vec![0u8; 65_536];
    loop {
        let n = tokio::select! {
            r = up.recv(&mut buf) => match r {
                Ok(n) => n,
                Err(_) => continue,
            },
            _ = cancel.cancelled() => return,
        };
        shaper.forward(&line, &buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server behind the relay: with no loss every datagram comes
    /// back, in the order sent, no sooner than two delays; with half lost
    /// about a quarter comes back; in a blackout none does.
    #[tokio::test]
    async fn the_relay_drops_delays_and_blacks_out() {
        let echo = Arc::new(UdpSocket::bind(("127.0.0.1", 0)).await.unwrap());
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = [0u8; 64];
            while let Ok((n, from)) = echo.recv_from(&mut buf).await {
                let _ = echo.send_to(&buf[..n], from).await;
            }
        });
        let client = UdpSocket::bind(("127.0.0.1", 0)).await.unwrap();
        let round = |relay: &Relay, sends: u32| {
            let client = &client;
            let to = relay.addr;
            async move {
                let t = Instant::now();
                for i in 0..sends {
                    client.send_to(&i.to_be_bytes(), to).await.unwrap();
                }
                let mut back = Vec::new();
                let mut buf = [0u8; 64];
                while let Ok(Ok(n)) =
                    tokio::time::timeout(Duration::from_millis(200), client.recv(&mut buf)).await
                {
                    back.push(u32::from_be_bytes(buf[..n].try_into().unwrap()));
                }
                (back, t.elapsed())
            }
        };
        let clean = Link {
            loss: 0.0,
            delay_ms: 20,
        };
        let relay = Relay::start(echo_addr, clean, 1).await.unwrap();
        let (back, took) = round(&relay, 50).await;
        assert_eq!(back, (0..50).collect::<Vec<u32>>());
        assert!(took >= Duration::from_millis(40), "{took:?}");
        relay.black_out(Instant::now(), 60.0);
        assert!(round(&relay, 20).await.0.is_empty());
        assert_eq!(relay.counts.dropped.load(Ordering::Relaxed), 20);
        let half = Link {
            loss: 0.5,
            delay_ms: 1,
        };
        let lossy = Relay::start(echo_addr, half, 2).await.unwrap();
        let back = round(&lossy, 400).await.0.len();
        assert!((60..=140).contains(&back), "{back} of 400 came back");
    }
}
