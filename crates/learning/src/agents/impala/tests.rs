//! IMPALA's bookkeeping: the behaviour policy of each step is the weights
//! of the version that acted it; steps acted by weights no longer kept are
//! dropped and counted; on-policy steps have importance weights of exactly
//! 1; updates take `n_epochs` steps every `n_steps` held steps.

use super::*;
use crate::agents::{Learn, Persist};

fn spec() -> EnvSpec {
    rlfleet_shared::env::spec("CartPole-v1").unwrap()
}

fn cfg(n_steps: u32, n_epochs: u32) -> ImpalaConfig {
    ImpalaConfig {
        hidden: vec![16],
        n_steps,
        n_epochs,
        ..ImpalaConfig::default()
    }
}

/// `steps` steps of `episode`, acted by `version` (`None`: the agent's
/// own); the last one terminal when `ends`.
fn play(agent: &mut Impala, episode: u64, steps: usize, version: Option<u64>, ends: bool) {
    if let Some(v) = version {
        agent.acted_with(v);
    }
    for t in 0..steps {
        let obs = [0.05 * t as f32, -0.1, 0.02 * episode as f32, 0.01];
        agent.observe(&Transition {
            obs: &obs,
            action: &[((t + episode as usize) % 2) as f32],
            reward: 1.0,
            next_obs: &obs,
            terminated: ends && t + 1 == steps,
            episode,
            step: 0,
        });
    }
}

/// log π(a|x) of every held step under `weights`, computed apart from the
/// agent's bookkeeping (a network of the same shape loaded with them).
fn logp_under(agent: &Impala, weights: &[f32]) -> Vec<f32> {
    let mut unrolls: Vec<&Unroll> = agent.ready.iter().collect();
    unrolls.extend(agent.open.values());
    let mut out = Vec::new();
    let params = Tensor::from_slice(weights);
    for u in unrolls {
        let obs = rows_on_device(&[&u.obs], agent.obs_dim, Device::Cpu);
        let logits = agent.nets.policy_net.forward(&params, &obs);
        let logp = logits.log_softmax(1, Kind::Float);
        for (i, &a) in u.actions.iter().enumerate() {
            out.push(logp.double_value(&[i as i64, a as i64]) as f32);
        }
    }
    out
}

#[test]
fn the_behaviour_policy_is_the_weights_of_the_version_that_acted() {
    let mut agent = Impala::new(&cfg(8, 2), &spec(), None, 7, Device::Cpu);
    let v0 = agent.weights();
    assert_eq!(v0.version, 0);
    play(&mut agent, 1, 8, None, true);
    agent.end_episode(1);
    assert_eq!(agent.train(8), 2, "n_epochs gradient steps");
    let v2 = agent.weights();
    assert_eq!(v2.version, 2);
    assert_ne!(v0.data, v2.data);
    // Steps acted by version 0 (lagging actors) and by version 2.
    play(&mut agent, 2, 4, Some(0), false);
    play(&mut agent, 3, 4, Some(2), false);
    let mut unrolls: Vec<&Unroll> = agent.ready.iter().collect();
    unrolls.extend(agent.open.values());
    let versions: Vec<u64> = unrolls
        .iter()
        .flat_map(|u| u.versions.iter().copied())
        .collect();
    let parts: Vec<&ObsStore> = unrolls.iter().map(|u| &u.obs).collect();
    let obs = rows_on_device(&parts, agent.obs_dim, Device::Cpu);
    let actions: Vec<i64> = unrolls
        .iter()
        .flat_map(|u| u.actions.iter().map(|&a| a as i64))
        .collect();
    let actions = Tensor::from_slice(&actions).unsqueeze(1);
    let mu = agent.behaviour_logp(&versions, &obs, &actions);
    let (under_v0, under_v2) = (logp_under(&agent, &v0.data), logp_under(&agent, &v2.data));
    for i in 0..mu.len() {
        let want = if versions[i] == 0 {
            under_v0[i]
        } else {
            under_v2[i]
        };
        assert!(
            (mu[i] - want).abs() < 1e-6,
            "step {i} of version {}",
            versions[i]
        );
    }
    assert!(
        under_v0
            .iter()
            .zip(&under_v2)
            .any(|(a, b)| (a - b).abs() > 1e-4)
    );
}

