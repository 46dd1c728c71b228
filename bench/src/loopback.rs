//! What the QUIC benchmarks share: a learner daemon on loopback, and a run
//! config that never trains, evaluates or checkpoints before its end (so
//! that only the path being measured runs).

use learner_server::daemon::{self, Daemon};
use learner_server::server_config::ServerConfig;
use rlfleet_shared::config::RunConfig;
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// `base` with its output under `dir/name`, no training, no evaluation, a
/// checkpoint only at the end (a periodic fsync would stall the run), and
/// an hour of wall time as its only limit.
pub fn quiet_run(base: &RunConfig, dir: &Path, name: &str) -> RunConfig {
    let mut cfg = base.clone();
    cfg.output_dir = dir.join(name);
    cfg.stop = Default::default();
    cfg.stop.max_wall_secs = Some(3600.0);
    cfg.dqn.learning_starts = u64::MAX / 2;
    cfg.eval.period_steps = u64::MAX / 2;
    cfg.checkpoint.period_steps = 0;
    cfg
}

/// A daemon with both listeners on loopback ports chosen by the OS; cancel
/// the token to shut it down.
pub async fn start_daemon(dir: &Path) -> anyhow::Result<(Daemon, CancellationToken)> {
    let mut scfg = ServerConfig::default();
    scfg.actors.listen = ([127, 0, 0, 1], 0).into();
    scfg.actors.tls_dir = dir.join("tls");
    scfg.api.listen = ([127, 0, 0, 1], 0).into();
    scfg.state_dir = dir.join("state");
    let shutdown = CancellationToken::new();
    let d = daemon::start(&scfg, shutdown.clone()).await?;
    Ok((d, shutdown))
}
