//! DQN on CartPole-sized data: the plain-Rust copy follows the tensor
//! network, the learning-rate schedule, and the dueling head.

use super::*;
use crate::agents::{Learn, Persist};
use rlfleet_shared::policy::QPolicy;

/// 32 CartPole-sized transitions of one episode.
fn feed(dqn: &mut Dqn) {
    for i in 0..32u32 {
        let o = [i as f32 * 0.01, 0.0, 0.1, -0.1];
        dqn.observe(&Transition {
            episode: 0,
            step: 0,
            obs: &o,
            action: &[(i % 2) as f32],
            reward: 1.0,
            next_obs: &o,
            terminated: i % 5 == 0,
            logp: None,
        });
    }
}

/// The plain-Rust copy acts exactly like the tensor network, and
/// follows the parameters through training and loads.
#[test]
fn cpu_copy_follows_the_online_network() {
    let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
    let cfg = DqnConfig {
        batch_size: 8,
        learning_starts: 0,
        ..DqnConfig::default()
    };
    let mut dqn = Dqn::new(&cfg, &spec, None, 3, Device::Cpu);
    let obs: Vec<f32> = (0..64 * 4)
        .map(|i| ((i * 37) % 19) as f32 * 0.1 - 0.9)
        .collect();
    let check = |dqn: &mut Dqn| {
        let want: Vec<f32> = Vec::try_from(dqn.q_values(&obs, 64).view([-1])).unwrap();
        let greedy = dqn.greedy(&obs, 64);
        let got = dqn.cpu_copy.as_mut().unwrap().forward(&obs, 64).to_vec();
        for (i, (a, b)) in want.iter().zip(&got).enumerate() {
            assert!((a - b).abs() < 1e-5, "q[{i}]: tensor {a}, copy {b}");
        }
        for (row, g) in greedy.iter().enumerate() {
            assert_eq!(*g, argmax(&want[row * 2..row * 2 + 2]), "row {row}");
        }
    };
    check(&mut dqn);
    feed(&mut dqn);
    let before = dqn.weights();
    for step in 0..20 {
        assert_eq!(dqn.train(step), 1);
    }
    assert_ne!(dqn.weights().data, before.data);
    check(&mut dqn);
    dqn.load_weights(&before).unwrap();
    check(&mut dqn);
}

/// The learning rate falls linearly to `lr_end` and stays there; the
/// optimizer trains with the scheduled rate.
#[test]
fn the_learning_rate_anneals_to_its_floor_and_holds() {
    let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
    let cfg = DqnConfig {
        lr: 1e-3,
        lr_anneal_steps: 1_000,
        lr_end: 1e-4,
        batch_size: 4,
        learning_starts: 0,
        ..DqnConfig::default()
    };
    let mut dqn = Dqn::new(&cfg, &spec, None, 1, Device::Cpu);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(close(dqn.learning_rate(0), 1e-3));
    assert!(close(dqn.learning_rate(500), 5.5e-4));
    assert!(close(dqn.learning_rate(1_000), 1e-4));
    assert!(close(dqn.learning_rate(50_000), 1e-4));
    for i in 0..8u32 {
        let o = [i as f32 * 0.01, 0.0, 0.0, 0.0];
        dqn.observe(&Transition {
            episode: 0,
            step: 0,
            obs: &o,
            action: &[(i % 2) as f32],
            reward: 1.0,
            next_obs: &o,
            terminated: false,
            logp: None,
        });
    }
    assert_eq!(dqn.train(250), 1);
    assert!(close(dqn.opt.lr(), 7.75e-4), "lr {}", dqn.opt.lr());
    let constant = Dqn::new(&DqnConfig::default(), &spec, None, 1, Device::Cpu);
    assert!(close(constant.learning_rate(1_000_000), 1e-3));
}