#[test]
fn steps_of_weights_no_longer_kept_are_dropped_and_counted() {
    let mut agent = Impala::new(&cfg(6, 1), &spec(), None, 3, Device::Cpu);
    // Version 5 was never published by this agent: nothing can correct it.
    play(&mut agent, 1, 3, Some(5), false);
    play(&mut agent, 2, 3, Some(0), false);
    assert_eq!(agent.replay_len(), 6);
    assert_eq!(agent.train(6), 1);
    assert_eq!((agent.uncorrectable(), agent.replay_len()), (3, 0));
    // After the update all held steps went: versions 0 and 1 are kept.
    play(&mut agent, 3, 6, Some(0), true);
    agent.end_episode(3);
    assert_eq!(agent.train(12), 1);
    assert_eq!(agent.uncorrectable(), 3);
}

#[test]
fn on_policy_steps_have_importance_weights_of_one() {
    let mut agent = Impala::new(&cfg(10, 1), &spec(), None, 5, Device::Cpu);
    play(&mut agent, 1, 6, None, true);
    agent.end_episode(1);
    play(&mut agent, 2, 4, None, false);
    assert_eq!(agent.train(10), 1);
    let rho = agent.last_rho.expect("measured");
    assert_eq!((rho.mean, rho.clipped), (1.0, 0.0));
    let scalars = agent.scalars(10);
    assert!(
        scalars
            .iter()
            .any(|&(k, v)| k == "vtrace/rho_mean" && v == 1.0)
    );
    // A state round trip restores the networks.
    let saved = agent.state();
    let mut other = Impala::new(&cfg(10, 1), &spec(), None, 9, Device::Cpu);
    other.load_state(&saved).unwrap();
    assert_eq!(other.state(), saved);
    assert_eq!(other.weights().version, agent.weights().version);
}

/// With a recurrent core, an update's first epoch is on-policy: μ, run
/// with the acting version's weights over the same sequences from the same
/// start states, equals π (every ρ is 1) — across windows shorter
/// than the unrolls and with an episode cut by the update, whose state is
/// carried to its next unroll and used up there; steps of an older
/// version are corrected (ρ ≠ 1) after an update.
#[test]
fn a_recurrent_update_is_on_policy_at_its_first_epoch_and_carries_states() {
    let core = Core { size: 6, layers: 1 };
    let mut agent = Impala::with_core(&cfg(20, 1), &spec(), None, (Some(core), 4), 3, Device::Cpu);
    play(&mut agent, 1, 9, None, true);
    agent.end_episode(1);
    play(&mut agent, 2, 11, None, false);
    assert_eq!(agent.train(20), 1);
    let rho = agent.last_rho.unwrap();
    assert!(
        (rho.mean - 1.0).abs() < 1e-5 && rho.clipped == 0.0,
        "{rho:?}"
    );
    assert_eq!(agent.carry.keys().copied().collect::<Vec<_>>(), vec![2]);
    assert_eq!(agent.carry[&2].size(), [2 * core.state_len() as i64]);
    // Episode 2 goes on, acted by the version before the update.
    play(&mut agent, 2, 20, Some(0), true);
    agent.end_episode(2);
    assert_eq!(agent.train(40), 1);
    assert!(agent.carry.is_empty());
    let rho = agent.last_rho.unwrap();
    assert!(
        (rho.mean - 1.0).abs() > 1e-5 && rho.clipped > 0.0,
        "{rho:?}"
    );
    assert_eq!(agent.uncorrectable(), 0);
}
