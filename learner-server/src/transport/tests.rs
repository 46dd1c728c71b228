//! Sessions against real runs' inboxes: actors that drop and reconnect
//! while the run thread is stalled never queue more than the inbox's bound
//! (a departing actor keeps its registry slot until the run has taken its
//! departure) and no session ever blocks its runtime's thread; an actor
//! moved to another run while its next request is on its way is welcomed
//! there, not refused.

use super::inproc;
use crate::registry::Registry;
use rlfleet_run::metrics::Metrics;
use rlfleet_run::vocab::{ActiveRun, RunShared, RunStatus};
use rlfleet_run::workflows::RunOptions;
use rlfleet_run::workflows::remote::RemoteRun;
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::wire::{self, Hello, Message};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn hello(session: u64) -> Message {
    Message::Hello(Hello {
        protocol: wire::PROTOCOL_VERSION,
        software: "test".into(),
        actor_id: "churn".into(),
        session_id: session,
        token: String::new(),
        env_capacity: 1,
        run: String::new(),
        once: false,
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A `probe` run of `Counting-v0` over `inproc` (id `NAME-1`), and what
/// the registry routes to it.
fn counting_run(
    name: &str,
    workflow: &str,
    dir: &std::path::Path,
    metrics: &Metrics,
    rt: &tokio::runtime::Runtime,
) -> (RemoteRun, ActiveRun) {
    let text = format!(
        "name = \"{name}\"\nenv = \"Counting-v0\"\nagent = \"probe\"\nworkflow = \"{workflow}\"\n\
         transport = \"inproc\"\noutput_dir = \"{}\"\n[stop]\nmax_episodes = 1000\n\
         [eval]\nperiod_steps = 1000000\nepisodes = 1\n",
        dir.join(name).display()
    );
    let cfg = RunConfig::from_toml(&text, name).unwrap();
    let id = format!("{name}-1");
    let shared = Arc::new(RunShared {
        status: Mutex::new(RunStatus::starting(&id, &cfg)),
        episodes: Mutex::default(),
        watchdog: Arc::new(rlfleet_run::notify::Watchdog::from_env()),
    });
    let opts = RunOptions::new(None, false);
    let mut run = RemoteRun::new(&id, &cfg, &opts, metrics.run(name, &id), shared, 1).unwrap();
    let active = ActiveRun {
        id,
        name: name.into(),
        share: cfg.fleet.clone(),
        events: run.inbox(rt.handle()),
    };
    (run, active)
}

/// One env's observations as a `seed` actor sends them: `flag` and the
/// reward of its last action.
fn observations(seq: u64, t: f32, reward: f32, flag: u8) -> Message {
    Message::Observations(wire::Observations {
        seq,
        obs: vec![1.0, t, 0.0],
        obs_u8: Vec::new(),
        rewards: vec![reward],
        flags: vec![flag],
        faults: Vec::new(),
    })
}

/// The next message to `link` within 20 s.
async fn next(link: &mut actor_client::remote::InprocLink) -> Message {
    tokio::time::timeout(Duration::from_secs(20), link.from_learner.recv())
        .await
        .expect("an answer within 20 s")
        .expect("the session is open")
}

/// One actor (`max_actors = 1`) joins, drops and reconnects 30 times
/// while the run thread takes nothing. The inbox holds 2 + 16 inputs: were
/// a slot freed before the run took the departure, every cycle would
/// queue a join and a departure more and the 10th would block a runtime
/// thread. Here the first actor's slot stays taken until the run has taken
/// its departure; each reconnect waits for it (briefly, in this test),
/// then is refused by name; once the run thread starts, the next actor is
/// welcomed.
#[test]
fn reconnects_under_a_full_inbox_neither_block_nor_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let metrics = Arc::new(Metrics::new());
    let mut registry = Registry::new(metrics.clone(), CancellationToken::new(), 1);
    registry.patience = Duration::from_millis(50);
    let registry = Arc::new(registry);
    let (run, active) = counting_run("churn", "async", dir.path(), &metrics, &rt);
    registry.add_run(active);
    let refused = || {
        metrics
            .protocol_errors
            .with_label_values(&["too_many_actors"])
            .get()
    };
    rt.block_on(async {
        for session in 0..30 {
            let link = inproc::connect(&registry);
            link.to_learner.send(hello(session)).await.unwrap();
            // Until it is in the run (its join queued) or refused; then
            // the connection is lost.
            let before = refused();
            let settled = tokio::time::timeout(Duration::from_secs(10), async {
                loop {
                    let joined = registry
                        .list_actors()
                        .iter()
                        .any(|a| a.session_id == session && a.run.is_some());
                    if joined || refused() > before {
                        return joined;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("reconnect {session} neither joined nor was refused"));
            assert_eq!(settled, session == 0, "reconnect {session}");
            drop(link);
        }
        // The first actor is still registered: its departure waits.
        assert_eq!(registry.list_actors().len(), 1);
    });
    assert_eq!(refused(), 29);
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let thread = std::thread::spawn(move || run.run(&stop));
    rt.block_on(async {
        // The run takes the departure; the slot frees; a new actor is
        // welcomed.
        let mut link = inproc::connect(&registry);
        link.to_learner.send(hello(99)).await.unwrap();
        let welcome = tokio::time::timeout(Duration::from_secs(20), link.from_learner.recv())
            .await
            .expect("an answer within 20 s");
        assert!(matches!(welcome, Some(Message::Welcome(_))), "{welcome:?}");
        let actors = registry.list_actors();
        assert_eq!(actors.len(), 1);
        assert_eq!(actors[0].session_id, 99);
    });
    cancel.cancel();
    thread.join().unwrap().unwrap();
}

/// Two `seed` actors serve one run; a second run starts and the fleet
/// moves one of them while it is between requests, so its Stop goes out
/// before its next observations arrive (a real actor sends them, then
/// reads the Stop as their reply). Those observations reach the session's
/// next hello: moot there (the run it left abandons its open episodes),
/// not a reason to refuse the actor, which is welcomed into the other run.
#[test]
fn observations_in_flight_when_an_actor_moves_do_not_refuse_its_next_hello() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let metrics = Arc::new(Metrics::new());
    let registry = Arc::new(Registry::new(metrics.clone(), CancellationToken::new(), 2));
    let cancel = CancellationToken::new();
    let mut threads = Vec::new();
    let mut start = |name: &str| {
        let (run, active) = counting_run(name, "seed", dir.path(), &metrics, &rt);
        registry.add_run(active);
        let stop = cancel.clone();
        threads.push(std::thread::spawn(move || run.run(&stop)));
    };
    start("first");
    let moved_to = rt.block_on(async {
        let mut links = Vec::new();
        for session in 0..2 {
            let mut link = inproc::connect(&registry);
            link.to_learner.send(hello(session)).await.unwrap();
            let Message::Welcome(w) = next(&mut link).await else {
                panic!("no welcome")
            };
            assert_eq!(w.run_id, "first-1");
            link.to_learner
                .send(observations(1, 0.0, 0.0, wire::flags::FRESH))
                .await
                .unwrap();
            assert!(matches!(next(&mut link).await, Message::Actions(_)));
            links.push(link);
        }
        // Both are between requests when the second run starts.
        start("second");
        let moved = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                for (i, link) in links.iter_mut().enumerate() {
                    if let Ok(m) = link.from_learner.try_recv() {
                        return (i, m);
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("one actor is moved");
        let (i, Message::Stop(stop)) = moved else {
            panic!("expected a stop, got {:?}", moved.1)
        };
        assert_eq!(stop.reason, "moved to another run");
        let link = &mut links[i];
        link.to_learner
            .send(observations(2, 1.0, 1.0, 0))
            .await
            .unwrap();
        link.to_learner.send(hello(i as u64)).await.unwrap();
        let welcome = next(link).await;
        // The other actor plays on in the first run.
        let other = &mut links[1 - i];
        other
            .to_learner
            .send(observations(2, 1.0, 1.0, 0))
            .await
            .unwrap();
        assert!(matches!(next(other).await, Message::Actions(_)));
        welcome
    });
    let Message::Welcome(w) = moved_to else {
        panic!("the moved actor was not welcomed: {moved_to:?}")
    };
    assert_eq!(w.run_id, "second-1");
    cancel.cancel();
    for t in threads {
        t.join().unwrap().unwrap();
    }
}