/// Epsilon holds at `eps_start` for `eps_decay_start` steps, then decays
/// linearly over `eps_decay_steps` and holds at `eps_end` (MinAtar's
/// schedule: 1 until the replay starts at 5,000, 0.1 at 105,000).
#[test]
fn epsilon_holds_until_its_decay_starts_then_decays_to_its_floor() {
    let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
    let cfg = DqnConfig {
        eps_start: 1.0,
        eps_end: 0.1,
        eps_decay_start: 5_000,
        eps_decay_steps: 100_000,
        ..DqnConfig::default()
    };
    let dqn = Dqn::new(&cfg, &spec, None, 1, Device::Cpu);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    for (step, want) in [
        (0, 1.0),
        (5_000, 1.0),
        (55_000, 0.55),
        (105_000, 0.1),
        (1_000_000, 0.1),
    ] {
        assert!(
            close(dqn.epsilon(step), want),
            "step {step}: {}",
            dqn.epsilon(step)
        );
    }
    let from_zero = Dqn::new(&DqnConfig::default(), &spec, None, 1, Device::Cpu);
    assert!(close(from_zero.epsilon(5_000), 1.0 - 0.5 * 0.95));
}

/// Under a dueling head, Q = V + A - mean(A) in the tensor network; the
/// learner's greedy actions, and an actor's `QPolicy` loaded with the
/// published weights, both pick argmax Q.
#[test]
fn dueling_q_values_and_actor_side_greedy_actions_agree() {
    let spec = rlfleet_shared::env::spec("Acrobot-v1").unwrap();
    let cfg = DqnConfig {
        dueling: true,
        n_step: 3,
        hidden: vec![16],
        ..DqnConfig::default()
    };
    let mut dqn = Dqn::new(&cfg, &spec, None, 5, Device::Cpu);
    let n = 200;
    let obs: Vec<f32> = (0..n * 6)
        .map(|i| ((i * 53) % 29) as f32 * 0.2 - 2.8)
        .collect();
    let q: Vec<f32> = Vec::try_from(dqn.q_values(&obs, n).view([-1])).unwrap();
    // By hand from the raw outputs.
    let raw = tch::no_grad(|| {
        dqn.net
            .forward(&dqn.params, &Tensor::from_slice(&obs).view([n as i64, 6]))
    });
    let raw: Vec<f32> = Vec::try_from(raw.view([-1])).unwrap();
    for (row, out) in raw.chunks(4).enumerate() {
        let mean_a = (out[1] + out[2] + out[3]) / 3.0;
        for a in 0..3 {
            let want = out[0] + out[1 + a] - mean_a;
            assert!((q[row * 3 + a] - want).abs() < 1e-5);
        }
    }
    let mut actor = QPolicy::new(6, &cfg.hidden, 3, 1).dueling(true);
    assert_eq!(actor.numel(), dqn.weights().data.len());
    actor.load(1, &dqn.weights().data).unwrap();
    actor.epsilon = 0.0;
    let mut picked = Vec::new();
    actor.act(&obs, n, &mut picked);
    let greedy = dqn.greedy(&obs, n);
    let mut distinct = std::collections::BTreeSet::new();
    let mut clear = 0;
    for row in 0..n {
        let row_q = &q[row * 3..row * 3 + 3];
        let best = argmax(row_q);
        // A near tie may fall either way between libtorch's sums and the
        // plain-Rust copy's (the weights come from libtorch's global
        // generator, which tests running beside this one also draw from).
        if (0..3).any(|a| a != best && row_q[best] - row_q[a] < 1e-5) {
            continue;
        }
        clear += 1;
        assert_eq!(greedy[row], best, "row {row}");
        assert_eq!(picked[row] as usize, best, "row {row}");
        distinct.insert(best);
    }
    assert!(clear >= n / 2, "{clear} rows of {n} without a near tie");
    assert!(
        distinct.len() > 1,
        "the inputs should not all pick one action"
    );
}

