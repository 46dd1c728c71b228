//! The `seed` front held behind training: it sleeps until the run takes
//! a batch, then answers what it held; a hold whose requests leave ends;
//! a lone request goes at its deadline. On tokio's paused clock: time
//! moves when every task waits (or when a test moves it), so a deadline
//! is met to the millisecond and a 5 s limit costs nothing.

use super::super::input::Input;
use super::front::{Front, Request};
use super::link::{PolicySnapshot, SeedLink};
use crate::metrics::Metrics;
use crate::vocab::ConnId;
use rlfleet_shared::config::{AgentKind, RunConfig};
use rlfleet_shared::policy::ActorPolicy;
use rlfleet_shared::wire::{Message, Observations};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

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

async fn ask(
    requests: &mpsc::Sender<Request>,
    conn: ConnId,
    seq: u64,
) -> oneshot::Receiver<Message> {
    let (reply, answer) = oneshot::channel();
    let obs = observations(seq);
    let received = Instant::now();
    let r = Request {
        conn,
        obs,
        received,
        reply,
    };
    requests.send(r).await.expect("the front is serving");
    answer
}

/// A DQN CartPole front at most one batch ahead of training, serving the
/// actors `conns` (one env each): its request queue, the run's end of the
/// channel it forwards batches to, the link, and its task.
struct Serving {
    requests: mpsc::Sender<Request>,
    taken: std::sync::mpsc::Receiver<Input>,
    link: Arc<SeedLink>,
    task: tokio::task::JoinHandle<()>,
}

fn serve(conns: &[ConnId]) -> Serving {
    serve_with(conns, "")
}

/// [`serve`], with more `[distributed]` keys.
fn serve_with(conns: &[ConnId], distributed: &str) -> Serving {
    let text = "name = \"held\"\nenv = \"CartPole-v1\"\nagent = \"dqn\"\nworkflow = \"seed\"\noutput_dir = \"unused\"\n\
                [stop]\nmax_episodes = 10\n[distributed]\nmax_batches_ahead = 1\n";
    let cfg =
        RunConfig::from_toml(&format!("{text}{distributed}\n"), "held").expect("a valid config");
    assert_eq!(cfg.agent, AgentKind::Dqn);
    serve_cfg(conns, &cfg, |n| vec![0.0; n])
}

/// A CartPole front for `cfg` serving the actors `conns`, with the weights
/// `params(numel)` as version 0.
fn serve_cfg(conns: &[ConnId], cfg: &RunConfig, params: impl Fn(usize) -> Vec<f32>) -> Serving {
    let cfg = cfg.clone();
    let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
    let policy = ActorPolicy::new(&spec, cfg.agent, cfg.policy_net(&spec), false, 1);
    let link = Arc::new(SeedLink::new(PolicySnapshot {
        version: 0,
        params: params(policy.numel()).into(),
        epsilon: 0.0,
    }));
    for &conn in conns {
        link.admit(conn, 1);
    }
    let (requests, rx) = mpsc::channel(4);
    let (run, taken) = std::sync::mpsc::sync_channel(16);
    let metrics = Metrics::new().run("front", "front-1");
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
    Serving {
        requests,
        taken,
        link,
        task: tokio::spawn(front.serve()),
    }
}

impl Serving {
    async fn stop(self) {
        self.link.stop.cancel();
        within(self.task).await.expect("the front ends cleanly");
    }
}

/// Lets the front take what it was sent (without moving the clock).
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(5), f)
        .await
        .expect("within 5 s")
}

/// One actor, at most one batch ahead of training: its second request is
/// held until the run takes the first batch, and while it is held the
/// front's loop sleeps (it used to wake on the passed deadline of the held
/// request, over and over, taking a core from the training). The clock is
/// moved by hand here: a spinning front never lets it move by itself.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_front_held_behind_training_sleeps_until_the_run_takes_a_batch() {
    let Serving {
        requests,
        taken,
        link,
        task,
    } = serve(&[7]);

    // The lone actor waits: its first request is answered at once.
    let first = within(ask(&requests, 7, 0).await).await.unwrap();
    assert!(
        matches!(first, Message::Actions(ref a) if a.seq == 0),
        "{first:?}"
    );
    taken.try_recv().expect("the batch went to the run");

    // The second is held: the run has not taken the first batch.
    let mut second = ask(&requests, 7, 1).await;
    settle().await;
    tokio::time::advance(Duration::from_millis(100)).await;
    settle().await;
    assert!(second.try_recv().is_err(), "answered ahead of training");
    let turns = link.tally.turns();
    for _ in 0..3 {
        tokio::time::advance(Duration::from_millis(100)).await;
        settle().await;
    }
    let idle = link.tally.turns() - turns;
    assert_eq!(idle, 0, "the held front woke {idle} times in 300 ms");

    // The run takes the batch: the held request is answered.
    link.batch_done();
    let second = within(second).await.unwrap();
    assert!(
        matches!(second, Message::Actions(ref a) if a.seq == 1),
        "{second:?}"
    );
    Serving {
        requests,
        taken,
        link,
        task,
    }
    .stop()
    .await;
}

