//! The rlfleet actor: runs environments and feeds a learner. It depends on
//! `rlfleet-shared` only, never on libtorch.
//!
//! Layout:
//! - [`remote`]: the learner protocol over any link (QUIC with reconnect,
//!   in-process channels): the experience workflows' loop with its
//!   in-flight window, and the `seed` loop.
//! - [`ort_net`]: the ONNX Runtime backend of the actor's policy
//!   (`ort_env`: the runtime, loaded once; `ort_prepacked`: for a CNN,
//!   sessions with the weights embedded).
//! - [`envs`]: the environments one actor runs behind one connection.
//! - `mpi_link` (feature `mpi`): the actor as an MPI rank; `env_group`
//!   (feature `mpi`): envs that span several ranks.
//! - [`random_rollout`]: local episodes with a random policy.

pub mod control;
#[cfg(feature = "mpi")]
pub mod env_group;
pub mod envs;
#[cfg(feature = "mpi")]
pub mod mpi_link;
mod ort_env;
pub mod ort_net;
mod ort_prepacked;
pub mod remote;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rlfleet_shared::env::{self, Action, Space, UnknownEnv};

/// The outcome of one episode.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeResult {
    pub episode: u64,
    pub ret: f64,
    pub length: u32,
    pub terminated: bool,
}

/// Plays `episodes` episodes of `env_id` with uniformly random actions;
/// episode `i` is reset with seed `seed + i`.
pub fn random_rollout(
    env_id: &str,
    episodes: u64,
    seed: u64,
) -> Result<Vec<EpisodeResult>, UnknownEnv> {
    let mut env = env::make(env_id)?;
    let spec = env.spec().clone();
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut obs = vec![0f32; spec.obs_dim()];
    let mut cont = vec![0f32; spec.action_space.flat_dim()];
    Ok((0..episodes)
        .map(|i| {
            env.reset(Some(seed + i), &mut obs);
            let (mut ret, mut length) = (0.0, 0);
            loop {
                let action = match &spec.action_space {
                    Space::Discrete { n } => Action::Discrete(rng.random_range(0..*n)),
                    Space::Box { low, high } => {
                        for (c, (l, h)) in cont.iter_mut().zip(low.iter().zip(high)) {
                            *c = rng.random_range(*l..=*h);
                        }
                        Action::Continuous(&cont)
                    }
                };
                let step = env.step(action, &mut obs);
                ret += step.reward;
                length += 1;
                if step.done() {
                    return EpisodeResult {
                        episode: i,
                        ret,
                        length,
                        terminated: step.terminated,
                    };
                }
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plays_exactly_the_requested_episodes_reproducibly() {
        let a = random_rollout("CartPole-v1", 25, 7).unwrap();
        assert_eq!(a.len(), 25);
        assert!(
            a.iter()
                .enumerate()
                .all(|(i, e)| e.episode == i as u64 && e.ret == e.length as f64)
        );
        assert_eq!(a, random_rollout("CartPole-v1", 25, 7).unwrap());
        // Pendulum never terminates: every episode is cut at 200 steps.
        let p = random_rollout("Pendulum-v1", 3, 0).unwrap();
        assert!(p.iter().all(|e| e.length == 200 && !e.terminated));
    }
}