/// A network that reads a stack of byte frames trains from frame chains,
/// and the sampled observations reach the device as bytes: the batch is
/// uint8 `[2 * batch, obs_dim]`, and the network's output for it equals its
/// output for the same values as f32 bit for bit (the conversion and the
/// scaling happen in the network, on the device).
#[test]
fn stacked_byte_frames_reach_the_device_as_bytes() {
    use rlfleet_shared::env::{EnvSpec, ObsDtype, Space};
    use rlfleet_shared::nets::{ConvLayer, TorsoKind};
    let (k, h, w) = (4usize, 6usize, 5usize);
    let od = k * h * w;
    let spec = EnvSpec {
        id: "python:frames:Game".into(),
        observation_space: Space::uniform_box(od, 0.0, 255.0),
        obs_shape: vec![k, h, w],
        obs_dtype: ObsDtype::U8,
        action_space: Space::Discrete { n: 3 },
        max_episode_steps: None,
        reward_threshold: None,
    };
    let torso = ConvTorso {
        input: [k, h, w],
        channels_last: false,
        bytes: true,
        kind: TorsoKind::Plain,
        layers: vec![ConvLayer {
            out: 4,
            kernel: 3,
            stride: 1,
        }],
    };
    let cfg = DqnConfig {
        batch_size: 8,
        learning_starts: 0,
        n_step: 3,
        ..DqnConfig::default()
    };
    let mut dqn = Dqn::new(&cfg, &spec, Some(torso), 3, Device::Cpu);
    // Frames of one episode: frame t is all (7 * t) % 256.
    let frame = |t: usize| vec![((7 * t) % 256) as f32; h * w];
    let stack = |t: usize| -> Vec<f32> {
        (0..k)
            .flat_map(|j| frame((t + j).saturating_sub(k - 1)))
            .collect()
    };
    for t in 0..40 {
        dqn.observe(&Transition {
            episode: 1,
            step: 0,
            obs: &stack(t),
            action: &[(t % 3) as f32],
            reward: 1.0,
            next_obs: &stack(t + 1),
            terminated: t == 39,
            logp: None,
        });
    }
    assert_eq!(dqn.train(0), 1);
    let batch = &dqn.replay.batch;
    assert!(batch.bytes && batch.data.len() == 8 * (1 + 2));
    let (both, _) = crate::agents::batch_on_device(batch, Device::Cpu);
    assert_eq!(both.kind(), Kind::Uint8);
    assert_eq!(both.size(), [16, od as i64]);
    let as_bytes = dqn.q(&dqn.params, &both);
    let as_values = dqn.q(&dqn.params, &both.to_kind(Kind::Float));
    assert!(as_bytes.equal(&as_values));
    // Each sampled stack is one of the episode's.
    for r in 0..8 {
        let obs = batch.obs_row(r, false);
        let t = (0..40).find(|&t| stack(t) == obs);
        assert!(t.is_some(), "row {r} is no stack of the episode");
    }
}

/// `optimizer = "rmsprop"`: DQN trains with centred RMSprop, whose state
/// is in the checkpoint under its own names; an Adam checkpoint does not
/// load into it (named, and nothing changes).
#[test]
fn rmsprop_trains_and_its_state_round_trips() {
    let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
    let cfg = |optimizer| DqnConfig {
        batch_size: 8,
        learning_starts: 0,
        optimizer,
        ..DqnConfig::default()
    };
    let rms = cfg(rlfleet_shared::config::OptimizerKind::Rmsprop);
    let mut dqn = Dqn::new(&rms, &spec, None, 3, Device::Cpu);
    feed(&mut dqn);
    let before = dqn.weights();
    for step in 0..10 {
        assert_eq!(dqn.train(step), 1);
    }
    assert_ne!(dqn.weights().data, before.data);
    let saved = dqn.state();
    let names: Vec<&str> = saved.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "online",
            "target",
            "rmsprop.square_avg",
            "rmsprop.grad_avg",
            "reward.max_abs"
        ]
    );
    assert_eq!(saved.optimizer_steps, 10);
    let mut other = Dqn::new(&rms, &spec, None, 9, Device::Cpu);
    other.load_state(&saved).unwrap();
    assert_eq!(other.state(), saved);
    let adam = Dqn::new(
        &cfg(rlfleet_shared::config::OptimizerKind::Adam),
        &spec,
        None,
        4,
        Device::Cpu,
    );
    let err = other.load_state(&adam.state()).unwrap_err();
    assert!(err.to_string().contains("rmsprop.square_avg"), "{err}");
    assert_eq!(other.state(), saved, "a refused state changes nothing");
}

