//! IMPALA's bookkeeping: the behaviour policy of each step is the
//! log-probability its actor computed when it chose the action (with the
//! recurrent state the actor held); steps that carry none are dropped and
//! counted; on-policy steps have importance weights of exactly 1; updates
//! take `n_epochs` steps every `n_steps` held steps.

use super::*;
use crate::agents::sequences::{Padded, windowed};
use crate::agents::{Learn, Persist};
use rlfleet_shared::nets::Rows;
use rlfleet_shared::policy::QPolicy;

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

/// The observation of step `t` of `episode`.
fn obs_at(episode: u64, t: usize) -> [f32; 4] {
    [0.05 * t as f32, -0.1, 0.02 * episode as f32, 0.01]
}

/// Who chooses the actions of [`play`]: the agent itself (as under
/// `single`), an actor with published weights (its env slot 0; `Stating`:
/// one that also says the state it acted the first step from, as actors
/// with a core do at a run's start), or nobody who says a log-probability.
enum By<'a> {
    Agent,
    Actor(&'a mut QPolicy),
    Stating(&'a mut QPolicy),
    Unsaid,
}

/// Steps `from..to` of `episode`, the last one terminal when `ends`; each
/// carries the log-probability its chooser gave. Returns those.
fn play(
    agent: &mut Impala,
    episode: u64,
    (from, to): (usize, usize),
    by: By<'_>,
    ends: bool,
) -> Vec<f32> {
    let mut by = by;
    if let (By::Actor(q) | By::Stating(q), 0) = (&mut by, from) {
        // A new episode: a recurrent core starts from zeros.
        q.reset_slot(0);
    }
    if let By::Stating(q) = &mut by {
        let mut state = vec![0.0; q.net().state_len()];
        q.state_into(0, &mut state);
        agent.acted_from(episode, &state);
    }
    let mut said = Vec::new();
    for t in from..to {
        let obs = obs_at(episode, t);
        let mut action = [((t + episode as usize) % 2) as f32];
        let logp = match &mut by {
            By::Agent => {
                agent.act(&obs, 0, &mut action);
                agent.last_logp()
            }
            By::Actor(q) | By::Stating(q) => {
                let mut picked = Vec::new();
                q.act_slots(Rows::Values(&obs), &[0], &mut picked);
                action[0] = picked[0];
                q.logps().first().copied()
            }
            By::Unsaid => None,
        };
        said.extend(logp);
        agent.observe(&Transition {
            obs: &obs,
            action: &action,
            reward: 1.0,
            next_obs: &obs_at(episode, t + 1),
            terminated: ends && t + 1 == to,
            episode,
            step: t as u32,
            logp,
        });
    }
    said
}

/// An actor's policy for `agent`'s network, loaded with `weights`.
fn actor_of(agent: &Impala, weights: &Weights) -> QPolicy {
    let mut q = QPolicy::from_shape(agent.nets.policy_net.shape().clone(), 11);
    q.sample = true;
    q.load(weights.version, &weights.data).unwrap();
    q
}

/// Steps acted by published weights older than the learner's (a lagging
/// actor) carry the log-probabilities that actor computed, in plain Rust;
/// they equal the learner's own under those weights, and an update's ρ at
/// its first epoch is 1 for steps acted by the current weights and not for
/// the others.
#[test]
fn the_behaviour_policy_is_the_log_probability_each_step_carries() {
    let mut agent = Impala::new(&cfg(8, 2), &spec(), None, 7, Device::Cpu);
    let v0 = agent.weights();
    play(&mut agent, 1, (0, 8), By::Agent, true);
    agent.end_episode(1);
    assert_eq!(agent.train(8), 2, "n_epochs gradient steps");
    let v2 = agent.weights();
    assert_eq!((v0.version, v2.version), (0, 2));
    assert_ne!(v0.data, v2.data);
    let mut lagging = actor_of(&agent, &v0);
    let said = play(&mut agent, 2, (0, 6), By::Actor(&mut lagging), true);
    agent.end_episode(2);
    let params = Tensor::from_slice(&v0.data);
    let u = &agent.ready[0];
    let obs = Rollout::obs_on_device(&[u], Device::Cpu);
    let logp = agent
        .nets
        .policy_net
        .forward(&params, &obs)
        .log_softmax(1, Kind::Float);
    assert_eq!(said.len(), 6);
    for (i, &a) in u.actions.iter().enumerate() {
        let learner = logp.double_value(&[i as i64, a as i64]) as f32;
        assert!(
            (said[i] - learner).abs() < 1e-5,
            "step {i}: {} vs {learner}",
            said[i]
        );
        assert_eq!(u.logp[i], said[i]);
    }
    // On-policy steps (the current weights) alone: every ρ is 1.
    let mut agent = Impala::new(&cfg(6, 1), &spec(), None, 7, Device::Cpu);
    let mut actor = actor_of(&agent, &agent.weights());
    play(&mut agent, 3, (0, 6), By::Actor(&mut actor), true);
    agent.end_episode(3);
    assert_eq!(agent.train(6), 1);
    let rho = agent.last_rho.expect("measured");
    assert!(
        (rho.mean - 1.0).abs() < 1e-5 && rho.clipped == 0.0,
        "{rho:?}"
    );
    // Steps of the weights before that update: corrected (ρ ≠ 1).
    play(&mut agent, 4, (0, 6), By::Actor(&mut actor), true);
    agent.end_episode(4);
    assert_eq!(agent.train(12), 1);
    let rho = agent.last_rho.expect("measured");
    assert!((rho.mean - 1.0).abs() > 1e-5, "{rho:?}");
    assert_eq!(agent.uncorrectable(), 0);
}

#[test]
fn steps_without_a_behaviour_log_probability_are_dropped_and_counted() {
    let mut agent = Impala::new(&cfg(6, 1), &spec(), None, 3, Device::Cpu);
    play(&mut agent, 1, (0, 3), By::Unsaid, false);
    play(&mut agent, 2, (0, 3), By::Agent, false);
    assert_eq!(agent.replay_len(), 6);
    assert_eq!(agent.train(6), 1);
    assert_eq!((agent.uncorrectable(), agent.replay_len()), (3, 0));
    play(&mut agent, 3, (0, 6), By::Agent, true);
    agent.end_episode(3);
    assert_eq!(agent.train(12), 1);
    assert_eq!(agent.uncorrectable(), 3);
}

#[test]
fn on_policy_steps_have_importance_weights_of_one() {
    let mut agent = Impala::new(&cfg(10, 1), &spec(), None, 5, Device::Cpu);
    play(&mut agent, 1, (0, 6), By::Agent, true);
    agent.end_episode(1);
    play(&mut agent, 2, (0, 4), By::Agent, false);
    assert_eq!(agent.train(10), 1);
    let rho = agent.last_rho.expect("measured");
    assert!(
        (rho.mean - 1.0).abs() < 1e-5 && rho.clipped == 0.0,
        "{rho:?}"
    );
    let scalars = agent.scalars(10);
    assert!(
        scalars
            .iter()
            .any(|&(k, v)| k == "vtrace/rho_mean" && (v - 1.0).abs() < 1e-5)
    );
    // A state round trip restores the networks.
    let saved = agent.state();
    let mut other = Impala::new(&cfg(10, 1), &spec(), None, 9, Device::Cpu);
    other.load_state(&saved).unwrap();
    assert_eq!(other.state(), saved);
    assert_eq!(other.weights().version, agent.weights().version);
}

/// With a recurrent core, an update's first epoch is on-policy: the
/// actor's μ, from the weights it acted with and the state it held, equals
/// π (every ρ is 1) — across windows shorter than the unrolls and with an
/// episode cut by the update, whose state is carried to its next unroll
/// and used up there; steps the actor goes on acting with the weights
/// before the update are corrected (ρ ≠ 1).
#[test]
fn a_recurrent_update_is_on_policy_at_its_first_epoch_and_carries_states() {
    let core = Core { size: 6, layers: 1 };
    let mut agent = Impala::with_core(&cfg(20, 1), &spec(), None, (Some(core), 4), 3, Device::Cpu);
    let mut actor = actor_of(&agent, &agent.weights());
    play(&mut agent, 1, (0, 9), By::Actor(&mut actor), true);
    agent.end_episode(1);
    play(&mut agent, 2, (0, 11), By::Actor(&mut actor), false);
    assert_eq!(agent.train(20), 1);
    let rho = agent.last_rho.unwrap();
    assert!(
        (rho.mean - 1.0).abs() < 1e-5 && rho.clipped == 0.0,
        "{rho:?}"
    );
    assert_eq!(agent.carry.keys().copied().collect::<Vec<_>>(), vec![2]);
    assert_eq!(agent.carry[&2].size(), [2 * core.state_len() as i64]);
    // Episode 2 goes on, acted by the version before the update.
    play(&mut agent, 2, (11, 31), By::Actor(&mut actor), true);
    agent.end_episode(2);
    assert_eq!(agent.train(40), 1);
    assert!(agent.carry.is_empty());
    let rho = agent.last_rho.unwrap();
    assert!((rho.mean - 1.0).abs() > 1e-5, "{rho:?}");
    assert_eq!(agent.uncorrectable(), 0);
}

/// Recurrent IMPALA's μ for an episode acted by two versions in turn (the
/// actor loaded newer weights mid-episode, its core's state carried on) is
/// the actor's own log-probabilities. Recomputing it on the learner, each
/// version's weights run from the episode's start, gets the first
/// version's steps right and the second's wrong: the actor's state at the
/// switch was made by the first version.
#[test]
fn recurrent_mu_for_steps_of_two_versions_in_turn_is_the_actor_s_own() {
    let core = Core { size: 6, layers: 1 };
    let mut agent = Impala::with_core(&cfg(12, 1), &spec(), None, (Some(core), 4), 5, Device::Cpu);
    let v0 = agent.weights();
    play(&mut agent, 1, (0, 12), By::Agent, true);
    agent.end_episode(1);
    assert_eq!(agent.train(12), 1);
    let v1 = agent.weights();
    assert_ne!(v0.data, v1.data);
    // Steps 0..6 acted by version 0, then 6..12 by version 1, one core.
    let mut actor = actor_of(&agent, &v0);
    let mut said = play(&mut agent, 2, (0, 6), By::Actor(&mut actor), false);
    actor.load(v1.version, &v1.data).unwrap();
    said.extend(play(&mut agent, 2, (6, 12), By::Actor(&mut actor), true));
    agent.end_episode(2);
    let unroll = &agent.ready[0];
    // The learner's recomputation, per version from the episode's start.
    let seq = Padded::new(&[unroll], agent.obs_dim, 4, Device::Cpu);
    let actions = seq.spread(&agent.actions(std::slice::from_ref(unroll)));
    let zeros = Tensor::zeros([1, core.state_len() as i64], (Kind::Float, Device::Cpu));
    let recomputed = |w: &Weights| {
        // The learner's own layout of the published weights.
        let mut other =
            Impala::with_core(&cfg(12, 1), &spec(), None, (Some(core), 4), 9, Device::Cpu);
        other.load_weights(w).unwrap();
        let (logits, _, _) = windowed(&agent.nets.policy_net, &other.nets.policy, &seq, &zeros);
        let logp = logits
            .log_softmax(1, Kind::Float)
            .gather(1, &actions, false)
            .squeeze_dim(1);
        Vec::<f32>::try_from(&logp.index_select(0, &seq.rows)).unwrap()
    };
    let (under_v0, under_v1) = (recomputed(&v0), recomputed(&v1));
    let close = |a: f32, b: f32| (a - b).abs() < 1e-5;
    assert!(
        (0..6).all(|i| close(said[i], under_v0[i])),
        "{said:?} {under_v0:?}"
    );
    assert!(
        (6..12).any(|i| !close(said[i], under_v1[i])),
        "the recomputation agreed: {said:?} {under_v1:?}"
    );
    // What the update weighs by is the actor's.
    assert_eq!(agent.train(24), 1);
    assert_eq!(agent.last_mu, said);
    assert_eq!(agent.uncorrectable(), 0);
}

/// An unroll runs the policy from the state its actor says it acted the
/// first step from: an actor whose core's state was made by other weights
/// than the learner's (so the learner's carried state is not the actor's)
/// acts on with the learner's weights, and the update's first epoch is on
/// policy (every ρ is 1); from the learner's own carried state it is not.
#[test]
fn an_unroll_starts_from_the_state_its_actor_acted_from() {
    let core = Core { size: 6, layers: 1 };
    let rho_after = |stating: bool| {
        let mut agent =
            Impala::with_core(&cfg(20, 1), &spec(), None, (Some(core), 4), 3, Device::Cpu);
        let other = Impala::with_core(&cfg(20, 1), &spec(), None, (Some(core), 4), 99, Device::Cpu);
        // Steps 0..20 acted by other weights: the learner's carry for the
        // episode is its own weights' state, not the actor's.
        let mut actor = actor_of(&agent, &other.weights());
        play(&mut agent, 2, (0, 20), By::Actor(&mut actor), false);
        assert_eq!(agent.train(20), 1);
        // Then the learner's weights, from the actor's state.
        let now = agent.weights();
        actor.load(now.version, &now.data).unwrap();
        let by = if stating {
            By::Stating(&mut actor)
        } else {
            By::Actor(&mut actor)
        };
        play(&mut agent, 2, (20, 40), by, true);
        agent.end_episode(2);
        assert_eq!(agent.train(40), 1);
        agent.last_rho.unwrap()
    };
    let rho = rho_after(true);
    assert!(
        (rho.mean - 1.0).abs() < 1e-5 && rho.clipped == 0.0,
        "{rho:?}"
    );
    let rho = rho_after(false);
    assert!((rho.mean - 1.0).abs() > 1e-4, "{rho:?}");
}
