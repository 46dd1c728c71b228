//! [`NStep`]: turns each episode's one-step transitions into n-step ones
//! (discounted reward sums over up to n steps, bootstrapping from the
//! state n steps on) before they go into a replay. Observations go through
//! as they came: values, or a uint8 env's bytes (`NStep<u8>`).

use crate::uniform::Transition;
use std::collections::{HashMap, VecDeque};

/// A step waiting for the rewards that follow it.
#[derive(Debug)]
struct Pending<T> {
    obs: Vec<T>,
    action: Vec<f32>,
    reward: f32,
}

/// The last steps of one open episode.
#[derive(Debug)]
struct Open<T> {
    steps: VecDeque<Pending<T>>,
    /// The observation after the newest step.
    next_obs: Vec<T>,
}

impl<T> Default for Open<T> {
    fn default() -> Self {
        Open {
            steps: VecDeque::new(),
            next_obs: Vec::new(),
        }
    }
}

/// Per-episode windows of the last `n` steps. Episodes may interleave (many
/// actors feed one learner): each is keyed by its id.
#[derive(Debug)]
pub struct NStep<T = f32> {
    n: usize,
    gamma: f32,
    open: HashMap<u64, Open<T>>,
}

impl<T: Copy> NStep<T> {
    pub fn new(n: u32, gamma: f64) -> NStep<T> {
        NStep {
            n: n.max(1) as usize,
            gamma: gamma as f32,
            open: HashMap::new(),
        }
    }

    /// Takes one step of an episode; gives `emit` each n-step transition it
    /// completes with the discount of its bootstrap (`gamma^k`; 0 past a
    /// terminal state).
    pub fn push(&mut self, t: &Transition<'_, T>, mut emit: impl FnMut(&Transition<'_, T>, f32)) {
        if self.n == 1 {
            emit(t, if t.terminated { 0.0 } else { self.gamma });
            return;
        }
        let open = self.open.entry(t.episode).or_default();
        open.steps.push_back(Pending {
            obs: t.obs.to_vec(),
            action: t.action.to_vec(),
            reward: t.reward,
        });
        open.next_obs.clear();
        open.next_obs.extend_from_slice(t.next_obs);
        if t.terminated {
            // Every waiting step ends here: no bootstrap.
            let open = self.open.remove(&t.episode).expect("just inserted");
            drain(open, t.episode, self.gamma, true, &mut emit);
        } else if open.steps.len() == self.n {
            emit_first(open, t.episode, self.gamma, false, &mut emit);
        }
    }

    /// Episode `episode` ended without a terminal state (truncated, or its
    /// terminal step was already pushed): the waiting steps bootstrap from
    /// the last observation over however many steps they have.
    pub fn end_episode(&mut self, episode: u64, mut emit: impl FnMut(&Transition<'_, T>, f32)) {
        if let Some(open) = self.open.remove(&episode) {
            drain(open, episode, self.gamma, false, &mut emit);
        }
    }

    /// Episode `episode` is played again from its start: the steps of the
    /// earlier play still waiting are let go (a window does not mix plays).
    pub fn abandon(&mut self, episode: u64) {
        self.open.remove(&episode);
    }

    /// Episodes with steps waiting.
    pub fn open_episodes(&self) -> usize {
        self.open.len()
    }

    /// Steps waiting in open episodes.
    pub fn pending(&self) -> usize {
        self.open.values().map(|o| o.steps.len()).sum()
    }
}

/// The discounted reward sum of `steps` and `gamma^len`.
fn returns<T>(steps: &VecDeque<Pending<T>>, gamma: f32) -> (f32, f32) {
    let mut sum = 0.0;
    let mut g = 1.0;
    for s in steps {
        sum += g * s.reward;
        g *= gamma;
    }
    (sum, g)
}

