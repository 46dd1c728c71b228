//! Environment parity with Gymnasium itself: our environments and the
//! reference (a Python subprocess) start from the same states, take the same
//! actions, and must agree on every observation, reward, flag and internal
//! state, for episodes that terminate and episodes that truncate.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rlfleet_shared::env::{self, Action, Env};
use rlfleet_tests::{reference_python, run_with_input, workspace_root};
use serde::{Deserialize, Serialize};
use std::process::Command;

#[derive(Serialize)]
struct Request<'a> {
    env: &'a str,
    episodes: Vec<EpisodeIn>,
}

#[derive(Serialize)]
struct EpisodeIn {
    state: Vec<f64>,
    actions: Vec<f64>,
}

#[derive(Deserialize)]
struct Response {
    gymnasium: String,
    episodes: Vec<EpisodeOut>,
}

#[derive(Deserialize, Debug, PartialEq)]
struct EpisodeOut {
    steps: Vec<StepOut>,
}

#[derive(Deserialize, Debug, Clone, PartialEq)]
struct StepOut {
    obs: Vec<f64>,
    reward: f64,
    terminated: bool,
    truncated: bool,
    state: Vec<f64>,
}

/// A behaviour that picks the next action from the current observation.
type Behaviour = fn(&[f32], &mut Pcg64) -> f64;

/// Runs one episode of ours, recording its start state, actions and steps.
fn rollout(
    env: &mut dyn Env,
    seed: u64,
    behaviour: Behaviour,
    rng: &mut Pcg64,
) -> (EpisodeIn, Vec<StepOut>) {
    let mut obs = vec![0.0f32; env.spec().obs_dim()];
    env.reset(Some(seed), &mut obs);
    let state = env.state();
    let (mut actions, mut steps) = (vec![], vec![]);
    loop {
        let a = behaviour(&obs, rng);
        let cont = [a as f32];
        let action = if env.spec().action_space.is_discrete() {
            Action::Discrete(a as usize)
        } else {
            Action::Continuous(&cont)
        };
        let s = env.step(action, &mut obs);
        actions.push(if env.spec().action_space.is_discrete() {
            a
        } else {
            cont[0] as f64
        });
        steps.push(StepOut {
            obs: obs.iter().map(|&o| o as f64).collect(),
            reward: s.reward,
            terminated: s.terminated,
            truncated: s.truncated,
            state: env.state(),
        });
        if s.done() {
            return (EpisodeIn { state, actions }, steps);
        }
    }
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9
}

/// Drives both implementations and compares everything; returns
/// `(steps, terminated episodes, truncated episodes)`.
fn check(id: &str, plan: &[(Behaviour, usize)]) -> (usize, usize, usize) {
    let mut env = env::make(id).unwrap();
    let mut rng = Pcg64::seed_from_u64(2024);
    let mut ours = vec![];
    let mut episodes = vec![];
    let mut seed = 100;
    for &(behaviour, n) in plan {
        for _ in 0..n {
            let (ep, steps) = rollout(env.as_mut(), seed, behaviour, &mut rng);
            episodes.push(ep);
            ours.push(steps);
            seed += 1;
        }
    }
    let req = serde_json::to_vec(&Request { env: id, episodes }).unwrap();
    let script = workspace_root().join("tests/gym_reference.py");
    let out = run_with_input(Command::new(reference_python()).arg(script), &req);
    assert!(
        out.status.success(),
        "reference failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Response = serde_json::from_slice(&out.stdout).expect("reference JSON");
    assert_eq!(theirs.gymnasium, "1.2.2", "pinned reference version");
    assert_eq!(theirs.episodes.len(), ours.len());
    let (mut total, mut term, mut trunc) = (0, 0, 0);
    for (e, (mine, reference)) in ours.iter().zip(&theirs.episodes).enumerate() {
        assert_eq!(
            mine.len(),
            reference.steps.len(),
            "{id} episode {e}: length differs"
        );
        for (t, (m, r)) in mine.iter().zip(&reference.steps).enumerate() {
            let ctx = format!("{id} episode {e} step {t}: ours {m:?} reference {r:?}");
            // Observations are float32 on both sides: exact.
            assert_eq!(m.obs, r.obs, "observation: {ctx}");
            assert!(close(m.reward, r.reward), "reward: {ctx}");
            assert_eq!(
                (m.terminated, m.truncated),
                (r.terminated, r.truncated),
                "flags: {ctx}"
            );
            assert_eq!(m.state.len(), r.state.len(), "state: {ctx}");
            for (a, b) in m.state.iter().zip(&r.state) {
                assert!(close(*a, *b), "state: {ctx}");
            }
        }
        let last = mine.last().unwrap();
        term += last.terminated as usize;
        trunc += (last.truncated && !last.terminated) as usize;
        total += mine.len();
    }
    (total, term, trunc)
}

fn random2(_: &[f32], rng: &mut Pcg64) -> f64 {
    rng.random_range(0..2) as f64
}
fn random3(_: &[f32], rng: &mut Pcg64) -> f64 {
    rng.random_range(0..3) as f64
}
/// Continuous actions reaching past the bounds, so clipping is exercised.
fn random_torque(_: &[f32], rng: &mut Pcg64) -> f64 {
    rng.random_range(-2.5..2.5)
}

#[test]
fn cartpole_matches_gymnasium() {
    fn balance(o: &[f32], _: &mut Pcg64) -> f64 {
        (o[2] + 0.5 * o[3] > 0.0) as u8 as f64
    }
    let (steps, term, trunc) = check("CartPole-v1", &[(random2, 40), (balance, 3)]);
    assert!(
        steps >= 1000 && term >= 1 && trunc >= 1,
        "{steps} {term} {trunc}"
    );
}

#[test]
fn acrobot_matches_gymnasium() {
    fn pump(o: &[f32], _: &mut Pcg64) -> f64 {
        if o[5] > 0.0 { 2.0 } else { 0.0 }
    }
    fn resist(o: &[f32], _: &mut Pcg64) -> f64 {
        if o[5] > 0.0 { 0.0 } else { 2.0 }
    }
    let (steps, term, trunc) = check("Acrobot-v1", &[(pump, 6), (resist, 1), (random3, 1)]);
    assert!(
        steps >= 1000 && term >= 1 && trunc >= 1,
        "{steps} {term} {trunc}"
    );
}

#[test]
fn mountain_car_matches_gymnasium() {
    fn pump(o: &[f32], _: &mut Pcg64) -> f64 {
        if o[1] > 0.0 { 2.0 } else { 0.0 }
    }
    let (steps, term, trunc) = check("MountainCar-v0", &[(pump, 6), (random3, 4)]);
    assert!(
        steps >= 1000 && term >= 1 && trunc >= 1,
        "{steps} {term} {trunc}"
    );
}

#[test]
fn mountain_car_continuous_matches_gymnasium() {
    fn pump(o: &[f32], rng: &mut Pcg64) -> f64 {
        let push = rng.random_range(0.3..1.6);
        if o[1] > 0.0 { push } else { -push }
    }
    let (steps, term, trunc) = check("MountainCarContinuous-v0", &[(pump, 8), (random_torque, 1)]);
    assert!(
        steps >= 1000 && term >= 1 && trunc >= 1,
        "{steps} {term} {trunc}"
    );
}

#[test]
fn pendulum_matches_gymnasium() {
    // Pendulum never terminates; every episode truncates at 200 steps.
    let (steps, term, trunc) = check("Pendulum-v1", &[(random_torque, 6)]);
    assert_eq!((steps, term, trunc), (1200, 0, 6));
}
