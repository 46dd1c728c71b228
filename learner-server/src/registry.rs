//! [`Registry`]: the actors connected to the daemon and the run they are
//! routed to — what transports need of the daemon. The hub, which builds
//! and ends runs, publishes the active run here; transports never see it.

use rlfleet_run::metrics::Metrics;
use rlfleet_run::vocab::{ActiveRun, ActorView, ConnId};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
struct ActorEntry {
    view: ActorView,
    since: Instant,
}

/// How long a new actor waits for a slot when every one is taken (a
/// departing actor's slot is freed once its run has taken the departure:
/// a reconnect usually finds it free within a few milliseconds).
pub const SLOT_PATIENCE: Duration = Duration::from_secs(2);

/// The daemon's actors and its active run, shared by every transport.
#[derive(Debug)]
pub struct Registry {
    pub metrics: std::sync::Arc<Metrics>,
    actors: Mutex<BTreeMap<ConnId, ActorEntry>>,
    /// Told when a slot is freed.
    freed: Notify,
    active: watch::Sender<Option<ActiveRun>>,
    next_conn: AtomicU64,
    /// How long a new actor waits for a slot ([`SLOT_PATIENCE`]).
    pub(crate) patience: Duration,
    /// Most actors registered at once (`actors.max_actors`); bounds every
    /// run's inboxes.
    pub max_actors: usize,
    /// Cancelled when the daemon shuts down.
    pub shutdown: CancellationToken,
    /// This daemon resumes interrupted runs when it starts again (`serve`):
    /// actors are told to reconnect when it shuts down, not to exit.
    pub comes_back: AtomicBool,
    /// The latest weights frame, encoded once for every QUIC and MPI
    /// session.
    pub weights_frames: std::sync::Arc<rlfleet_shared::wire::WeightsFrames>,
}

impl Registry {
    pub fn new(
        metrics: std::sync::Arc<Metrics>,
        shutdown: CancellationToken,
        max_actors: u32,
    ) -> Registry {
        Registry {
            metrics,
            actors: Mutex::default(),
            freed: Notify::new(),
            active: watch::Sender::new(None),
            next_conn: AtomicU64::new(1),
            weights_frames: Default::default(),
            patience: SLOT_PATIENCE,
            max_actors: max_actors as usize,
            shutdown,
            comes_back: false.into(),
        }
    }

    /// Whether actors should exit when this daemon shuts down: not when it
    /// is a `serve` daemon, which resumes the interrupted run when it
    /// starts again (a restart by systemd or Slurm) — its actors reconnect
    /// for `--give-up-secs`.
    pub fn actors_exit_at_shutdown(&self) -> bool {
        !self.comes_back.load(Ordering::Relaxed)
    }

    /// Routes actors to `run` from now on (`None`: to no run).
    pub fn set_active(&self, run: Option<ActiveRun>) {
        self.active.send_replace(run);
    }

    /// The run actors should join now, waiting for one if none is active.
    /// `None` on shutdown.
    pub async fn wait_active(&self) -> Option<ActiveRun> {
        let mut rx = self.active.subscribe();
        tokio::select! {
            r = rx.wait_for(Option::is_some) => r.ok().and_then(|a| a.clone()),
            _ = self.shutdown.cancelled() => None,
        }
    }

    pub fn new_conn_id(&self) -> ConnId {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers an actor; when `max_actors` are registered, waits a
    /// little for one to leave, then refuses it.
    pub async fn actor_connected(&self, view: ActorView) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + self.patience;
        loop {
            // Listening before looking, so a slot freed in between is seen.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut actors = self.actors.lock().expect("actors lock");
                if actors.len() < self.max_actors {
                    self.metrics.connected_actors.inc();
                    actors.insert(
                        view.connection,
                        ActorEntry {
                            view,
                            since: Instant::now(),
                        },
                    );
                    return Ok(());
                }
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return Err(format!(
                    "this learner takes at most {} actors at once (actors.max_actors)",
                    self.max_actors
                ));
            }
        }
    }

    pub fn actor_assigned(&self, conn: ConnId, run: Option<String>) {
        if let Some(a) = self.actors.lock().expect("actors lock").get_mut(&conn) {
            a.view.run = run;
        }
    }

    pub fn actor_disconnected(&self, conn: ConnId) {
        if self
            .actors
            .lock()
            .expect("actors lock")
            .remove(&conn)
            .is_some()
        {
            self.metrics.connected_actors.dec();
            self.freed.notify_waiters();
        }
    }

    pub fn list_actors(&self) -> Vec<ActorView> {
        self.actors
            .lock()
            .expect("actors lock")
            .values()
            .map(|a| ActorView {
                connected_secs: a.since.elapsed().as_secs_f64(),
                ..a.view.clone()
            })
            .collect()
    }
}
