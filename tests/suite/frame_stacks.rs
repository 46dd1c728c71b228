//! `frame_stack`: actors send single frames and the learner keeps each
//! env's stack. Over every single-learner workflow, in process, with the
//! counting env (a frame is `[tag, t, last action]`) and the probe agent
//! (which records every transition it trains on): every stack the learner
//! built holds its episode's last 3 frames, oldest first, the first frame
//! repeated at the start (Gymnasium's `FrameStackObservation`), never a
//! frame of another episode or env; and each transition's next stack is
//! its stack moved on by one frame. Steps whose earlier frames a pool
//! pushed out are counted, not trained on.

use rlfleet_learning::agents::ProbeLine;
use rlfleet_output::read_csv;
use rlfleet_shared::config::{DataStructure, Overflow, TransportKind};
use rlfleet_tests::{counting_probe, heavy, run_embedded};

const K: usize = 3;
const FRAME: usize = 3;

fn floats(s: &str) -> Vec<f32> {
    s.split(';').map(|v| v.parse().unwrap()).collect()
}

/// Checks one recorded transition's stacks; returns its episode tag and
/// newest step.
fn check_row(row: &ProbeLine, what: &str) -> (f32, f32) {
    let (obs, next) = (floats(&row.obs), floats(&row.next_obs));
    assert_eq!((obs.len(), next.len()), (K * FRAME, K * FRAME), "{what}");
    let frame = |v: &[f32], j: usize| v[j * FRAME..(j + 1) * FRAME].to_vec();
    let (tag, t) = (obs[(K - 1) * FRAME], obs[(K - 1) * FRAME + 1]);
    for j in 0..K {
        let f = frame(&obs, j);
        let want_t = (t - (K - 1 - j) as f32).max(0.0);
        assert_eq!((f[0], f[1]), (tag, want_t), "{what}: stack {obs:?}");
    }
    // The next stack is this one moved on by a frame.
    for j in 0..K - 1 {
        assert_eq!(
            frame(&next, j),
            frame(&obs, j + 1),
            "{what}: {obs:?} -> {next:?}"
        );
    }
    let newest = frame(&next, K - 1);
    assert_eq!((newest[0], newest[1]), (tag, t + 1.0), "{what}: {next:?}");
    assert_eq!(newest[2], row.action.parse::<f32>().unwrap(), "{what}");
    (tag, t)
}

#[test]
fn every_workflow_stacks_single_frames_on_the_learner_exactly() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Option<(DataStructure, Overflow)>); 9] = [
        ("async", None),
        ("sync", None),
        ("nb-async", None),
        ("async-window", None),
        ("rma", Some((DataStructure::Queue, Overflow::Reject))),
        ("rma", Some((DataStructure::Stack, Overflow::DropOldest))),
        ("rma-queue-pop-all", None),
        ("orchestrated", None),
        ("seed", None),
    ];
    for (n, (workflow, pool)) in cases.into_iter().enumerate() {
        let what = format!("{workflow} {pool:?}");
        let out = dir.path().join(format!("{workflow}-{n}"));
        let mut cfg = counting_probe("stacks", workflow, TransportKind::Inproc, 5, 40, &out);
        cfg.frame_stack = K as u32;
        cfg.distributed.steps_per_round = 3;
        cfg.distributed.in_flight = 3;
        cfg.dqn.hidden = vec![8];
        if let Some((structure, overflow)) = pool {
            cfg.distributed.data_structure = structure;
            cfg.distributed.overflow = overflow;
            cfg.distributed.data_structure_length = 3;
        }
        cfg.validate().unwrap();
        let run = run_embedded(&cfg, dir.path(), &[]);
        assert!(run.success, "{what}: {}\n{}", run.stdout, run.stderr);
        let rows: Vec<ProbeLine> = read_csv(&out.join("probe.csv")).unwrap();
        assert!(!rows.is_empty(), "{what}: nothing trained");
        let mut tags = std::collections::BTreeMap::new();
        for row in &rows {
            let (tag, _) = check_row(row, &what);
            // One episode, one tag: no stack mixes episodes.
            assert_eq!(*tags.entry(row.episode).or_insert(tag), tag, "{what}");
        }
        let prom = std::fs::read_to_string(out.join("metrics.prom")).unwrap();
        let unstacked = rlfleet_tests::metric_value(&prom, "rlfleet_transitions_unstacked_total");
        let summary = rlfleet_tests::read_summary(&out);
        let trained = summary["learner"]["batches_trained"].as_integer().unwrap();
        eprintln!(
            "{what}: {} transitions with whole stacks, {unstacked} without, {trained} batches trained",
            rows.len()
        );
        // Only a pool that pushes batches out loses frames; elsewhere
        // every step of every episode is trained on, with a whole stack.
        if pool.is_none_or(|p| p.1 == Overflow::Reject) {
            assert_eq!(unstacked, 0.0, "{what}");
            let steps = summary["env_steps"].as_integer().unwrap();
            assert_eq!(rows.len() as i64, steps, "{what}");
        }
    }
}

