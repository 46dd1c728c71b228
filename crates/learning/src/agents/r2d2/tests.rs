//! R2D2's sequences, targets and rescaling, checked by hand and against
//! the plain-Rust network stepped through whole episodes.

use super::batch::{Layout, rescale, unrescale};
use super::cutter::{Cutter, Step};
use super::*;
use crate::agents::{Learn, Persist};
use rlfleet_replay::{ObsStore, SeqObs, Sequence};
use rlfleet_shared::config::R2d2Config;
use rlfleet_shared::env::Space;

/// MemoryCorridor's spec.
fn corridor() -> EnvSpec {
    rlfleet_shared::env::spec("MemoryCorridor-v0").unwrap()
}

/// A small agent's settings (unroll 4, burn-in 2) that trains from the
/// first step on, one gradient step per env step.
fn small(batch_size: u32, buffer_size: u32) -> R2d2Config {
    R2d2Config {
        hidden: vec![8],
        unroll_length: 4,
        burn_in: 2,
        batch_size,
        buffer_size,
        learning_starts: 0,
        train_freq: 1,
        ..R2d2Config::default()
    }
}

/// A store's values.
fn values(s: &ObsStore) -> Vec<f32> {
    s.rows(0, s.len()).values().to_vec()
}

/// What the cutter sent, owned.
#[derive(Debug, Clone, PartialEq)]
struct Sent {
    obs: Vec<f32>,
    actions: Vec<f32>,
    state: Vec<f32>,
    burn: u32,
    terminated: bool,
}

