//! QUIC glue shared by the learner and the actors: TLS identities and trust
//! (a CA file or a pinned certificate fingerprint), endpoint configuration
//! (ALPN, keep-alive, idle timeout, congestion control), a framed
//! request/reply stream, and nudges for lossy links.

mod nudge;
mod stream;
mod tls;

pub use nudge::{drain_echoes, echo_nudges, nudge, nudge_interval};
pub use stream::{FrameReader, FramedStream};
pub use tls::{ServerIdentity, TlsError, Trust, fingerprint};

use std::sync::Arc;
use std::time::Duration;

/// The ALPN protocol name both sides insist on.
pub const ALPN: &[u8] = b"rlfleet/1";

/// Connection liveness settings, the same on both sides.
#[derive(Debug, Clone, Copy)]
pub struct Liveness {
    /// Ping an idle connection this often (keeps NAT bindings and the idle
    /// timer alive).
    pub keep_alive: Duration,
    /// Declare the peer gone after this long without hearing from it.
    pub idle_timeout: Duration,
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness {
            keep_alive: Duration::from_secs(1),
            // Longer than a network blackout of several seconds, which
            // then costs what it lasts and no reconnection (measured with
            // `rlfleet-bench lossy`: 0.63 of the clean episode rate at
            // 20 % loss with an 8-s blackout, against 0.51-0.55 at 5 s).
            idle_timeout: Duration::from_secs(15),
        }
    }
}

fn transport_config(l: Liveness) -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.keep_alive_interval(Some(l.keep_alive));
    t.max_idle_timeout(l.idle_timeout.try_into().ok());
    // BBR, not quinn's default (CUBIC): a lossy link's random losses do not
    // shrink its window. Measured with `rlfleet-bench lossy` (an 18 KB
    // reply of weights per `async` batch, 50 ms each way): 1.6x the
    // episode rate without loss, 1.9x at 20 % loss each way.
    t.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()));
    Arc::new(t)
}

/// A server endpoint bound to `addr` (port 0 allowed: read
/// `local_addr()`).
pub fn server_endpoint(
    addr: std::net::SocketAddr,
    identity: &ServerIdentity,
    liveness: Liveness,
) -> Result<quinn::Endpoint, TlsError> {
    let crypto = identity.rustls_server_config()?;
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(crypto)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(quic));
    cfg.transport_config(transport_config(liveness));
    let socket = udp_socket(addr, true).map_err(|e| TlsError::Bind(addr, e))?;
    endpoint(Some(cfg), socket).map_err(|e| TlsError::Bind(addr, e))
}

/// A client endpoint that trusts the learner as `trust` says.
pub fn client_endpoint(trust: &Trust, liveness: Liveness) -> Result<quinn::Endpoint, TlsError> {
    let crypto = trust.rustls_client_config()?;
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(crypto)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut cfg = quinn::ClientConfig::new(Arc::new(quic));
    cfg.transport_config(transport_config(liveness));
    let bind: std::net::SocketAddr = ([0, 0, 0, 0], 0).into();
    let socket = udp_socket(bind, false).map_err(|e| TlsError::Bind(bind, e))?;
    let mut ep = endpoint(None, socket).map_err(|e| TlsError::Bind(bind, e))?;
    ep.set_default_client_config(cfg);
    Ok(ep)
}

/// The kernel buffer asked for each endpoint's UDP socket, both ways. The
/// default (about 208 KiB on Linux) overflows when hundreds of actors send
/// to one learner socket at once: in the soak benchmark (1,000 actors)
/// datagrams were dropped by the million and, after loss bursts,
/// connections timed out.
pub const SOCKET_BUFFER: usize = 4 << 20;

/// A UDP socket bound to `addr` with buffers of [`SOCKET_BUFFER`] where the
/// kernel allows; `server` says whether a smaller grant is worth a warning
/// (an actor's socket carries one connection, a learner's all of them).
fn udp_socket(addr: std::net::SocketAddr, server: bool) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        // Dual-stack where the system allows; IPv6-only otherwise.
        let _ = socket.set_only_v6(false);
    }
    // Linux caps the size at `net.core.{r,w}mem_max` and reports twice what
    // it granted, so a report below the ask means less than half was given.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    let recv = socket.recv_buffer_size().unwrap_or(0);
    let send = socket.send_buffer_size().unwrap_or(0);
    if recv < SOCKET_BUFFER || send < SOCKET_BUFFER {
        if server {
            tracing::warn!(
                asked = SOCKET_BUFFER,
                recv,
                send,
                "the kernel granted small UDP buffers; with many actors, datagrams will be dropped \
                 (raise net.core.rmem_max and net.core.wmem_max to at least {SOCKET_BUFFER})"
            );
        } else {
            tracing::debug!(asked = SOCKET_BUFFER, recv, send, "small UDP buffers");
        }
    }
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

fn endpoint(
    server: Option<quinn::ServerConfig>,
    socket: std::net::UdpSocket,
) -> std::io::Result<quinn::Endpoint> {
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        server,
        socket,
        Arc::new(quinn::TokioRuntime),
    )
}