/// The recorded transitions (each proven equal to `FrameStackObservation`'s
/// by the Gymnasium replay) go, in the order the learner took them, through
/// the replay's frame chains with `n`-step returns, in a ring smaller than
/// the run (it wraps: chains lose their oldest steps): every step the ring
/// can sample is the `n`-step transition computed from the rows themselves
/// — stack, next stack `n` steps on (or at the episode's end), return and
/// discount — bit for bit, and a step whose window is still open is not
/// sampled. Returns how many steps were checked.
fn sampled_replay_equals_the_rows(
    rows: &[ProbeLine],
    finished: &std::collections::BTreeSet<u64>,
    k: usize,
    n: usize,
    capacity: usize,
) -> usize {
    use rlfleet_replay::{FrameChains, SampledBatch, Transition};
    let gamma = 0.97f32;
    let od = floats(&rows[0].obs).len();
    let mut chains = FrameChains::new(capacity, od / k, k, 1, n as u32, f64::from(gamma));
    let mut plays: std::collections::BTreeMap<u64, Vec<usize>> = Default::default();
    let mut slot_of = vec![(0u64, 0usize); capacity];
    for (r, row) in rows.iter().enumerate() {
        let (obs, next) = (floats(&row.obs), floats(&row.next_obs));
        let action = [row.action.parse::<f32>().unwrap()];
        let steps = plays.entry(row.episode).or_default();
        let (slot, _) = chains.push(&Transition {
            obs: &obs,
            action: &action,
            reward: row.reward,
            next_obs: &next,
            terminated: row.terminated,
            episode: row.episode,
            step: 0,
            logp: None,
        });
        slot_of[slot] = (row.episode, steps.len());
        steps.push(r);
        let last = rows[r + 1..].iter().all(|x| x.episode != row.episode);
        if last && !row.terminated && finished.contains(&row.episode) {
            chains.end_episode(row.episode);
        }
    }
    // Each slot's expected window, or `None` while it is open.
    let want = |slot: usize| {
        let (e, t) = slot_of[slot];
        let steps = &plays[&e];
        let (mut ret, mut scale) = (0.0f32, 1.0f32);
        for i in t..t + n {
            let row = &rows[steps[i]];
            ret += scale * row.reward;
            scale *= gamma;
            let end = i + 1 == steps.len();
            if row.terminated {
                return Some((steps[t], steps[i], ret, 0.0));
            }
            if i + 1 == t + n || (end && finished.contains(&e)) {
                return Some((steps[t], steps[i], ret, scale));
            }
            if end {
                return None;
            }
        }
        unreachable!()
    };
    let len = chains.len();
    let complete: Vec<usize> = (0..len).filter(|&s| chains.is_complete(s)).collect();
    let expected: Vec<usize> = (0..len).filter(|&s| want(s).is_some()).collect();
    assert_eq!(complete, expected, "the sampleable slots");
    let mut b = SampledBatch {
        indices: complete.clone(),
        ..SampledBatch::default()
    };
    chains.gather_into(&mut b);
    let [_, _, _, o_rew, o_disc] = b.offsets();
    for (j, &slot) in complete.iter().enumerate() {
        let (first, last, ret, disc) = want(slot).unwrap();
        let what = format!(
            "slot {slot}: episode {} step {}",
            slot_of[slot].0, slot_of[slot].1
        );
        assert_eq!(
            b.obs_row(j, false),
            floats(&rows[first].obs),
            "{what}: stack"
        );
        assert_eq!(
            b.obs_row(j, true),
            floats(&rows[last].next_obs),
            "{what}: next stack"
        );
        assert_eq!(
            (b.data[o_rew + j], b.data[o_disc + j]),
            (ret, disc),
            "{what}: return"
        );
    }
    complete.len()
}

