//! [`Registry`]: the actors connected to the daemon and the active runs
//! they serve — what transports need of the daemon. The hub, which builds
//! and ends runs, adds and removes active runs here; the [`Fleet`] says
//! which run each actor serves, and a session whose actor is to move is
//! told ([`Registry::told_to_move`]). Transports never see the hub.

use crate::fleet::{Fleet, Member, RunShare};
use rlfleet_run::metrics::Metrics;
use rlfleet_run::vocab::{ActiveRun, ActorView, ConnId};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
struct ActorEntry {
    view: ActorView,
    since: Instant,
    /// Set, and told, when the fleet moves this actor to another run.
    moved: Arc<MoveSignal>,
}

/// Whether the fleet is moving one actor to another run: a flag its
/// session reads on every exchange without the registry's lock, and a
/// wake-up when it is set. It mirrors the fleet member's `moving_to`.
#[derive(Debug, Default)]
pub struct MoveSignal {
    moving: AtomicBool,
    told: Notify,
}

impl MoveSignal {
    fn set(&self, moving: bool) {
        self.moving.store(moving, Ordering::Release);
        if moving {
            self.told.notify_one();
        }
    }

    /// Resolves once the actor of `signal` is to move (never without one).
    pub async fn wait(signal: Option<&MoveSignal>) {
        match signal {
            Some(s) => s.moved().await,
            None => std::future::pending().await,
        }
    }

    /// Resolves once the actor is to move.
    async fn moved(&self) {
        loop {
            let told = self.told.notified();
            tokio::pin!(told);
            told.as_mut().enable();
            if self.moving.load(Ordering::Acquire) {
                return;
            }
            told.await;
        }
    }
}

/// What the registry's lock guards: the actors' views, the active runs
/// and the fleet that assigns one to the other.
#[derive(Debug, Default)]
struct Inner {
    actors: BTreeMap<ConnId, ActorEntry>,
    runs: BTreeMap<String, ActiveRun>,
    fleet: Fleet,
    /// The active runs each actor (by its id, which outlives a
    /// reconnect) declined, and why.
    declined: BTreeMap<String, BTreeMap<String, String>>,
}

/// What an actor asks of the fleet when it registers.
#[derive(Debug, Clone, Default)]
pub struct Wants {
    /// Serve this run alone (an id or a name).
    pub pin: Option<String>,
    /// Leave when the first run ends: never moved.
    pub once: bool,
}

/// How long a new actor waits for a slot when every one is taken (a
/// departing actor's slot is freed once its run has taken the departure:
/// a reconnect usually finds it free within a few milliseconds).
pub const SLOT_PATIENCE: Duration = Duration::from_secs(2);

/// The daemon's actors and its active runs, shared by every transport.
#[derive(Debug)]
pub struct Registry {
    pub metrics: Arc<Metrics>,
    inner: Mutex<Inner>,
    /// Told when a slot is freed.
    freed: Notify,
    /// Bumped whenever a run is added or removed (actors waiting for a run
    /// look again).
    runs_changed: watch::Sender<u64>,
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
    pub weights_frames: Arc<rlfleet_shared::wire::WeightsFrames>,
}

