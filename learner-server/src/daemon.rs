//! The long-running learner: binds the QUIC actor listener and the HTTP
//! control API (configuration validated first), serves until the shutdown
//! token fires, then drains in order — runs stop and checkpoint, actors are
//! told to stop, connections close, and the API goes last.

use crate::api::{self, ApiState};
use crate::hub::Hub;
use crate::server_config::ServerConfig;
use crate::transport::quic::{self, QuicOptions};
use anyhow::Context;
use rlfleet_quic::{ServerIdentity, server_endpoint};
use rlfleet_run::metrics::Metrics;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A started daemon: where it listens and how to wait for it.
#[derive(Debug)]
pub struct Daemon {
    pub hub: Arc<Hub>,
    /// Its sweeps and populations.
    pub studies: Arc<crate::studies::Studies>,
    pub actors_addr: SocketAddr,
    pub api_addr: SocketAddr,
    /// SHA-256 of the certificate actors see (for `--pin`).
    pub fingerprint: String,
    /// The certificate (for `--ca` with a self-signed one).
    pub cert_path: PathBuf,
    quic_task: JoinHandle<()>,
    api_task: JoinHandle<std::io::Result<()>>,
    api_stop: CancellationToken,
}

/// Binds both listeners and starts serving.
pub async fn start(cfg: &ServerConfig, shutdown: CancellationToken) -> anyhow::Result<Daemon> {
    let a = &cfg.actors;
    let identity = match (&a.cert, &a.key) {
        (Some(cert), Some(key)) => ServerIdentity::load(cert, key)?,
        _ => ServerIdentity::load_or_generate(&a.tls_dir, &a.tls_names)?,
    };
    let endpoint = server_endpoint(a.listen, &identity, cfg.liveness())?;
    let actors_addr = endpoint.local_addr().context("QUIC local address")?;
    let state = rlfleet_run::state::StateDir::open(&cfg.state_dir)?;
    let hub = Hub::new(
        Arc::new(Metrics::new()),
        shutdown.clone(),
        a.max_actors,
        Some(state),
        cfg.runs.clone(),
    );
    let listener = tokio::net::TcpListener::bind(cfg.api.listen)
        .await
        .with_context(|| format!("cannot bind the control API on {}", cfg.api.listen))?;
    let api_addr = listener.local_addr()?;
    let studies = crate::studies::Studies::new(hub.clone());
    let state = Arc::new(ApiState {
        hub: hub.clone(),
        studies: studies.clone(),
        token: cfg.api.token.clone(),
        open_metrics: cfg.api.open_metrics,
        open_healthz: cfg.api.open_healthz,
        ready: false.into(),
    });
    let api_stop = CancellationToken::new();
    let stop = api_stop.clone();
    let app = api::router(state.clone());
    let api_task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
    });
    let quic_task = tokio::spawn(quic::serve(
        endpoint,
        hub.registry.clone(),
        QuicOptions {
            token: a.token.clone(),
            max_frame_bytes: a.max_frame_bytes,
            max_unauthenticated: a.max_unauthenticated as usize,
            hello_timeout: Duration::from_millis(a.hello_timeout_ms),
            actor_timeout: (a.actor_timeout_secs > 0)
                .then(|| Duration::from_secs(a.actor_timeout_secs)),
        },
    ));
    state.ready.store(true, Ordering::Release);
    if let Some(every) = hub.watchdog.period() {
        // Pings while no run's loop does (an idle daemon).
        let (watchdog, stop) = (hub.watchdog.clone(), shutdown.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every / 2);
            loop {
                tokio::select! {
                    _ = tick.tick() => watchdog.idle_ping(),
                    _ = stop.cancelled() => break,
                }
            }
        });
    }
    rlfleet_run::notify::ready();
    tracing::info!(
        actors = %actors_addr,
        api = %api_addr,
        fingerprint = %identity.fingerprint,
        cert = %identity.cert_path.display(),
        "listening: actors on QUIC {actors_addr}, control API on http://{api_addr}"
    );
    Ok(Daemon {
        hub,
        studies,
        actors_addr,
        api_addr,
        fingerprint: identity.fingerprint.clone(),
        cert_path: identity.cert_path.clone(),
        quic_task,
        api_task,
        api_stop,
    })
}

impl Daemon {
    /// Writes where the daemon listens (`actors`, `api`), the certificate's
    /// `fingerprint` and `cert` path as JSON, atomically (a reader never
    /// sees a partial file).
    pub fn write_ready_file(&self, path: &std::path::Path) -> std::io::Result<()> {
        let info = serde_json::json!({
            "actors": self.actors_addr.to_string(),
            "api": self.api_addr.to_string(),
            "fingerprint": self.fingerprint,
            "cert": self.cert_path,
        });
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, info.to_string())?;
        std::fs::rename(&tmp, path)
    }

    /// Waits for the shutdown token, then drains everything.
    pub async fn wait(self) {
        self.hub.shutdown().cancelled().await;
        rlfleet_run::notify::stopping();
        tracing::info!("shutting down: stopping runs (they checkpoint first)");
        self.hub.wait_all().await;
        let _ = self.quic_task.await;
        self.api_stop.cancel();
        let _ = self.api_task.await;
        tracing::info!("shut down");
    }
}
