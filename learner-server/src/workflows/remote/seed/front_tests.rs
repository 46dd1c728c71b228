//! The `seed` front held behind training: it sleeps until the run takes
//! a batch, then answers what it held.

use super::front::{Front, Request};
use super::link::{PolicySnapshot, SeedLink};
use crate::metrics::Metrics;
use rlfleet_shared::config::{AgentKind, RunConfig};
use rlfleet_shared::policy::ActorPolicy;
use rlfleet_shared::wire::{Message, Observations};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

fn observations(seq: u64) -> Observations {
    Observations {
        seq,
        obs: vec![0.01, -0.02, 0.03, 0.0],
        obs_u8: vec![],
        rewards: vec![0.0],
        flags: vec![0],
        faults: vec![],
    }
}

async fn ask(requests: &mpsc::Sender<Request>, seq: u64) -> oneshot::Receiver<Message> {
    let (reply, answer) = oneshot::channel();
    let obs = observations(seq);
    let received = Instant::now();
    let r = Request {
        conn: 7,
        obs,
        received,
        reply,
    };
    requests.send(r).await.expect("the front is serving");
    answer
}

/// One actor, at most one batch ahead of training: its second request is
/// held until the run takes the first batch, and while it is held the
/// front's loop sleeps (it used to wake on the passed deadline of the held
/// request, over and over, taking a core from the training).
#[tokio::test(flavor = "current_thread")]
async fn a_front_held_behind_training_sleeps_until_the_run_takes_a_batch() {
    let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
    let text = "name = \"held\"\nenv = \"CartPole-v1\"\nagent = \"dqn\"\nworkflow = \"seed\"\noutput_dir = \"unused\"\n\
                [stop]\nmax_episodes = 10\n[distributed]\nmax_batches_ahead = 1\n";
    let cfg = RunConfig::from_toml(text, "held").expect("a valid config");
    assert_eq!(cfg.agent, AgentKind::Dqn);
    let policy = ActorPolicy::new(&spec, cfg.agent, cfg.policy_net(&spec), false, 1);
    let zeros: Arc<[f32]> = vec![0.0; policy.numel()].into();
    let link = Arc::new(SeedLink::new(PolicySnapshot {
        version: 0,
        params: zeros,
        epsilon: 0.0,
    }));
    link.admit(7, 1);
    let (requests, rx) = mpsc::channel(4);
    let (run, taken) = std::sync::mpsc::sync_channel(16);
    let metrics = Arc::new(Metrics::new());
    let dims = (spec.obs_dim(), 1);
    let front = Front::new(
        link.clone(),
        rx,
        run,
        metrics,
        cfg.distributed,
        dims,
        policy,
    );
    let serving = tokio::spawn(front.serve());
    let within = |a| tokio::time::timeout(Duration::from_secs(5), a);

    // The lone actor waits: its first request is answered at once.
    let first = within(ask(&requests, 0).await).await.unwrap().unwrap();
    assert!(
        matches!(first, Message::Actions(ref a) if a.seq == 0),
        "{first:?}"
    );
    taken.try_recv().expect("the batch went to the run");

    // The second is held: the run has not taken the first batch.
    let mut second = ask(&requests, 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(second.try_recv().is_err(), "answered ahead of training");
    let turns = link.tally.turns();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = link.tally.turns() - turns;
    assert!(idle <= 2, "the held front woke {idle} times in 300 ms");

    // The run takes the batch: the held request is answered.
    link.batch_done();
    let second = within(second).await.unwrap().unwrap();
    assert!(
        matches!(second, Message::Actions(ref a) if a.seq == 1),
        "{second:?}"
    );
    link.stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .unwrap()
        .unwrap();
}