/// Two actors: a request held behind training whose actor leaves ends the
/// hold, so the next request is served on its deadline once the run has
/// taken the batch (the front used to stay marked as holding, armed no
/// deadline, and left that request waiting for an event that never came).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hold_whose_requests_leave_ends_and_deadlines_serve_again() {
    let f = serve(&[7, 8]);
    // Alone of two, actor 7's request goes on its deadline.
    let first = within(ask(&f.requests, 7, 0).await).await.unwrap();
    assert!(
        matches!(first, Message::Actions(ref a) if a.seq == 0),
        "{first:?}"
    );
    f.taken.try_recv().expect("the batch went to the run");
    // Its next is held behind training, then its actor leaves.
    let held = ask(&f.requests, 7, 1).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(held);
    f.link.batch_done();
    // Actor 8 asks: served on its deadline.
    let other = within(ask(&f.requests, 8, 0).await).await.unwrap();
    assert!(
        matches!(other, Message::Actions(ref a) if a.seq == 0),
        "{other:?}"
    );
    f.stop().await;
}

/// Two actors, one asking: its request waits exactly the batching window
/// (`inference_max_wait_us`, on tokio's millisecond timer), and the
/// latency the front tallies is that wait.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_lone_request_is_served_at_its_deadline_and_its_wait_tallied() {
    let f = serve_with(&[7, 8], "inference_max_wait_us = 20000");
    let asked = Instant::now();
    let mut answer = ask(&f.requests, 7, 0).await;
    settle().await;
    tokio::time::advance(Duration::from_micros(19_000)).await;
    settle().await;
    assert!(
        answer.try_recv().is_err(),
        "served before its 20 ms window ended"
    );
    let got = within(answer).await.unwrap();
    let waited = asked.elapsed();
    assert!(
        matches!(got, Message::Actions(ref a) if a.seq == 0),
        "{got:?}"
    );
    assert!(
        waited >= Duration::from_millis(20) && waited <= Duration::from_millis(21),
        "served after {waited:?}"
    );
    let figures = f.link.tally.figures();
    assert_eq!((figures.batches, figures.answered), (1, 1));
    assert!(
        (figures.latency_secs - waited.as_secs_f64()).abs() < 1e-6,
        "{figures:?} against {waited:?}"
    );
    f.stop().await;
}

/// A recurrent IMPALA front hands the run, with each env's action, the
/// action's log-probability under the weights that chose it and the core's
/// state it was chosen from: zeros at a new connection's first request, then
/// the state that step led to. Both are what the same network, run apart
/// from the front, gives for the actions the front drew.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_front_hands_over_each_action_s_log_probability_and_state() {
    use super::super::input::Internal;
    use rlfleet_shared::nets::{Forward, NetCopy, Rows};
    let text = "name = \"lstm\"\nenv = \"CartPole-v1\"\nagent = \"impala\"\nworkflow = \"seed-a2c\"\n\
                output_dir = \"unused\"\n[stop]\nmax_episodes = 10\n[model]\ncore = \"lstm\"\ncore_size = 4\n\
                [impala]\nhidden = [8]\n[distributed]\nmax_batches_ahead = 4\n";
    let cfg = RunConfig::from_toml(text, "lstm").expect("a valid config");
    let weights =
        |n: usize| -> Vec<f32> { (0..n).map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.1).collect() };
    let f = serve_cfg(&[7], &cfg, weights);
    let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
    let shape = ActorPolicy::new(&spec, cfg.agent, cfg.policy_net(&spec), false, 1)
        .net()
        .clone();
    let mut net = NetCopy::new(shape.clone());
    net.load(&weights(shape.numel())).unwrap();
    let mut state = vec![0.0; shape.state_len()];
    for seq in 0..2 {
        let answer = ask(&f.requests, 7, seq).await;
        let Message::Actions(a) = within(answer).await.unwrap() else {
            panic!("actions");
        };
        settle().await;
        let Ok(Input::Internal(Internal::Acted(items))) = f.taken.try_recv() else {
            panic!("the batch went to the run");
        };
        let acted = &items[0];
        assert_eq!(acted.actions, a.actions);
        assert_eq!(
            acted.states, state,
            "request {seq}: the state it acted from"
        );
        let obs = observations(seq).obs;
        let logits = net
            .forward_state(Rows::Values(&obs), 1, &mut state)
            .to_vec();
        let z: f32 = logits.iter().map(|l| l.exp()).sum();
        let want = (logits[a.actions[0] as usize].exp() / z).ln();
        assert_eq!(acted.logp.len(), 1);
        assert!(
            (acted.logp[0] - want).abs() < 1e-5,
            "{:?} against {want}",
            acted.logp
        );
    }
    assert!(state.iter().any(|&x| x != 0.0));
    f.stop().await;
}