/// The hand-written gradient trains as autograd's does: two learners from
/// the same seed on the same transitions, one through each, hold the same
/// weights after 30 steps — for byte frames behind a convolution with
/// prioritized replay, a dueling head and centred RMSprop, and for
/// MinAtar-style bool planes, channels last, with double Q and Adam.
#[test]
fn hand_written_gradients_train_as_autograd_does() {
    use rlfleet_shared::config::OptimizerKind;
    use rlfleet_shared::env::{EnvSpec, ObsDtype, Space};
    use rlfleet_shared::nets::{ConvLayer, TorsoKind};
    let spec = |dtype| EnvSpec {
        id: "python:frames:Game".into(),
        observation_space: Space::uniform_box(4 * 6 * 5, 0.0, 255.0),
        obs_shape: vec![4, 6, 5],
        obs_dtype: dtype,
        action_space: Space::Discrete { n: 3 },
        max_episode_steps: None,
        reward_threshold: None,
    };
    let torso = |channels_last, bytes| ConvTorso {
        input: if channels_last { [5, 4, 6] } else { [4, 6, 5] },
        channels_last,
        bytes,
        kind: TorsoKind::Plain,
        layers: vec![ConvLayer {
            out: 4,
            kernel: 3,
            stride: 1,
        }],
    };
    let base = DqnConfig {
        batch_size: 8,
        learning_starts: 0,
        hidden: vec![16],
        ..DqnConfig::default()
    };
    let cases = [
        (
            DqnConfig {
                prioritized: true,
                dueling: true,
                optimizer: OptimizerKind::Rmsprop,
                ..base.clone()
            },
            spec(ObsDtype::U8),
            torso(false, true),
        ),
        (
            DqnConfig {
                double: true,
                ..base.clone()
            },
            spec(ObsDtype::Bool),
            torso(true, false),
        ),
    ];
    for (cfg, spec, torso) in cases {
        let mut manual = Dqn::new(&cfg, &spec, Some(torso.clone()), 3, Device::Cpu);
        let mut autograd = Dqn::new(&cfg, &spec, Some(torso), 3, Device::Cpu);
        autograd.use_autograd();
        // The same start whatever other tests do meanwhile with libtorch's
        // global generator.
        autograd.load_state(&manual.state()).unwrap();
        assert!(manual.manual_backward() && !autograd.manual_backward());
        let value = |i: usize| match spec.obs_dtype {
            ObsDtype::U8 => ((i * 37) % 256) as f32,
            _ => f32::from(u8::from((i * 7).is_multiple_of(5))),
        };
        for t in 0..60 {
            let obs: Vec<f32> = (0..120).map(|i| value(i + t)).collect();
            let next: Vec<f32> = (0..120).map(|i| value(i + t + 1)).collect();
            for dqn in [&mut manual, &mut autograd] {
                dqn.observe(&Transition {
                    episode: 0,
                    step: 0,
                    obs: &obs,
                    action: &[(t % 3) as f32],
                    reward: (t % 4) as f32 - 1.0,
                    next_obs: &next,
                    terminated: t % 17 == 16,
                    logp: None,
                });
            }
        }
        let start = manual.weights().data;
        for step in 0..30 {
            assert_eq!(manual.train(step), 1);
            assert_eq!(autograd.train(step), 1);
        }
        let (a, b) = (manual.weights().data, autograd.weights().data);
        let moved = a.iter().zip(&start).map(|(x, y)| (x - y).abs());
        let apart = a.iter().zip(&b).map(|(x, y)| (x - y).abs());
        let (moved, apart) = (moved.fold(0f32, f32::max), apart.fold(0f32, f32::max));
        assert!(moved > 1e-3, "training moved the weights by {moved}");
        assert!(apart < 1e-4 * moved, "{apart} apart after moving {moved}");
        let (la, lb) = (manual.last_loss().unwrap(), autograd.last_loss().unwrap());
        assert!(
            (la - lb).abs() <= 1e-4 * lb.abs().max(1e-3),
            "loss {la} vs {lb}"
        );
    }
}