/// Real Atari frames (ale-py's Breakout behind Gymnasium's
/// `AtariPreprocessing`, 12 x 12 frames to keep the record small): under
/// `async` (the learner stacks the frames of each run at ingest) and
/// `seed` (its inference front stacks each request's frames), every
/// transition the learner trained on, replayed through Gymnasium itself
/// with `FrameStackObservation(stack_size=4)` from the same seed and
/// actions, has bit for bit the same stack, next stack, reward and end;
/// and the replay's frame chains, fed those transitions, sample every step
/// as they give it, with 1- and 3-step returns, across episode ends, in a
/// ring that wraps.
#[test]
fn atari_stacks_built_on_the_learner_equal_frame_stack_observation() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    for workflow in ["async", "seed"] {
        let out = dir.path().join(format!("atari-{workflow}"));
        let mut cfg = counting_probe("atari-stacks", workflow, TransportKind::Quic, 9, 6, &out);
        cfg.env = "gymnasium:ALE/Breakout-v5".into();
        cfg.env_wrappers = vec!["gymnasium.wrappers:AtariPreprocessing(screen_size=12)".into()];
        cfg.env_kwargs.insert("frameskip".into(), 1.into());
        cfg.env_kwargs
            .insert("max_num_frames_per_episode".into(), 400.into());
        cfg.frame_stack = 4;
        cfg.probe.epsilon = 0.5;
        cfg.distributed.batch_step_frequency = 7;
        cfg.validate().unwrap();
        let run = run_embedded(&cfg, dir.path(), &[]);
        assert!(run.success, "{workflow}: {}\n{}", run.stdout, run.stderr);
        let rows: Vec<ProbeLine> = read_csv(&out.join("probe.csv")).unwrap();
        let seeds: std::collections::BTreeMap<String, u64> = rows
            .iter()
            .map(|r| {
                let seed = rlfleet_run::workflows::episode_seed(cfg.seed, r.episode);
                (r.episode.to_string(), seed)
            })
            .collect();
        let seeds_path = dir.path().join(format!("{workflow}-seeds.json"));
        std::fs::write(&seeds_path, serde_json::to_string(&seeds).unwrap()).unwrap();
        let env_path = dir.path().join(format!("{workflow}-env.json"));
        let env = serde_json::json!({
            "id": "ALE/Breakout-v5",
            "kwargs": {"frameskip": 1, "max_num_frames_per_episode": 400},
            "screen_size": 12,
            "stack": 4,
        });
        std::fs::write(&env_path, env.to_string()).unwrap();
        let parity = rlfleet_tests::output_within(
            std::process::Command::new(rlfleet_tests::reference_python())
                .arg(rlfleet_tests::workspace_root().join("tests/python/frame_stack_parity.py"))
                .arg(out.join("probe.csv"))
                .arg(&seeds_path)
                .arg(&env_path),
            std::time::Duration::from_secs(300),
            "the FrameStackObservation replay",
        );
        let said = String::from_utf8_lossy(&parity.stdout);
        assert!(
            parity.status.success(),
            "{workflow}: {said}\n{}",
            String::from_utf8_lossy(&parity.stderr)
        );
        let report: serde_json::Value = serde_json::from_str(said.trim()).unwrap();
        assert_eq!(
            report["transitions"].as_u64(),
            Some(rows.len() as u64),
            "{report}"
        );
        assert!(report["episodes"].as_u64().unwrap() >= 6, "{report}");
        eprintln!("{workflow}: {report}");
        let finished: std::collections::BTreeSet<u64> =
            rlfleet_output::read_episodes(&out.join("episodes.csv"))
                .unwrap()
                .iter()
                .map(|e| e.episode)
                .collect();
        for (n, capacity) in [(1, 1_000), (3, 150)] {
            let sampled = sampled_replay_equals_the_rows(&rows, &finished, 4, n, capacity);
            eprintln!(
                "{workflow}: {sampled} steps sampled from a {capacity}-slot replay with {n}-step returns"
            );
            assert!(sampled > capacity.min(rows.len()) / 2, "{sampled}");
        }
    }
}

/// An actor killed mid-episode comes back as a new connection: its
/// episodes are played again from their start, and no stack the learner
/// builds — in the `seed` front or at `async` ingest — holds frames of two
/// plays.
#[test]
fn a_reconnect_mid_episode_never_splices_two_stacks() {
    let _heavy = heavy();
    for workflow in ["seed", "async"] {
        let d = rlfleet_tests::daemon::Daemon::start("", "");
        let out = d.dir.path().join(workflow);
        let mut cfg = counting_probe("splice", workflow, TransportKind::Quic, 7, 80, &out);
        cfg.frame_stack = K as u32;
        // Slow enough that the kill lands inside episodes.
        cfg.probe.train_sleep_ms = 3;
        let id = d.start_run(&cfg);
        let mut victim = d.actor("victim", 2, &[]);
        let steady = d.actor("steady", 2, &["--once"]);
        d.wait_until(&id, std::time::Duration::from_secs(60), |v| {
            v["episodes_finished"].as_u64().unwrap() >= 15
        });
        victim.kill().unwrap();
        victim.wait().unwrap();
        let back = d.actor("victim", 2, &["--once"]);
        let status = d.wait_finished(&id, std::time::Duration::from_secs(120));
        assert_eq!(status["state"], "finished", "{workflow}: {status}");
        assert!(
            status["episodes_reissued"].as_u64().unwrap() > 0,
            "{workflow}: the kill left an episode to play again: {status}"
        );
        for a in [steady, back] {
            let (ok, err) = rlfleet_tests::daemon::finish_actor(a);
            assert!(ok, "{workflow}: {err}");
        }
        let rows: Vec<ProbeLine> = read_csv(&out.join("probe.csv")).unwrap();
        let mut tags = std::collections::BTreeMap::new();
        for row in &rows {
            let (tag, _) = check_row(row, workflow);
            assert_eq!(*tags.entry(row.episode).or_insert(tag), tag, "{workflow}");
        }
        eprintln!("{workflow}: {} transitions, {status}", rows.len());
    }
}
