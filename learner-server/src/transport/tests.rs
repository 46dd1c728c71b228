//! Sessions against a real run's inbox while the run thread is stalled:
//! actors that drop and reconnect never queue more than the inbox's bound
//! (a departing actor keeps its registry slot until the run has taken its
//! departure) and no session ever blocks its runtime's thread.

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
    let text = format!(
        "name = \"churn\"\nenv = \"Counting-v0\"\nagent = \"probe\"\nworkflow = \"async\"\n\
         transport = \"inproc\"\noutput_dir = \"{}\"\n[stop]\nmax_episodes = 1000\n\
         [eval]\nperiod_steps = 1000000\nepisodes = 1\n",
        dir.path().display()
    );
    let cfg = RunConfig::from_toml(&text, "churn").unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let metrics = Arc::new(Metrics::new());
    let mut registry = Registry::new(metrics.clone(), CancellationToken::new(), 1);
    registry.patience = Duration::from_millis(50);
    let registry = Arc::new(registry);
    let shared = Arc::new(RunShared {
        status: Mutex::new(RunStatus::starting("churn-1", &cfg)),
        episodes: Mutex::default(),
        watchdog: Arc::new(rlfleet_run::notify::Watchdog::from_env()),
    });
    let opts = RunOptions::new(None, false);
    let mut run = RemoteRun::new(
        "churn-1",
        &cfg,
        &opts,
        metrics.run("churn", "churn-1"),
        shared,
        1,
    )
    .unwrap();
    registry.add_run(ActiveRun {
        id: "churn-1".into(),
        name: "churn".into(),
        share: cfg.fleet.clone(),
        events: run.inbox(rt.handle()),
    });
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