fn keep(into: &mut Vec<Sent>) -> impl FnOnce(&Sequence<'_>) + '_ {
    |s| {
        into.push(Sent {
            obs: match s.obs {
                SeqObs::Rows(rows) => rows.values().to_vec(),
                SeqObs::Frames(_) => panic!("the cutter sends rows"),
            },
            actions: s.actions.to_vec(),
            state: s.state.to_vec(),
            burn: s.burn,
            terminated: s.terminated,
        })
    }
}

/// Three interleaved episodes (23, 4 and 3 steps) cut with an unroll of 5 and
/// a burn-in of 3: every step trains in exactly one sequence, each
/// sequence starts from the state its episode had there (here the running
/// sum of its observations), overlaps the one before by burn-in + 1
/// observations, and ends in the observation after its last step; an
/// abandoned episode sends nothing.
#[test]
fn episodes_are_cut_into_overlapping_sequences_with_their_start_states() {
    let mut c = Cutter::new(5, 3, 1, 1);
    let mut sent: [Vec<Sent>; 3] = Default::default();
    let lens = [23usize, 4, 3];
    for t in 0..23 {
        for (e, &len) in lens.iter().enumerate() {
            if t >= len {
                continue;
            }
            let (obs, next) = ([(100 * e + t) as f32], [(100 * e + t + 1) as f32]);
            let step = Step {
                episode: e as u64,
                obs: Rows::Values(&obs),
                action: t as f32,
                reward: 0.0,
                next_obs: Rows::Values(&next),
                terminated: e == 0 && t == len - 1,
            };
            c.push(&step, |o, s| s[0] += o.values()[0], keep(&mut sent[e]));
        }
    }
    c.abandon(2);
    c.end(0, keep(&mut sent[0]));
    c.end(1, keep(&mut sent[1]));
    c.end(2, keep(&mut sent[2]));
    assert_eq!(c.open(), 0);
    assert!(sent[2].is_empty());
    // Episode 0: starts 0, 2, 7, 12, 17; the last sequence is its tail.
    let starts: Vec<(usize, u32)> = sent[0]
        .iter()
        .map(|s| (s.actions[0] as usize, s.burn))
        .collect();
    assert_eq!(starts, [(0, 0), (2, 3), (7, 3), (12, 3), (17, 3)]);
    let mut trained = Vec::new();
    for s in &sent[0] {
        let first = s.actions[0] as usize;
        let sum: usize = (0..first).sum();
        assert_eq!(s.state, [sum as f32]);
        assert_eq!(s.obs.len(), s.actions.len() + 1);
        assert_eq!(*s.obs.last().unwrap() as usize, first + s.actions.len());
        trained.extend(s.actions[s.burn as usize..].iter().map(|&a| a as usize));
    }
    assert_eq!(trained, (0..23).collect::<Vec<_>>());
    let terminated: Vec<bool> = sent[0].iter().map(|s| s.terminated).collect();
    assert_eq!(terminated, [false, false, false, false, true]);
    assert_eq!(sent[1].len(), 1);
    assert_eq!((sent[1][0].actions.len(), sent[1][0].burn), (4, 0));
    assert!(
        !sent[1][0].terminated,
        "ended by the caller, not terminated"
    );
}

/// n-step sums, bootstrap rows and discounts of two sequences, by hand:
/// one truncated (its targets bootstrap from its last observation), one
/// terminated (no bootstrap past its end), with a burn-in laid out to the
/// right of its block.
#[test]
fn targets_sum_n_rewards_and_bootstrap_where_the_sequence_allows() {
    let obs: Vec<f32> = (1..7).map(|i| i as f32).collect();
    let a = Sequence {
        obs: SeqObs::Rows(Rows::Values(&obs[..4])),
        actions: &[0.0, 1.0, 0.0],
        rewards: &[1.0, 2.0, 3.0],
        state: &[0.5],
        burn: 1,
        terminated: false,
        episode: 1,
        first: 0,
    };
    let b = Sequence {
        obs: SeqObs::Rows(Rows::Values(&obs[..4])),
        actions: &[1.0, 1.0, 1.0],
        rewards: &[1.0, 1.0, 1.0],
        state: &[0.25],
        burn: 0,
        terminated: true,
        episode: 2,
        first: 0,
    };
    let g = 0.5;
    let l = Layout::new(&[a, b], 1, (2, 3), 2, g);
    // Burn block [2, 2]: a's one burn step right-aligned, b has none.
    assert_eq!(values(&l.x_burn), [0.0, 0.0, 1.0, 0.0]);
    // Main block [4, 2]: a's observations 1..=3, b's 0..=3 (then padding).
    assert_eq!(values(&l.x_main), [2.0, 1.0, 3.0, 2.0, 4.0, 3.0, 0.0, 4.0]);
    assert_eq!(l.states, [0.5, 0.25]);
    // a trains on 2 steps: t0 = r1 + g r2, boot at t2 with g²; t1 = r2,
    // boot at t2 with g (truncated by the sequence). b trains on 3; its
    // last targets stop at the termination.
    assert_eq!(l.mask, [1.0, 1.0, 1.0, 1.0, 0.0, 1.0]);
    assert_eq!(l.actions[..4], [1, 1, 0, 1]);
    assert_eq!(l.returns[..4], [2.0 + g as f32 * 3.0, 1.5, 3.0, 1.5]);
    assert_eq!(l.returns[5], 1.0);
    assert_eq!(l.boot_rows[..4], [4, 5, 4, 7]);
    assert_eq!(l.boot_rows[5], 7);
    assert_eq!(l.boot_disc[..4], [0.25, 0.25, 0.5, 0.0]);
    assert_eq!(l.boot_disc[5], 0.0);
}

/// h⁻¹ undoes h over six orders of magnitude, both signs, with and
/// without the linear term; h itself matches the formula.
#[test]
fn value_rescaling_inverts() {
    let xs: Vec<f32> = [-3e4, -250.0, -1.0, -1e-3, 0.0, 2e-3, 0.7, 21.0, 4e5]
        .into_iter()
        .collect();
    let x = Tensor::from_slice(&xs);
    for eps in [1e-3, 0.0] {
        let back: Vec<f32> = Vec::try_from(unrescale(&rescale(&x, eps), eps)).unwrap();
        for (a, b) in xs.iter().zip(&back) {
            assert!(
                (a - b).abs() <= 1e-4 * a.abs().max(1.0),
                "{eps}: {a} -> {b}"
            );
        }
    }
    let h: Vec<f32> = Vec::try_from(rescale(&x, 1e-3)).unwrap();
    let want = |v: f64| v.signum() * ((v.abs() + 1.0).sqrt() - 1.0) + 1e-3 * v;
    for (v, got) in xs.iter().zip(&h) {
        assert!((f64::from(*got) - want(f64::from(*v))).abs() < 1e-3, "{v}");
    }
}

/// An agent fed one 23-step episode stores sequences whose burn-in,
/// from the stored state, puts the online network exactly where stepping
/// the whole episode from zeros in plain Rust puts it: every training
/// step's Q-values agree.
#[test]
fn burned_in_sequences_see_what_the_whole_episode_sees() {
    let cfg = R2d2Config {
        hidden: vec![6],
        unroll_length: 5,
        burn_in: 3,
        buffer_size: 16,
        ..R2d2Config::default()
    };
    let spec = EnvSpec {
        action_space: Space::Discrete { n: 3 },
        ..corridor()
    };
    let core = Core { size: 4, layers: 1 };
    let mut agent = R2d2::new(&cfg, &spec, None, core, 7, Device::Cpu);
    let obs = |t: usize| {
        [
            (t % 3) as f32,
            (t as f32 * 0.37).sin(),
            1.0 / (1 + t) as f32,
        ]
    };
    for t in 0..23 {
        agent.observe(&Transition {
            episode: 4,
            step: 0,
            obs: &obs(t),
            action: &[(t % 3) as f32],
            reward: 0.0,
            next_obs: &obs(t + 1),
            terminated: t == 22,
            logp: None,
        });
    }
    agent.end_episode(4);
    assert_eq!(agent.replay.len(), 5);
    let mut copy = NetCopy::new(agent.net.shape().clone());
    copy.load(&agent.net.shared_values(&agent.params)).unwrap();
    let mut state = vec![0.0; core.state_len()];
    let mut want = Vec::new();
    for t in 0..23 {
        want.push(
            copy.forward_state(Rows::Values(&obs(t)), 1, &mut state)
                .to_vec(),
        );
    }
    let seqs: Vec<_> = (0..5).map(|i| agent.replay.get(i)).collect();
    let l = Layout::new(&seqs, 3, (3, 5), 5, 0.99);
    let t = |v: &[f32], s: &[i64]| Tensor::from_slice(v).view(s);
    let states = t(&l.states, &[5, -1]);
    let net = &agent.net;
    let burns: Vec<u32> = seqs.iter().map(|s| s.burn).collect();
    assert_eq!(burns, [0, 3, 3, 3, 3]);
    let (burned, burned_target) = agent.burn_in(&burns, &l.x_burn, &states);
    assert!(
        burned.equal(&burned_target),
        "a fresh target is the online net"
    );
    let q = net
        .forward_seq_all(&agent.params, &t(&values(&l.x_main), &[30, 3]), &burned, 6)
        .0;
    let q: Vec<f32> = Vec::try_from(q.view([-1])).unwrap();
    let mut checked = 0;
    for (j, s) in seqs.iter().enumerate() {
        let first = j * 5;
        for step in 0..s.steps() - s.burn as usize {
            let row = step * 5 + j;
            for (a, w) in q[row * 3..row * 3 + 3].iter().zip(&want[first + step]) {
                assert!((a - w).abs() < 1e-5, "sequence {j} step {step}: {a} vs {w}");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 23);
}

/// Actors get the ladder's rungs by the order they joined: 0.4 for the
/// first, 0.4⁸ for the last of 8, and round again.
#[test]
fn the_exploration_ladder_spans_the_fleet() {
    let cfg = R2d2Config {
        eps_ladder: 8,
        ..R2d2Config::default()
    };
    let e: Vec<f64> = (0..9).map(|i| cfg.ladder_epsilon(i)).collect();
    assert!((e[0] - 0.4).abs() < 1e-12);
    assert!((e[7] - 0.4f64.powi(8)).abs() < 1e-12);
    assert!((e[1] - 0.4f64.powf(2.0)).abs() < 1e-12);
    assert_eq!(e[8], e[0]);
    assert!(e.windows(2).take(7).all(|w| w[1] < w[0]));
}

/// A checkpoint's replay holds the sequences and the priorities the
/// gradient steps gave them: restored into a new agent, both come back as
/// they were; an image of a replay of another shape is refused.
#[test]
fn sequences_and_priorities_survive_a_checkpoint() {
    let cfg = small(4, 32);
    let spec = corridor();
    let core = Core { size: 4, layers: 1 };
    let mut a = R2d2::new(&cfg, &spec, None, core, 3, Device::Cpu);
    let mut env_steps = 0;
    for episode in 0..6u64 {
        for t in 0..9 {
            let x = [(episode % 2) as f32, 0.0, f32::from(u8::from(t == 8))];
            a.observe(&Transition {
                episode,
                step: 0,
                obs: &x,
                action: &[(t % 2) as f32],
                reward: if t == 8 { 1.0 } else { 0.0 },
                next_obs: &x,
                terminated: t == 8,
                logp: None,
            });
            env_steps += 1;
            a.train(env_steps);
        }
        a.end_episode(episode);
    }
    assert_eq!(a.replay_len(), 18);
    assert!(a.train_steps() > 20);
    let img = a.replay_image().unwrap();
    let priorities = img.f64s("priorities", 18).unwrap();
    assert!(
        priorities.iter().any(|&p| p != priorities[0]),
        "the gradient steps set priorities: {priorities:?}"
    );
    let mut b = R2d2::new(&cfg, &spec, None, core, 4, Device::Cpu);
    b.restore_replay(&img).unwrap();
    assert_eq!(b.replay_image().unwrap(), img);
    let longer = R2d2Config {
        unroll_length: 5,
        ..cfg.clone()
    };
    let mut c = R2d2::new(&longer, &spec, None, core, 4, Device::Cpu);
    let e = c.restore_replay(&img).unwrap_err().to_string();
    assert!(e.contains("max_steps"), "{e}");
    assert_eq!(c.replay_len(), 0);
}

/// A uint8 env's steps stay bytes: in the open episodes, in the stored
/// sequences (a quarter of the memory) and up to the network, where a
/// gradient step on them gives what the same steps as values give.
#[test]
fn a_byte_envs_sequences_stay_bytes_and_train_as_values_do() {
    let cfg = small(2, 8);
    let spec = corridor();
    let byte_spec = EnvSpec {
        obs_dtype: rlfleet_shared::env::ObsDtype::U8,
        ..spec.clone()
    };
    let core = Core { size: 4, layers: 1 };
    let mut by_bytes = R2d2::new(&cfg, &byte_spec, None, core, 9, Device::Cpu);
    let mut by_values = R2d2::new(&cfg, &spec, None, core, 9, Device::Cpu);
    by_values.load_state(&by_bytes.state()).unwrap();
    let row = |t: usize| [(t * 37 % 256) as u8, (t * 11 % 256) as u8, 255];
    for t in 0..9usize {
        let (o, n) = (row(t), row(t + 1));
        let (ov, nv) = (o.map(f32::from), n.map(f32::from));
        let (action, reward, terminated) = (&[(t % 2) as f32][..], t as f32, t == 8);
        by_bytes.observe_bytes(&Transition {
            episode: 1,
            step: 0,
            obs: &o,
            action,
            reward,
            next_obs: &n,
            terminated,
            logp: None,
        });
        by_values.observe(&Transition {
            episode: 1,
            step: 0,
            obs: &ov,
            action,
            reward,
            next_obs: &nv,
            terminated,
            logp: None,
        });
    }
    by_bytes.end_episode(1);
    by_values.end_episode(1);
    assert_eq!(by_bytes.replay_len(), 3);
    let (a, b) = (by_bytes.replay.get(1), by_values.replay.get(1));
    assert!(a.obs.is_bytes() && !b.obs.is_bytes());
    let od = by_bytes.obs_dim;
    assert_eq!(
        a.obs.values(a.steps() + 1, od),
        b.obs.values(b.steps() + 1, od)
    );
    assert!(by_bytes.replay_bytes() < by_values.replay_bytes());
    // The same priorities sample the same sequences from the same seed.
    by_bytes.sample_step();
    by_values.sample_step();
    let (a, b) = (
        by_bytes.last_loss().unwrap(),
        by_values.last_loss().unwrap(),
    );
    assert!((a - b).abs() < 1e-6 * a.abs().max(1.0), "{a} vs {b}");
}

/// A checkpoint written before the learner kept the core's weights first
/// (`fixtures/README.md`) loads: the learner's own sequence pass computes
/// what the plain-Rust copy computes from the saved weights, and the state
/// goes back out in the shared layout bit for bit.
#[test]
fn a_checkpoint_of_the_earlier_layout_loads() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/r2d2-lstm-8.safetensors");
    let ck = rlfleet_checkpoint::Checkpoint::load(&path).unwrap();
    let core = Core { size: 8, layers: 1 };
    let mut agent = R2d2::new(&small(4, 16), &corridor(), None, core, 9, Device::Cpu);
    assert!(!agent.net.in_shared_order());
    agent.load_state(&ck.agent_state).unwrap();
    assert_eq!(agent.state().first_difference(&ck.agent_state), None);
    let online = &ck.agent_state.tensor("online").unwrap().data;
    assert_eq!(agent.weights().data, *online);
    let obs_dim = corridor().obs_dim();
    let steps = 6;
    let x: Vec<f32> = (0..steps * obs_dim)
        .map(|i| ((i * 7) % 5) as f32 / 4.0)
        .collect();
    let zeros = Tensor::zeros(
        [1, core.state_len() as i64],
        (tch::Kind::Float, Device::Cpu),
    );
    let (out, _) = agent.net.forward_seq_all(
        &agent.params,
        &Tensor::from_slice(&x).view([steps as i64, obs_dim as i64]),
        &zeros,
        steps as i64,
    );
    let out: Vec<f32> = Vec::try_from(out.view([-1])).unwrap();
    let mut copy = NetCopy::new(agent.net.shape().clone());
    copy.load(online).unwrap();
    let mut state = vec![0.0; core.state_len()];
    let n_out = out.len() / steps;
    for t in 0..steps {
        let y = copy.forward_state(
            Rows::Values(&x[t * obs_dim..(t + 1) * obs_dim]),
            1,
            &mut state,
        );
        for (a, b) in y.iter().zip(&out[t * n_out..(t + 1) * n_out]) {
            assert!((a - b).abs() < 1e-5, "step {t}: copy {a}, learner {b}");
        }
    }
}
