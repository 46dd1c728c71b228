//! QUIC glue shared by the learner and the actors: TLS identities and trust
//! (a CA file or a pinned certificate fingerprint), endpoint configuration
//! (ALPN, keep-alive, idle timeout) and a framed request/reply stream.

mod stream;
mod tls;

pub use stream::FramedStream;
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
            idle_timeout: Duration::from_secs(5),
        }
    }
}

fn transport_config(l: Liveness) -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.keep_alive_interval(Some(l.keep_alive));
    t.max_idle_timeout(l.idle_timeout.try_into().ok());
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
    quinn::Endpoint::server(cfg, addr).map_err(|e| TlsError::Bind(addr, e))
}

/// A client endpoint that trusts the learner as `trust` says.
pub fn client_endpoint(trust: &Trust, liveness: Liveness) -> Result<quinn::Endpoint, TlsError> {
    let crypto = trust.rustls_client_config()?;
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(crypto)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut cfg = quinn::ClientConfig::new(Arc::new(quic));
    cfg.transport_config(transport_config(liveness));
    let bind: std::net::SocketAddr = ([0, 0, 0, 0], 0).into();
    let mut ep = quinn::Endpoint::client(bind).map_err(|e| TlsError::Bind(bind, e))?;
    ep.set_default_client_config(cfg);
    Ok(ep)
}