/// Emits every waiting step of a finished episode.
fn drain<T>(
    mut open: Open<T>,
    episode: u64,
    gamma: f32,
    terminated: bool,
    emit: &mut impl FnMut(&Transition<'_, T>, f32),
) {
    while !open.steps.is_empty() {
        emit_first(&mut open, episode, gamma, terminated, emit);
    }
}

/// Emits the oldest waiting step with the discounted sum of the rewards
/// from it on, bootstrapping from the newest observation (not past a
/// terminal state).
fn emit_first<T>(
    open: &mut Open<T>,
    episode: u64,
    gamma: f32,
    terminated: bool,
    emit: &mut impl FnMut(&Transition<'_, T>, f32),
) {
    let (reward, discount) = returns(&open.steps, gamma);
    let first = open.steps.pop_front().expect("a waiting step");
    emit(
        &Transition {
            obs: &first.obs,
            action: &first.action,
            reward,
            next_obs: &open.next_obs,
            terminated,
            episode,
            step: 0,
            logp: None,
        },
        if terminated { 0.0 } else { discount },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (first obs, reward sum, next obs, discount) of each emitted
    /// transition.
    type Emitted = Vec<(f32, f32, f32, f32)>;

    fn step(n: &mut NStep, out: &mut Emitted, episode: u64, t: u32, terminated: bool) {
        let (o, next) = ([t as f32], [t as f32 + 1.0]);
        n.push(
            &Transition {
                obs: &o,
                action: &[0.0],
                reward: 1.0,
                next_obs: &next,
                terminated,
                episode,
                step: 0,
                logp: None,
            },
            |t, d| out.push((t.obs[0], t.reward, t.next_obs[0], d)),
        );
    }

    /// 3-step returns with gamma 0.5 over two interleaved episodes: one
    /// terminated (the tail does not bootstrap), one truncated (the tail
    /// bootstraps over the steps it has).
    #[test]
    fn n_step_returns_with_terminal_and_truncated_tails() {
        let mut n = NStep::new(3, 0.5);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for t in 0..4 {
            step(&mut n, &mut a, 1, t, t == 3);
            step(&mut n, &mut b, 2, t, false);
        }
        assert_eq!(
            a,
            vec![
                (0.0, 1.75, 3.0, 0.125),
                (1.0, 1.75, 4.0, 0.0),
                (2.0, 1.5, 4.0, 0.0),
                (3.0, 1.0, 4.0, 0.0),
            ]
        );
        assert_eq!(b, vec![(0.0, 1.75, 3.0, 0.125), (1.0, 1.75, 4.0, 0.125)]);
        assert_eq!(n.pending(), 2);
        n.end_episode(2, |t, d| b.push((t.obs[0], t.reward, t.next_obs[0], d)));
        assert_eq!(b[2..], [(2.0, 1.5, 4.0, 0.25), (3.0, 1.0, 4.0, 0.5)]);
        assert_eq!(n.pending(), 0);
        // One step: passed straight through.
        let mut one = NStep::new(1, 0.9);
        let mut c = Vec::new();
        step(&mut one, &mut c, 5, 0, false);
        step(&mut one, &mut c, 5, 1, true);
        assert_eq!(c, vec![(0.0, 1.0, 1.0, 0.9), (1.0, 1.0, 2.0, 0.0)]);
    }

    /// An episode played again after an abandoned play starts a fresh
    /// window: no emitted transition holds a step of the earlier play.
    #[test]
    fn a_replayed_episode_does_not_mix_with_its_abandoned_play() {
        let mut n = NStep::new(3, 0.5);
        let mut out = Vec::new();
        // The earlier play: steps 10 and 11, then its actor left.
        step(&mut n, &mut out, 7, 10, false);
        step(&mut n, &mut out, 7, 11, false);
        n.abandon(7);
        assert_eq!((out.len(), n.pending()), (0, 0));
        for t in 0..3 {
            step(&mut n, &mut out, 7, t, t == 2);
        }
        assert_eq!(
            out,
            vec![
                (0.0, 1.75, 3.0, 0.0),
                (1.0, 1.5, 3.0, 0.0),
                (2.0, 1.0, 3.0, 0.0)
            ]
        );
    }
}
