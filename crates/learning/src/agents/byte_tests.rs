//! Bytes stay bytes on the learner's host: every agent that keeps
//! experience takes a uint8 env's observations as bytes (rows replay
//! through n-step windows, on-policy trajectories, the off-policy ring),
//! uploads them as bytes, and keeps and learns exactly what it keeps and
//! learns from the same values as `f32`.

use super::{A2c, Agent, Dqn, Ppo, Sac};
use rlfleet_replay::{Blob, BlobType, Transition};
use rlfleet_shared::config::{A2cConfig, DqnConfig, PpoConfig, SacConfig};
use rlfleet_shared::env::{EnvSpec, ObsDtype, Space};
use tch::Device;

const OD: usize = 6;

/// A flat observation of `OD` values 0..=255, as bytes or as values.
fn spec(dtype: ObsDtype, action_space: Space) -> EnvSpec {
    EnvSpec {
        id: "python:bytes:Game".into(),
        observation_space: Space::uniform_box(OD, 0.0, 255.0),
        obs_shape: vec![OD],
        obs_dtype: dtype,
        action_space,
        max_episode_steps: None,
        reward_threshold: None,
    }
}

/// Step `t` of episode `e`: its observation bytes and the next ones.
fn frames(e: u64, t: usize) -> (Vec<u8>, Vec<u8>) {
    let frame = |t: usize| -> Vec<u8> {
        (0..OD)
            .map(|d| ((31 * t + 7 * d + 13 * e as usize) % 256) as u8)
            .collect()
    };
    (frame(t), frame(t + 1))
}

/// A checkpoint array's values (bytes widened).
fn values_of(b: &Blob) -> Vec<f32> {
    match b.dtype {
        BlobType::U8 => b.bytes.iter().map(|&x| f32::from(x)).collect(),
        BlobType::F32 => b
            .bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        BlobType::F64 => panic!("no f64 observations"),
    }
}

/// Feeds two agents that start from the same weights the same three
/// episodes (lengths 9, 14 and 5; the last left open) — one the bytes, the
/// other the same values as `f32` — and trains both. Their replays hold
/// the same values (the bytes as bytes) and, when `deterministic` (no draw
/// from libtorch's global generator, which tests running beside this one
/// share), their weights are equal bit for bit.
fn same_learning(
    mut bytes: Box<dyn Agent>,
    mut values: Box<dyn Agent>,
    action: impl Fn(usize) -> Vec<f32>,
    deterministic: bool,
) {
    values.load_state(&bytes.state()).unwrap();
    let mut env_steps = 0;
    let mut trained = 0;
    for (e, len) in [(1u64, 9usize), (2, 14), (3, 5)] {
        for t in 0..len {
            let (obs, next) = frames(e, t);
            let a = action(t);
            let step = Transition {
                obs: &obs[..],
                action: &a,
                reward: (t % 3) as f32 - 0.5,
                next_obs: &next[..],
                terminated: e == 1 && t + 1 == len,
                episode: e,
                step: 0,
                logp: None,
            };
            bytes.observe_bytes(&step);
            let (o, n): (Vec<f32>, Vec<f32>) = (
                obs.iter().map(|&x| f32::from(x)).collect(),
                next.iter().map(|&x| f32::from(x)).collect(),
            );
            values.observe(&step.with_obs(&o, &n));
            env_steps += 1;
            let (a, b) = (bytes.train(env_steps), values.train(env_steps));
            assert_eq!(a, b, "step {env_steps}");
            trained += a;
        }
        if e < 3 {
            bytes.end_episode(e);
            values.end_episode(e);
        }
    }
    assert!(trained > 0, "neither agent trained");
    assert_eq!(bytes.replay_len(), values.replay_len());
    // A replay (or rollout) keeps the bytes as bytes: a quarter of the
    // observations' memory.
    assert!(values.replay_bytes() > 0);
    assert!(
        bytes.replay_bytes() < values.replay_bytes(),
        "{} bytes for bytes, {} for values",
        bytes.replay_bytes(),
        values.replay_bytes()
    );
    if let (Some(a), Some(b)) = (bytes.replay_image(), values.replay_image()) {
        assert_eq!(a.counters, b.counters);
        let obs = &a.blobs["obs"];
        assert_eq!(
            (obs.dtype, b.blobs["obs"].dtype),
            (BlobType::U8, BlobType::F32)
        );
        for (name, blob) in &a.blobs {
            let other = &b.blobs[name];
            if blob.dtype == other.dtype {
                assert_eq!(blob.bytes, other.bytes, "{name}");
            } else {
                assert_eq!(values_of(blob), values_of(other), "{name}");
            }
        }
    }
    if deterministic {
        let bits = |w: Vec<f32>| w.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(bits(bytes.weights().data), bits(values.weights().data));
    }
}

fn discrete(dtype: ObsDtype) -> EnvSpec {
    spec(dtype, Space::Discrete { n: 3 })
}

/// [`same_learning`] for an agent over three discrete actions, built by
/// `agent` for a spec of each dtype.
fn same_discrete_learning(agent: impl Fn(&EnvSpec) -> Box<dyn Agent>) {
    same_learning(
        agent(&discrete(ObsDtype::U8)),
        agent(&discrete(ObsDtype::F32)),
        |t| vec![(t % 3) as f32],
        true,
    );
}

/// DQN without a torso keeps rows: its 3-step windows and ring hold bytes.
#[test]
fn dqn_rows_of_bytes_learn_as_values_do() {
    let cfg = DqnConfig {
        hidden: vec![16],
        batch_size: 4,
        learning_starts: 8,
        n_step: 3,
        prioritized: true,
        ..DqnConfig::default()
    };
    same_discrete_learning(|spec| Box::new(Dqn::new(&cfg, spec, None, 5, Device::Cpu)));
}

#[test]
fn ppo_trajectories_of_bytes_learn_as_values_do() {
    let cfg = PpoConfig {
        hidden: vec![16],
        n_steps: 12,
        batch_size: 4,
        n_epochs: 2,
        ..PpoConfig::default()
    };
    same_discrete_learning(|spec| Box::new(Ppo::new(&cfg, spec, None, 5, Device::Cpu)));
}

#[test]
fn a2c_trajectories_of_bytes_learn_as_values_do() {
    let cfg = A2cConfig {
        hidden: vec![16],
        ..A2cConfig::default()
    };
    same_discrete_learning(|spec| Box::new(A2c::new(&cfg, spec, None, 5, Device::Cpu)));
}

#[test]
fn sac_rows_of_bytes_learn_as_values_do() {
    let cfg = SacConfig {
        hidden: vec![16],
        batch_size: 4,
        learning_starts: 8,
        ..SacConfig::default()
    };
    let box1 = Space::Box {
        low: vec![-2.0],
        high: vec![2.0],
    };
    let agent = |dtype| Sac::new(&cfg, &spec(dtype, box1.clone()), 5, Device::Cpu);
    same_learning(
        Box::new(agent(ObsDtype::U8)),
        Box::new(agent(ObsDtype::F32)),
        |t| vec![(t % 5) as f32 - 2.0],
        false,
    );
}