/// Batches of 8 from the first step, with `bound_targets` as given.
fn bounded(bound_targets: bool) -> DqnConfig {
    DqnConfig {
        batch_size: 8,
        learning_starts: 0,
        bound_targets,
        ..DqnConfig::default()
    }
}

/// A CartPole DQN fed transitions whose target network gives values far
/// past what CartPole's rewards allow (every weight 1: Q about 4,000).
fn far_past_the_bound(cfg: &DqnConfig, by_autograd: bool) -> Dqn {
    let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
    let mut dqn = Dqn::new(cfg, &spec, None, 3, Device::Cpu);
    if by_autograd {
        dqn.use_autograd();
    }
    feed(&mut dqn);
    tch::no_grad(|| {
        let _ = dqn.target.fill_(1.0);
    });
    dqn
}

/// The largest |reward| seen travels with the state: an agent resumed from
/// it, before it observes anything, bounds its first targets as the one
/// it was saved from (the same first loss, bit for bit). A state from
/// before it was kept loads with none.
#[test]
fn a_resumed_agent_keeps_its_reward_bound() {
    let spec = rlfleet_shared::env::spec("CartPole-v1").unwrap();
    let cfg = bounded(true);
    let mut dqn = far_past_the_bound(&cfg, false);
    let saved = dqn.state();
    assert_eq!(saved.tensor("reward.max_abs").unwrap().data, vec![1.0]);
    let mut resumed = Dqn::new(&cfg, &spec, None, 3, Device::Cpu);
    resumed.load_state(&saved).unwrap();
    resumed
        .restore_replay(&dqn.replay_image().unwrap())
        .unwrap();
    assert_eq!(resumed.state(), saved);
    assert_eq!(dqn.train(0), 1);
    assert_eq!(resumed.train(0), 1);
    assert_eq!(
        resumed.last_loss().unwrap().to_bits(),
        dqn.last_loss().unwrap().to_bits()
    );
    let mut old = saved.clone();
    old.tensors.retain(|t| t.name != "reward.max_abs");
    resumed.load_state(&old).unwrap();
    assert!(resumed.state().tensor("reward.max_abs").unwrap().data == vec![0.0]);
}

/// Under `bound_targets`, a target network whose values run far past what
/// CartPole's rewards allow (every weight 1: Q about 4,000 where no return
/// passes 100 at γ 0.99) gives targets of at most 1 + 0.99 · 100: the first
/// step's loss, by hand and by autograd, stays near 100, where without the
/// bound it is in the thousands.
#[test]
fn bounded_targets_hold_the_bootstrap_to_the_return_bound() {
    for bound in [false, true] {
        for by_autograd in [false, true] {
            let mut dqn = far_past_the_bound(&bounded(bound), by_autograd);
            assert_eq!(dqn.train(0), 1);
            let loss = dqn.last_loss().unwrap();
            let case = format!("bound {bound}, autograd {by_autograd}: loss {loss}");
            if bound {
                assert!(loss > 10.0 && loss < 105.0, "{case}");
            } else {
                assert!(loss > 1_000.0, "{case}");
            }
        }
    }
}
