//! [`FrameChains`] against the reference: the same interleaved steps of
//! several envs through `NStep` into a ring of whole rows. Every step the
//! chains can sample comes back with the stack, next stack, return and
//! discount the reference gives it — across episode ends (terminal and
//! cut), ring wrap-around and a checkpoint — while keeping about one frame
//! a slot.

use super::*;
use crate::n_step::NStep;
use crate::uniform::SampledBatch;
use rand::{Rng, SeedableRng};
use rlfleet_checkpoint::ReplayImage;
use std::collections::HashMap;

const F: usize = 2;
const K: usize = 3;

/// The frame of step `t` of play `p`: unique for the plays and steps here.
fn frame(p: usize, t: usize) -> [f32; F] {
    [p as f32, t as f32]
}

/// Gymnasium's stack at step `t`: the last K frames, the first repeated.
fn stack(p: usize, t: usize) -> Vec<f32> {
    stack_of(p, t, false)
}

/// [`stack`]; with `rebuilt`, every fourth play rebuilds its stack from
/// step 3 on (K copies of a fresh frame): no next stack is a shift there.
fn stack_of(p: usize, t: usize, rebuilt: bool) -> Vec<f32> {
    if rebuilt && p % 4 == 3 && t >= 3 {
        return (0..K).flat_map(|_| frame(p + 200, t)).collect();
    }
    (0..K)
        .flat_map(|j| frame(p, (t + j).saturating_sub(K - 1)))
        .collect()
}

/// One reference transition: stack, next, action, return, discount.
type Row = (Vec<f32>, Vec<f32>, f32, f32, f32);

/// Transitions by the (play, step) of their stack's newest frame.
type Rows = HashMap<(u32, u32), Row>;

/// Plays `plays` episodes over 3 envs, interleaved step by step, into
/// `chains` and the reference; returns the reference transitions by the
/// newest frame of their stack, and the keys of the last `chains.len()`
/// steps pushed (the ring's).
fn play(chains: &mut FrameChains, n: u32, plays: usize, rebuilt: bool) -> (Rows, Vec<(u32, u32)>) {
    let stack = |p, t| stack_of(p, t, rebuilt);
    let mut pushed = Vec::new();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
    let mut reference = NStep::new(n, 0.9);
    let mut rows = HashMap::new();
    let mut keep = |t: &Transition<'_>, discount: f32| {
        let key = (t.obs[K * F - 2] as u32, t.obs[K * F - 1] as u32);
        rows.insert(
            key,
            (
                t.obs.to_vec(),
                t.next_obs.to_vec(),
                t.action[0],
                t.reward,
                discount,
            ),
        );
    };
    // Per env: (play, step, length, ends terminally).
    let mut envs: Vec<Option<(usize, usize, usize, bool)>> = vec![None; 3];
    let mut next_play = 0;
    let mut finished = 0;
    while finished < plays {
        for env in envs.iter_mut() {
            if env.is_none() && next_play < plays {
                *env = Some((next_play, 0, rng.random_range(1..12), rng.random_bool(0.5)));
                next_play += 1;
            }
            let Some((p, t, len, terminal)) = *env else {
                continue;
            };
            let last = t + 1 == len;
            let tr = Transition {
                episode: p as u64,
                step: 0,
                obs: &stack(p, t),
                action: &[(t % 4) as f32],
                reward: (p * 100 + t) as f32,
                next_obs: &stack(p, t + 1),
                terminated: last && terminal,
                logp: None,
            };
            chains.push(&tr);
            let newest = frame(
                if rebuilt && p % 4 == 3 && t >= 3 {
                    p + 200
                } else {
                    p
                },
                t,
            );
            pushed.push((newest[0] as u32, newest[1] as u32));
            reference.push(&tr, &mut keep);
            if last {
                chains.end_episode(p as u64);
                reference.end_episode(p as u64, &mut keep);
                *env = None;
                finished += 1;
            } else {
                *env = Some((p, t + 1, len, terminal));
            }
        }
    }
    let ring = pushed.split_off(pushed.len() - chains.len());
    (rows, ring)
}

/// Every complete slot of `chains`, as reference rows keyed like them.
fn sampled(chains: &FrameChains) -> Rows {
    let indices: Vec<usize> = (0..chains.len())
        .filter(|&i| chains.is_complete(i))
        .collect();
    let mut b = SampledBatch {
        indices,
        ..SampledBatch::default()
    };
    chains.gather_into(&mut b);
    let [_, _, o_act, o_rew, o_disc] = b.offsets();
    (0..b.batch)
        .map(|k| {
            let (obs, next) = (b.obs_row(k, false), b.obs_row(k, true));
            let key = (obs[K * F - 2] as u32, obs[K * F - 1] as u32);
            let row = (
                obs,
                next,
                b.data[o_act + k],
                b.data[o_rew + k],
                b.data[o_disc + k],
            );
            (key, row)
        })
        .collect()
}