impl Registry {
    pub fn new(metrics: Arc<Metrics>, shutdown: CancellationToken, max_actors: u32) -> Registry {
        Registry {
            metrics,
            inner: Mutex::default(),
            freed: Notify::new(),
            runs_changed: watch::Sender::new(0),
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("registry lock")
    }

    /// Routes actors to `run` too from now on: the fleet moves actors to
    /// it until its share is met.
    pub fn add_run(&self, run: ActiveRun) {
        let mut inner = self.lock();
        inner.fleet.runs.push(RunShare {
            id: run.id.clone(),
            name: run.name.clone(),
            share: run.share.clone(),
        });
        inner.runs.insert(run.id.clone(), run);
        self.rebalance(&mut inner);
        drop(inner);
        self.runs_changed.send_modify(|n| *n += 1);
    }

    /// Run `id` takes no more actors (it is ending); those on their way to
    /// it go elsewhere, and the rest of the fleet is shared again.
    pub fn remove_run(&self, id: &str) {
        let mut inner = self.lock();
        inner.runs.remove(id);
        inner.fleet.remove_run(id);
        let Inner { actors, fleet, .. } = &mut *inner;
        for (conn, a) in actors.iter_mut() {
            a.view.declined.remove(id);
            // Those on their way to it are no longer moving.
            a.moved.set(
                fleet
                    .members
                    .get(conn)
                    .is_some_and(|m| m.moving_to.is_some()),
            );
        }
        inner.declined.retain(|_, runs| {
            runs.remove(id);
            !runs.is_empty()
        });
        self.rebalance(&mut inner);
        drop(inner);
        self.runs_changed.send_modify(|n| *n += 1);
    }

    /// Envs the fleet counts in run `id`'s share now.
    pub fn envs_of(&self, id: &str) -> u32 {
        self.lock().fleet.envs_of(id)
    }

    /// Tells the sessions of the actors the fleet moves now.
    fn rebalance(&self, inner: &mut Inner) {
        for (conn, to) in inner.fleet.rebalance() {
            if let Some(a) = inner.actors.get(&conn) {
                tracing::info!(conn, actor = %a.view.actor_id, to = %to, "moving an actor to another run");
                self.metrics.actors_moved.inc();
                a.moved.set(true);
            }
        }
    }

    /// The run actor `conn` should join now, waiting for one that will
    /// take it. `None` on shutdown.
    pub async fn assign(&self, conn: ConnId) -> Option<ActiveRun> {
        let mut changed = self.runs_changed.subscribe();
        loop {
            changed.mark_unchanged();
            {
                let mut inner = self.lock();
                if let Some(id) = inner.fleet.pick(conn) {
                    let run = inner.runs.get(&id).cloned();
                    if let Some(a) = inner.actors.get_mut(&conn) {
                        a.view.run = Some(id);
                        a.moved.set(false);
                    }
                    if run.is_some() {
                        return run;
                    }
                }
            }
            tokio::select! {
                r = changed.changed() => r.ok()?,
                _ = self.shutdown.cancelled() => return None,
            }
        }
    }

    /// What tells actor `conn`'s session that the fleet moves it away
    /// from the run it serves (`None`: no such actor).
    pub fn move_signal(&self, conn: ConnId) -> Option<Arc<MoveSignal>> {
        self.lock().actors.get(&conn).map(|a| a.moved.clone())
    }

    /// Actor `conn` cannot play run `run` (it said why): the run is not
    /// offered to it again, and `GET /v1/actors` shows why.
    /// The actor is known by its id, so a reconnect does not forget it.
    pub fn declined(&self, conn: ConnId, run: &str, reason: &str) {
        let mut inner = self.lock();
        if let Some(m) = inner.fleet.members.get_mut(&conn) {
            m.declined.push(run.to_string());
        }
        let Some(a) = inner.actors.get_mut(&conn) else {
            return;
        };
        tracing::warn!(conn, actor = %a.view.actor_id, run, "the actor cannot take part in this run: {reason}");
        a.view.declined.insert(run.to_string(), reason.to_string());
        let actor = a.view.actor_id.clone();
        inner
            .declined
            .entry(actor)
            .or_default()
            .insert(run.to_string(), reason.to_string());
    }

    /// Actor `conn` left the run it served (its session took the
    /// departure): it serves none until assigned again.
    pub fn actor_left_run(&self, conn: ConnId) {
        let mut inner = self.lock();
        if let Some(m) = inner.fleet.members.get_mut(&conn) {
            m.run = None;
        }
        if let Some(a) = inner.actors.get_mut(&conn) {
            a.view.run = None;
        }
    }

    pub fn new_conn_id(&self) -> ConnId {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers an actor; when `max_actors` are registered, waits a
    /// little for one to leave, then refuses it.
    pub async fn actor_connected(&self, view: ActorView, wants: Wants) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + self.patience;
        loop {
            // Listening before looking, so a slot freed in between is seen.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut inner = self.lock();
                if inner.actors.len() < self.max_actors {
                    self.metrics.connected_actors.inc();
                    // What this actor declined before a reconnect.
                    let declined = inner
                        .declined
                        .get(&view.actor_id)
                        .cloned()
                        .unwrap_or_default();
                    inner.fleet.members.insert(
                        view.connection,
                        Member {
                            envs: view.env_capacity,
                            pin: wants.pin.clone(),
                            once: wants.once,
                            declined: declined.keys().cloned().collect(),
                            ..Member::default()
                        },
                    );
                    let mut view = view;
                    view.declined = declined;
                    inner.actors.insert(
                        view.connection,
                        ActorEntry {
                            view,
                            since: Instant::now(),
                            moved: Arc::default(),
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

    pub fn actor_disconnected(&self, conn: ConnId) {
        let mut inner = self.lock();
        inner.fleet.members.remove(&conn);
        if inner.actors.remove(&conn).is_some() {
            self.metrics.connected_actors.dec();
            self.freed.notify_waiters();
            // Its run may now be short of its share.
            self.rebalance(&mut inner);
        }
    }

    pub fn list_actors(&self) -> Vec<ActorView> {
        self.lock()
            .actors
            .values()
            .map(|a| ActorView {
                connected_secs: a.since.elapsed().as_secs_f64(),
                ..a.view.clone()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(conn: ConnId, actor: &str) -> ActorView {
        ActorView {
            connection: conn,
            actor_id: actor.into(),
            session_id: conn,
            address: "127.0.0.1:1".into(),
            software: "test".into(),
            env_capacity: 1,
            run: None,
            pinned: None,
            declined: BTreeMap::new(),
            connected_secs: 0.0,
        }
    }

    /// A run an actor declined stays declined when it reconnects (a new
    /// connection, the same actor id), until that run is gone.
    #[tokio::test]
    async fn a_declined_run_stays_declined_across_a_reconnect() {
        let r = Registry::new(Arc::new(Metrics::new()), CancellationToken::new(), 8);
        r.actor_connected(view(1, "a"), Wants::default())
            .await
            .unwrap();
        r.declined(1, "needy-1", "no license here");
        r.actor_disconnected(1);
        r.actor_connected(view(2, "a"), Wants::default())
            .await
            .unwrap();
        let listed = r.list_actors();
        assert_eq!(listed[0].declined["needy-1"], "no license here");
        assert_eq!(
            r.lock().fleet.members[&2].declined,
            vec!["needy-1".to_string()]
        );
        r.remove_run("needy-1");
        assert!(r.list_actors()[0].declined.is_empty());
        r.actor_disconnected(2);
        r.actor_connected(view(3, "a"), Wants::default())
            .await
            .unwrap();
        assert!(r.lock().fleet.members[&3].declined.is_empty());
    }
}
