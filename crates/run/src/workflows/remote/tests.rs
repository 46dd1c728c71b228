//! The workflow state machines in memory: a real [`RemoteRun`] (probe
//! agent, `Counting-v0`, output in a temp dir) driven input by input on the
//! test's thread, with instants passed in for the clock — no transport, no
//! actor process. Each test checks one rule the conformance suite checks
//! through processes: joins, leaves with re-issue, duplicates, stale
//! batches, rounds with a dropped actor, window closing, rate-limited
//! inserts, pool overflow and reject, seed's transition assembly.

use super::input::{Bypass, Input, Internal};
use super::{RemoteRun, handle};
use crate::metrics::Metrics;
use crate::vocab::DropReason;
use crate::vocab::{Answer, ConnId};
use crate::vocab::{RunShared, RunStatus};
use crate::workflows::{RunOptions, StopReason};
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::wire::{
    self, EpisodeResult, ErrorCode, Experience, Hello, Message, Observations, Steps, WorkRequest,
    flags,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A run of `workflow` over at most `episodes` Counting episodes, with
/// `distributed` lines added to its `[distributed]` table.
pub(super) struct Harness {
    pub(super) run: RemoteRun,
    /// The workflow's helper beside the run thread, once started.
    bypass: Option<Arc<dyn Bypass>>,
    /// Where helpers reach the run thread (the test drains it at the end).
    internal: (
        std::sync::mpsc::SyncSender<Input>,
        std::sync::mpsc::Receiver<Input>,
    ),
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
}

fn harness(workflow: &str, episodes: u64, distributed: &str) -> Harness {
    harness_of("probe", workflow, episodes, distributed)
}

/// [`harness`] with another agent (its table in `distributed`'s lines).
pub(super) fn harness_of(agent: &str, workflow: &str, episodes: u64, distributed: &str) -> Harness {
    let dir = tempfile::tempdir().expect("temp dir");
    let probe = if agent == "probe" {
        "[probe]\ntrain_every = 5"
    } else {
        ""
    };
    let text = format!(
        r#"
name = "unit"
env = "Counting-v0"
agent = "{agent}"
workflow = "{workflow}"
transport = "inproc"
seed = 7
output_dir = "{}"
[stop]
max_episodes = {episodes}
[eval]
period_steps = 1000000
episodes = 1
[distributed]
batch_step_frequency = 3
batch_log = true
{distributed}
{probe}
"#,
        dir.path().display()
    );
    let cfg = RunConfig::from_toml(&text, "unit").expect("a valid config");
    let shared = Arc::new(RunShared {
        status: Mutex::new(RunStatus::starting("unit-1", &cfg)),
        episodes: Mutex::default(),
        watchdog: Arc::new(crate::notify::Watchdog::from_env()),
    });
    let opts = RunOptions::new(None, false);
    let run = RemoteRun::new(
        "unit-1",
        &cfg,
        &opts,
        Metrics::new().run("unit", "unit-1"),
        shared,
        16,
    )
    .expect("a run");
    Harness {
        run,
        bypass: None,
        internal: std::sync::mpsc::sync_channel(64),
        rt: tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime"),
        dir,
    }
}

/// The answer, if there is one yet.
pub(super) fn answered(rx: &mut Answer) -> Option<Message> {
    rx.try_recv().ok()
}

pub(super) fn ack(m: Option<Message>) -> wire::Ack {
    match m {
        Some(Message::Ack(a)) => a,
        other => panic!("expected an ack, got {other:?}"),
    }
}

pub(super) fn starts(m: &Message) -> Vec<u64> {
    match m {
        Message::Welcome(w) => w.starts.iter().map(|s| s.episode).collect(),
        Message::Ack(a) => a.starts.iter().map(|s| s.episode).collect(),
        Message::Actions(a) => a.starts.iter().map(|s| s.episode).collect(),
        other => panic!("no starts in {other:?}"),
    }
}

/// One batch of `steps` steps of `episode` from env 0 of `actor`, from
/// the episode's start; with `finish`, the episode ends there and env 0
/// asks for the next.
pub(super) fn batch(
    actor: &str,
    seq: u64,
    episode: u64,
    steps: usize,
    finish: bool,
    version: u64,
) -> Experience {
    batch_from(actor, seq, (episode, 0), steps, finish, version)
}

/// [`batch`] of `episode`'s steps from step `first` on (the observation
/// after step `t` is `[episode, t, 0]`).
pub(super) fn batch_from(
    actor: &str,
    seq: u64,
    (episode, first): (u64, u32),
    steps: usize,
    finish: bool,
    version: u64,
) -> Experience {
    let mut run = Steps::default();
    let at = first as f32;
    run.begin(0, episode, first, &[episode as f32, at, 0.0], false);
    for t in 0..steps {
        let next = [episode as f32, at + t as f32 + 1.0, 0.0];
        run.step(&[0.0], (t + 1) as f32, &next, false);
    }
    if finish {
        run.end(true);
    }
    Experience {
        actor_id: actor.into(),
        session_id: 1,
        seq,
        policy_version: version,
        steps: run.into(),
        finished: if finish {
            vec![EpisodeResult {
                episode,
                env: 0,
                ret: (steps * (steps + 1) / 2) as f64,
                length: first + steps as u32,
            }]
        } else {
            vec![]
        },
        faults: vec![],
        idle_envs: if finish { vec![0] } else { vec![] },
        last: finish,
    }
}

impl Harness {
    pub(super) fn input(&mut self, input: Input) {
        let r = &mut self.run;
        handle(&mut r.core, r.workflow.as_mut(), input).expect("handled");
    }

    pub(super) fn join(&mut self, conn: ConnId, actor: &str, envs: u32) -> Answer {
        self.join_session(conn, (actor, 1), envs)
    }

    /// An actor's `Hello` in session `session` (a reconnect's is new).
    pub(super) fn join_session(
        &mut self,
        conn: ConnId,
        (actor, session): (&str, u64),
        envs: u32,
    ) -> Answer {
        let (reply, rx) = oneshot::channel();
        let hello = Hello {
            protocol: wire::PROTOCOL_VERSION,
            software: "unit".into(),
            actor_id: actor.into(),
            session_id: session,
            token: String::new(),
            env_capacity: envs,
            run: String::new(),
            once: false,
        };
        self.input(Input::Join { conn, hello, reply });
        rx
    }

    /// A request for work from `actor` for its env 0.
    pub(super) fn ask(&mut self, conn: ConnId, actor: &str, seq: u64) -> Answer {
        let (reply, rx) = oneshot::channel();
        let msg = Message::WorkRequest(WorkRequest {
            actor_id: actor.into(),
            session_id: 1,
            seq,
            faults: vec![],
            idle_envs: vec![0],
            last: true,
        });
        self.input(Input::Request { conn, msg, reply });
        rx
    }

    pub(super) fn send(&mut self, conn: ConnId, e: Experience) -> Answer {
        let (reply, rx) = oneshot::channel();
        let msg = Message::Experience(e);
        self.input(Input::Request { conn, msg, reply });
        rx
    }

    /// What a transport does with a request: the workflow's helper takes
    /// it (the `rma` pools) or the run thread does.
    pub(super) fn deposit(&mut self, conn: ConnId, e: Experience) -> Answer {
        if self.bypass.is_none() {
            let r = &mut self.run;
            self.bypass = r
                .workflow
                .bypass(&r.core, &self.internal.0, self.rt.handle());
        }
        let msg = Message::Experience(e);
        let bypass = self.bypass.as_ref().expect("a helper");
        assert!(bypass.serves(&msg));
        bypass.take(conn, msg)
    }

    pub(super) fn work(&mut self, now: Instant) -> bool {
        let r = &mut self.run;
        let busy = r.workflow.work(&mut r.core, now).expect("work");
        super::deliver(&mut r.core);
        busy
    }

    /// The run's end, as the driver does it: held requests answered,
    /// what the learner holds trained, late helper messages taken.
    pub(super) fn stop(&mut self) {
        let r = &mut self.run;
        r.core.stop_parked("test over");
        r.workflow.stop(&mut r.core, "test over").expect("stop");
        super::deliver(&mut r.core);
        while let Ok(input) = self.internal.1.try_recv() {
            super::late(&mut r.core, r.workflow.as_mut(), input, "test over").expect("late");
        }
    }

    pub(super) fn dropped(&self, reason: DropReason) -> u64 {
        let t = self.run.core.accounts().tally.lock().expect("tally");
        t.dropped.get(&reason).copied().unwrap_or(0)
    }

    pub(super) fn trained(&self) -> u64 {
        self.run
            .core
            .accounts()
            .tally
            .lock()
            .expect("tally")
            .trained
    }

    pub(super) fn episodes(&self) -> u64 {
        self.run.core.book().counters.episodes
    }

    /// What the probe was given, once the run is gone (its file flushed).
    pub(super) fn probe_lines(self) -> Vec<rlfleet_learning::agents::ProbeLine> {
        let Harness { run, dir, .. } = self;
        drop(run);
        rlfleet_output::read_csv(&dir.path().join("probe.csv")).expect("probe.csv")
    }
}

#[test]
fn async_answers_at_once_parks_an_idle_actor_and_reissues_a_leavers_episodes() {
    let mut h = harness("async", 3, "");
    let welcome_a = answered(&mut h.join(1, "a", 1)).expect("welcome");
    let welcome_b = answered(&mut h.join(2, "b", 1)).expect("welcome");
    assert_eq!((starts(&welcome_a), starts(&welcome_b)), (vec![0], vec![1]));
    // a finishes episode 0 and gets episode 2, the last one.
    let a1 = ack(answered(&mut h.send(1, batch("a", 1, 0, 4, true, 0))));
    assert_eq!(
        a1.starts.iter().map(|s| s.episode).collect::<Vec<_>>(),
        vec![2]
    );
    // a finishes 2: nothing is left to hand out, a waits.
    let mut parked = h.send(1, batch("a", 2, 2, 3, true, 0));
    assert!(answered(&mut parked).is_none(), "parked");
    // b played 2 steps of episode 1, then leaves: a gets episode 1, and
    // b's 2 steps are counted abandoned.
    ack(answered(&mut h.send(2, batch("b", 1, 1, 2, false, 0))));
    h.input(Input::Left {
        conn: 2,
        departed: oneshot::channel().0,
    });
    let a2 = ack(answered(&mut parked));
    assert_eq!(
        a2.starts.iter().map(|s| s.episode).collect::<Vec<_>>(),
        vec![1]
    );
    assert_eq!((h.episodes(), h.trained()), (2, 3));
    assert_eq!(h.run.core.ledger().reissued, 1);
    assert_eq!(h.run.core.abandoned(), 2);
    // a plays episode 1 from its start: steps = lengths + abandoned.
    let mut done = h.send(1, batch("a", 3, 1, 6, true, 0));
    assert!(
        answered(&mut done).is_none(),
        "nothing left to play: parked"
    );
    assert_eq!(h.episodes(), 3);
    assert_eq!(h.run.core.env_steps(), (4 + 3 + 6) + 2);
}

#[test]
fn a_work_request_gets_episodes_or_waits_and_is_never_a_batch() {
    let mut h = harness("async", 2, "");
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    // Welcomed with episode 0; it asks again (as after a lost start):
    // episode 1, the last one.
    let a1 = ack(answered(&mut h.ask(1, "a", 1)));
    assert_eq!(
        a1.starts.iter().map(|s| s.episode).collect::<Vec<_>>(),
        vec![1]
    );
    // Nothing is left, but a holds episodes: answered at once, empty.
    assert!(ack(answered(&mut h.ask(1, "a", 2))).starts.is_empty());
    let t = h.run.core.accounts().tally.lock().expect("tally");
    assert_eq!((t.received, t.trained), (0, 0), "requests are not batches");
    drop(t);
    // An empty `Experience` is refused: asking is a work request.
    let mut empty = batch("a", 3, 0, 1, false, 0);
    empty.steps = Steps::default().into();
    match answered(&mut h.send(1, empty)) {
        Some(Message::Error(e)) => assert!(e.text.contains("work request"), "{}", e.text),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn a_resent_batch_is_acknowledged_as_a_duplicate_and_not_trained_twice() {
    let mut h = harness("nb-async", 10, "in_flight = 4");
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    let first = ack(answered(&mut h.send(1, batch("a", 1, 0, 3, false, 0))));
    assert!(!first.duplicate);
    let again = ack(answered(&mut h.send(1, batch("a", 1, 0, 3, false, 0))));
    assert!(again.duplicate);
    assert_eq!((h.trained(), h.dropped(DropReason::Duplicate)), (1, 1));
    assert_eq!(h.run.core.env_steps(), 3);
}

#[test]
fn a_batch_older_than_max_policy_lag_is_dropped_stale() {
    let mut h = harness("async", 10, "max_policy_lag = 0");
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    // 6 transitions at version 0: the probe takes version 1 at the 5th.
    ack(answered(&mut h.send(1, batch("a", 1, 0, 6, false, 0))));
    assert_eq!(h.run.core.agent().train_steps(), 1);
    ack(answered(
        &mut h.send(1, batch_from("a", 2, (0, 6), 2, false, 0)),
    ));
    assert_eq!((h.trained(), h.dropped(DropReason::Stale)), (1, 1));
    ack(answered(
        &mut h.send(1, batch_from("a", 3, (0, 8), 2, false, 1)),
    ));
    assert_eq!(h.trained(), 2);
}

#[test]
fn a_bad_batch_is_refused_with_its_problem_and_counted_invalid() {
    let mut h = harness("async", 10, "");
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    let mut e = batch("a", 1, 0, 3, false, 0);
    Arc::make_mut(&mut e.steps).rewards[1] = f32::NAN;
    match answered(&mut h.send(1, e)) {
        Some(Message::Error(err)) => {
            assert_eq!(err.code, ErrorCode::NonFinite);
            assert!(err.text.contains("rewards"), "{}", err.text);
        }
        other => panic!("expected an error, got {other:?}"),
    }
    let stranger = answered(&mut h.send(1, batch("b", 2, 0, 3, false, 0)));
    assert!(matches!(stranger, Some(Message::Error(_))));
    assert_eq!((h.trained(), h.dropped(DropReason::Invalid)), (0, 2));
}

#[test]
fn sync_rounds_wait_for_every_participant_and_go_on_without_one_that_left() {
    let mut h = harness("sync", 20, "");
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    // a's round is under way: b joins at its end.
    let mut b = h.join(2, "b", 1);
    assert!(answered(&mut b).is_none(), "b waits for the boundary");
    ack(answered(&mut h.send(1, batch("a", 1, 0, 3, false, 0))));
    assert!(matches!(answered(&mut b), Some(Message::Welcome(_))));
    // This round waits for a and b.
    let mut a = h.send(1, batch_from("a", 2, (0, 3), 3, false, 0));
    assert!(answered(&mut a).is_none(), "the round waits for b");
    // A second batch from a in the same round is out of turn.
    let out_of_turn = answered(&mut h.send(1, batch("a", 3, 0, 3, false, 0)));
    assert!(matches!(out_of_turn, Some(Message::Error(_))));
    let mut c = h.join(3, "c", 1);
    // b leaves: the round ends with a alone, and c comes in.
    h.input(Input::Left {
        conn: 2,
        departed: oneshot::channel().0,
    });
    ack(answered(&mut a));
    assert!(matches!(answered(&mut c), Some(Message::Welcome(_))));
    assert_eq!((h.trained(), h.dropped(DropReason::Invalid)), (2, 1));
    // The next round waits for a and c; the run ends before c sends.
    let mut a3 = h.send(1, batch_from("a", 4, (0, 6), 3, false, 0));
    assert!(answered(&mut a3).is_none());
    h.stop();
    assert!(matches!(answered(&mut a3), Some(Message::Stop(_))));
    assert_eq!((h.trained(), h.dropped(DropReason::RunEnded)), (2, 1));
}

#[test]
fn async_window_trains_and_answers_when_the_window_closes() {
    let mut h = harness("async-window", 20, "window_ms = 50\nin_flight = 2");
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    answered(&mut h.join(2, "b", 1)).expect("welcome");
    let t = Instant::now();
    let mut a = h.send(1, batch("a", 1, 0, 3, false, 0));
    let mut b = h.send(2, batch("b", 1, 1, 3, false, 0));
    assert!(!h.work(t), "the window just opened");
    assert!(answered(&mut a).is_none() && answered(&mut b).is_none());
    assert_eq!(h.trained(), 0);
    let timeout = h.run.workflow.idle_timeout(t);
    assert!(timeout <= Duration::from_millis(50), "{timeout:?}");
    assert!(h.work(t + Duration::from_secs(1)), "closed");
    ack(answered(&mut a));
    ack(answered(&mut b));
    assert_eq!(h.trained(), 2);
}

#[test]
fn orchestrated_holds_inserts_while_training_is_behind() {
    let mut h = harness(
        "orchestrated",
        20,
        "samples_per_insert = 1.0\nmin_size_to_sample = 1\nerror_buffer = 2.0\nin_flight = 2",
    );
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    // 4 inserted, nothing sampled: past the window's top (1 + 2).
    ack(answered(&mut h.send(1, batch("a", 1, 0, 4, false, 0))));
    let mut held = h.send(1, batch_from("a", 2, (0, 4), 3, false, 0));
    assert!(answered(&mut held).is_none(), "held back");
    assert_eq!(
        h.run.core.agent().train_steps(),
        0,
        "paced by the limiter alone"
    );
    // Gradient steps (the probe samples 1 item each) down to the window's
    // bottom (1 - 2), then the held insert goes in.
    assert!(h.work(Instant::now()));
    assert_eq!(h.run.core.agent().train_steps(), 5);
    ack(answered(&mut held));
    // 7 in, 5 sampled: 3 more go in at once, the next waits; the run
    // ends with it held: it goes into replay, its actor is told to stop.
    ack(answered(
        &mut h.send(1, batch_from("a", 3, (0, 7), 3, false, 0)),
    ));
    let mut last = h.send(1, batch_from("a", 4, (0, 10), 2, false, 0));
    assert!(answered(&mut last).is_none());
    h.stop();
    assert!(matches!(answered(&mut last), Some(Message::Stop(_))));
    assert_eq!((h.trained(), h.run.core.env_steps()), (4, 12));
}

#[test]
fn a_full_rma_queue_rejects_until_popped_and_keeps_order() {
    let mut h = harness(
        "rma",
        20,
        "data_structure = \"queue\"\ndata_structure_length = 2\noverflow = \"reject\"\nin_flight = 4",
    );
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    let b = |seq: u64| batch_from("a", seq, (0, 3 * (seq as u32 - 1)), 3, false, 0);
    for seq in 1..=2 {
        let a = ack(answered(&mut h.deposit(1, b(seq))));
        assert!(!a.full);
    }
    let full = ack(answered(&mut h.deposit(1, b(3))));
    assert!(full.full, "refused: the queue holds 2");
    // A later seq is refused too, so that order holds.
    assert!(ack(answered(&mut h.deposit(1, b(4)))).full);
    assert!(h.work(Instant::now()), "one batch popped and trained");
    assert!(!ack(answered(&mut h.deposit(1, b(3)))).full);
    assert_eq!(h.trained(), 1);
    assert_eq!(h.dropped(DropReason::Overflow), 0);
}

#[test]
fn a_full_rma_queue_that_drops_the_oldest_counts_it_overflow() {
    let mut h = harness(
        "rma",
        20,
        "data_structure = \"queue\"\ndata_structure_length = 2\noverflow = \"drop-oldest\"\nin_flight = 4",
    );
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    let b = |seq: u64| batch_from("a", seq, (0, 3 * (seq as u32 - 1)), 3, false, 0);
    for seq in 1..=3 {
        assert!(!ack(answered(&mut h.deposit(1, b(seq)))).full);
    }
    assert_eq!(h.dropped(DropReason::Overflow), 1);
    h.work(Instant::now());
    h.work(Instant::now());
    assert!(!h.work(Instant::now()), "empty");
    assert_eq!(h.trained(), 2);
    // A resend of an accepted seq is a duplicate, not trained again.
    assert!(ack(answered(&mut h.deposit(1, b(2)))).duplicate);
    assert_eq!(h.dropped(DropReason::Duplicate), 1);
}

#[test]
fn rma_queue_pop_all_ends_only_once_every_actor_sent_its_sentinel() {
    let mut h = harness("rma-queue-pop-all", 1, "in_flight = 2");
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    let book = Some(StopReason::MaxEpisodes);
    let r = &mut h.run;
    assert_eq!(r.workflow.poll_stop(&r.core, book), None, "no sentinel yet");
    // a finishes the only episode: its batch is its sentinel and it waits.
    let mut last = h.deposit(1, batch("a", 1, 0, 5, true, 0));
    assert!(answered(&mut last).is_none(), "parked with nothing to play");
    let r = &mut h.run;
    assert_eq!(
        r.workflow.poll_stop(&r.core, book),
        None,
        "its queue is not empty"
    );
    h.stop();
    assert_eq!(h.trained(), 1, "what the pools held is trained at the end");
    assert!(matches!(answered(&mut last), Some(Message::Stop(_))));
}

#[test]
fn seed_assembles_transitions_per_env_and_hands_out_the_next_episode() {
    let mut h = harness("seed", 3, "");
    let welcome = answered(&mut h.join(1, "a", 2)).expect("welcome");
    assert_eq!(starts(&welcome), vec![0, 1]);
    if let Message::Welcome(w) = &welcome {
        assert!(w.weights.is_none(), "seed actors hold no model");
    }
    let acted = |seq: u64, t: f32, reward: f32, flags: [u8; 2]| {
        Internal::Acted(vec![super::input::Acted {
            conn: 1,
            obs: Observations {
                seq,
                obs: vec![0.0, t, 0.0, 1.0, t, 0.0],
                obs_u8: vec![],
                rewards: vec![reward; 2],
                flags: flags.to_vec(),
                faults: vec![],
            },
            actions: vec![1.0, 0.0],
            version: 0,
            logp: Vec::new(),
            states: Vec::new(),
        }])
    };
    h.input(Input::Internal(acted(1, 0.0, 0.0, [flags::FRESH; 2])));
    assert_eq!(h.run.core.env_steps(), 0, "first observations");
    h.input(Input::Internal(acted(2, 1.0, 1.0, [0, 0])));
    assert_eq!(h.run.core.env_steps(), 2);
    // Env 0's episode ends; episode 2 goes to it.
    h.input(Input::Internal(acted(3, 2.0, 2.0, [flags::TERMINATED, 0])));
    assert_eq!((h.run.core.env_steps(), h.episodes()), (4, 1));
    assert_eq!(h.run.core.ledger().issued, 3);
    assert_eq!(
        h.run
            .core
            .accounts()
            .tally
            .lock()
            .expect("tally")
            .inference_requests,
        3
    );
}