#[test]
fn every_sampled_step_equals_the_reference_with_one_frame_a_slot() {
    for (n, rebuilt) in [(1u32, false), (3, false), (1, true), (3, true)] {
        // 40 plays of up to 11 steps through a ring of 64: it wraps.
        let mut chains = FrameChains::new(64, F, K, 1, n, 0.9);
        let (reference, ring) = play(&mut chains, n, 40, rebuilt);
        let got = sampled(&chains);
        // Every play ended: every step in the ring can be sampled.
        let mut keys: Vec<_> = got.keys().copied().collect();
        keys.sort_unstable();
        let mut want = ring.clone();
        want.sort_unstable();
        assert_eq!(
            (keys, chains.sampleable()),
            (want, 64),
            "n {n} rebuilt {rebuilt}"
        );
        for (key, row) in &got {
            assert_eq!(Some(row), reference.get(key), "n {n}: step {key:?}");
        }
        if rebuilt {
            assert!(!chains.whole.is_empty());
            continue;
        }
        // Per slot: one 2-byte frame and the scalars; beside them a base
        // per chain in the ring and nothing else once every play ended.
        let scalars = 4 + 4 + 1 + 8 + 8;
        let chains_in_ring = chains.bases.len();
        assert!(chains.tails.len() <= chains_in_ring && chains.whole.is_empty());
        assert_eq!(
            chains.memory_bytes(),
            64 * (F + scalars) + chains_in_ring * ((K - 1) * F + 4) + chains.tails.len() * (F + 4)
        );
    }
}

#[test]
fn open_windows_wait_and_a_checkpoint_brings_the_closed_chains_back_exactly() {
    let mut chains = FrameChains::new(32, F, K, 1, 3, 0.9);
    let step = |t: usize| Transition {
        episode: 5,
        step: 0,
        obs: &[],
        action: &[0.0],
        reward: t as f32,
        next_obs: &[],
        terminated: false,
        logp: None,
    };
    for t in 0..4 {
        let (obs, next) = (stack(5, t), stack(5, t + 1));
        let (_, done) = chains.push(&Transition {
            obs: &obs,
            next_obs: &next,
            ..step(t)
        });
        // From the third step on, the one two back has its 3 steps.
        assert_eq!(done, if t >= 2 { vec![t - 2] } else { vec![] });
    }
    assert!(chains.is_complete(1) && !chains.is_complete(2) && !chains.is_complete(3));
    let mut img = ReplayImage::default();
    chains.image(&mut img);
    let mut back = FrameChains::new(32, F, K, 1, 3, 0.9);
    back.restore(&img).unwrap();
    assert_eq!(sampled(&back), sampled(&chains));
    assert_eq!(back.sampleable(), 2);
    let mut again = ReplayImage::default();
    back.image(&mut again);
    assert_eq!(again, img, "the restored ring's image is the saved one");
    // A resumed run plays the open episode again from its start (frames of
    // play 7): a chain of its own; the saved play's windows stay open.
    for t in 0..2 {
        let (obs, next) = (stack(7, t), stack(7, t + 1));
        back.push(&Transition {
            obs: &obs,
            next_obs: &next,
            terminated: t == 1,
            ..step(t)
        });
    }
    let got = sampled(&back);
    assert_eq!(got.len(), 4);
    assert_eq!(
        got[&(7, 0)].1,
        stack(7, 2),
        "n-step next stack of the new play"
    );
    assert!(!got.contains_key(&(5, 2)) && !got.contains_key(&(5, 3)));
    // Another ring's image is refused, by name.
    let mut other = FrameChains::new(32, F, K, 1, 1, 0.9);
    let err = other.restore(&img).unwrap_err().to_string();
    assert!(err.contains("n_step"), "{err}");
}

#[test]
fn a_play_again_of_an_episode_starts_its_own_chain() {
    let mut chains = FrameChains::new(16, F, K, 1, 1, 0.9);
    for t in 0..3 {
        let (obs, next) = (stack(2, t), stack(2, t + 1));
        chains.push(&Transition {
            episode: 2,
            step: 0,
            obs: &obs,
            action: &[0.0],
            reward: 0.0,
            next_obs: &next,
            terminated: false,
            logp: None,
        });
    }
    chains.abandon(2);
    // The same episode id, played again from its start (frames of play 9).
    let (obs, next) = (stack(9, 0), stack(9, 1));
    chains.push(&Transition {
        episode: 2,
        step: 0,
        obs: &obs,
        action: &[1.0],
        reward: 1.0,
        next_obs: &next,
        terminated: true,
        logp: None,
    });
    let got = sampled(&chains);
    assert_eq!(got[&(9, 0)].0, stack(9, 0));
    assert_eq!(got[&(9, 0)].4, 0.0, "terminal");
    assert_eq!(got[&(2, 2)].1, stack(2, 3));
}
