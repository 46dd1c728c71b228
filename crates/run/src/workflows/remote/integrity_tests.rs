//! Integrity at the agent, on the in-memory harness of `tests.rs`: each
//! episode's steps reach the agent once and in order, or after it was
//! told to end what it held (the probe's `cut`) — across a stale batch, a
//! resend after the episode went to another actor, a reconnect, an `rma`
//! stack handing out the newest batch first — and an `rma` run ends its
//! episodes at the agent, so that nothing per episode outlives it.

use super::tests::{Harness, ack, answered, batch, batch_from, harness_of, starts};
use crate::vocab::DropReason;
use rlfleet_learning::agents::ProbeLine;
use rlfleet_shared::wire::RUN_TRUNCATED;
use std::time::Instant;
use tokio::sync::oneshot;

/// `(episode, step, cut)` of each row the probe wrote, in order; the step
/// read from the observation agrees with the `step` column.
fn given(h: Harness) -> Vec<(u64, u32, bool)> {
    let rows: Vec<ProbeLine> = h.probe_lines();
    rows.iter()
        .map(|r| {
            let at: f32 = r.obs.split(';').nth(1).unwrap().parse().unwrap();
            assert_eq!(at as u32, r.step, "{r:?}");
            (r.episode, r.step, r.cut)
        })
        .collect()
}

fn steps(episode: u64, from: u32, to: u32, first_cut: bool) -> Vec<(u64, u32, bool)> {
    (from..to)
        .map(|s| (episode, s, s == from && first_cut))
        .collect()
}

#[test]
fn a_stale_batch_leaves_a_hole_the_agent_is_told_of() {
    let mut h = harness_of("probe", "async", 10, "max_policy_lag = 0");
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    // 6 steps at version 0 (the probe takes version 1 at the 5th); steps
    // 6..8 at version 0 are stale; 8..10 go on after the hole.
    ack(answered(&mut h.send(1, batch("a", 1, 0, 6, false, 0))));
    ack(answered(
        &mut h.send(1, batch_from("a", 2, (0, 6), 2, false, 0)),
    ));
    ack(answered(
        &mut h.send(1, batch_from("a", 3, (0, 8), 2, true, 1)),
    ));
    assert_eq!((h.trained(), h.dropped(DropReason::Stale)), (2, 1));
    assert_eq!(h.episodes(), 1);
    assert_eq!(h.run.core.plays_open(), 0);
    assert_eq!(h.run.core.agent().open_episodes(), 0);
    let want = [steps(0, 0, 6, false), steps(0, 8, 10, true)].concat();
    assert_eq!(given(h), want);
}

#[test]
fn a_resend_of_an_episode_now_played_by_another_actor_is_superseded() {
    let mut h = harness_of("probe", "async", 10, "");
    assert_eq!(starts(&answered(&mut h.join(1, "a", 1)).unwrap()), [0]);
    ack(answered(&mut h.send(1, batch("a", 1, 0, 3, false, 0))));
    // a's link goes (its steps 3..6 unacknowledged); episode 0 goes to b.
    h.input(super::input::Input::Left {
        conn: 1,
        departed: oneshot::channel().0,
    });
    assert_eq!(starts(&answered(&mut h.join(2, "b", 1)).unwrap()), [0]);
    ack(answered(&mut h.send(2, batch("b", 1, 0, 2, false, 0))));
    // a comes back in a new session and resends: not b's play.
    answered(&mut h.join_session(3, ("a", 2), 1)).expect("welcome");
    let old = batch_from("a", 2, (0, 3), 3, false, 0);
    ack(answered(&mut h.send(3, old)));
    assert_eq!(h.dropped(DropReason::Superseded), 1);
    assert_eq!(h.trained(), 2);
    // b's play from its start: the agent let go of a's before.
    let want = [steps(0, 0, 3, false), steps(0, 0, 2, true)].concat();
    assert_eq!(given(h), want);
}

#[test]
fn a_reconnected_actors_resend_stays_out_of_its_new_play_and_a_hole_cuts() {
    let mut h = harness_of("probe", "async", 10, "");
    answered(&mut h.join(1, "a", 1)).expect("welcome: episode 0");
    ack(answered(&mut h.send(1, batch("a", 1, 0, 3, false, 0))));
    h.input(super::input::Input::Left {
        conn: 1,
        departed: oneshot::channel().0,
    });
    // Back in a new session, a is handed episode 0 again and plays it
    // from its start; its old session's steps 3..6 come after.
    let hello = answered(&mut h.join_session(2, ("a", 2), 1)).unwrap();
    assert_eq!(starts(&hello), [0]);
    let mut new = batch("a", 1, 0, 2, false, 0);
    new.session_id = 2;
    ack(answered(&mut h.send(2, new)));
    ack(answered(
        &mut h.send(2, batch_from("a", 2, (0, 3), 3, false, 0)),
    ));
    assert_eq!(h.dropped(DropReason::Superseded), 1);
    // The new play's steps 2..4 never arrive: 4.. start a trajectory.
    let mut after_hole = batch_from("a", 2, (0, 4), 2, false, 0);
    after_hole.session_id = 2;
    ack(answered(&mut h.send(2, after_hole)));
    let want = [
        steps(0, 0, 3, false),
        steps(0, 0, 2, true),
        steps(0, 4, 6, true),
    ]
    .concat();
    assert_eq!(given(h), want);
}

#[test]
fn a_stack_hands_out_the_newest_batch_first_and_each_piece_is_cut() {
    let mut h = harness_of(
        "probe",
        "rma",
        10,
        "data_structure = \"stack\"\ndata_structure_length = 4\nin_flight = 4",
    );
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    for (seq, first, end) in [(1, 0, false), (2, 3, false), (3, 6, true)] {
        let b = batch_from("a", seq, (0, first), 3, end, 0);
        ack(answered(&mut h.deposit(1, b)));
    }
    while h.work(Instant::now()) {}
    assert_eq!(h.trained(), 3);
    assert_eq!(h.run.core.plays_open(), 0, "every piece came");
    assert_eq!(h.run.core.agent().open_episodes(), 0);
    let want = [
        steps(0, 6, 9, true),
        steps(0, 3, 6, true),
        steps(0, 0, 3, true),
    ]
    .concat();
    assert_eq!(given(h), want);
}

#[test]
fn rma_ends_its_episodes_at_the_agent_so_n_step_windows_close() {
    let mut h = harness_of(
        "dqn",
        "rma",
        40,
        "data_structure = \"queue\"\ndata_structure_length = 32\nin_flight = 32\n\
         [dqn]\nn_step = 3\nlearning_starts = 1000000\nbuffer_size = 10000",
    );
    answered(&mut h.join(1, "a", 1)).expect("welcome");
    let mut episode = 0;
    for seq in 1..=30 {
        // Cut by a time limit: the n-step window stays open until the
        // agent is told of the end.
        let mut b = batch("a", seq, episode, 5, true, 0);
        std::sync::Arc::make_mut(&mut b.steps).runs[0].end = RUN_TRUNCATED;
        let a = ack(answered(&mut h.deposit(1, b)));
        episode = a.starts[0].episode;
    }
    while h.work(Instant::now()) {}
    assert_eq!(h.trained(), 30);
    let agent = h.run.core.agent();
    assert_eq!(agent.open_episodes(), 0, "n-step windows left open");
    // Each episode's tail went in: one transition per step.
    assert_eq!(agent.replay_len(), 30 * 5);
    assert_eq!(h.run.core.plays_open(), 0);
}
