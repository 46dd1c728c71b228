//! [`QPolicy`]: epsilon-greedy actions from the learner's Q-network weights
//! — or, for a policy network (`sample`), actions drawn from the softmax of
//! its logits — computed in plain Rust: what actors act with (no libtorch there), and
//! what the learner's SEED inference front answers with. [`ContinuousPolicy`]
//! does the same for actions in a box.

mod actor;
mod continuous;

pub use actor::ActorPolicy;
pub use continuous::{
    ContinuousHead, ContinuousPolicy, LOG_STD_MAX, LOG_STD_MIN, continuous_head, standard_normal,
};

use crate::nets::{Forward, NetCopy, NetShape, Rows, argmax};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

#[derive(Debug)]
pub struct QPolicy {
    net: Box<dyn Forward>,
    pub version: u64,
    pub epsilon: f32,
    /// The network gives logits: sample from their softmax (`epsilon` is
    /// not used).
    pub sample: bool,
    /// The network's first output is a state value and the rest are
    /// advantages (a dueling head): the greedy action is the best
    /// advantage.
    dueling: bool,
    rng: Pcg64,
    /// Each env slot's recurrent state (`state_len` values per slot; empty
    /// without a core), zeros until it acts.
    states: Vec<f32>,
    /// The acting rows' states, gathered for one forward pass.
    gathered: Vec<f32>,
    /// A sampling policy's log-probability of each action it last picked
    /// (empty for an epsilon-greedy one).
    logps: Vec<f32>,
}

impl QPolicy {
    /// An MLP policy over `obs_dim` values.
    pub fn new(obs_dim: usize, hidden: &[u32], n_actions: usize, seed: u64) -> QPolicy {
        QPolicy::from_shape(NetShape::new(obs_dim, hidden, n_actions), seed)
    }

    /// A policy over the network `shape` (one output per action).
    pub fn from_shape(shape: NetShape, seed: u64) -> QPolicy {
        QPolicy {
            net: Box::new(NetCopy::new(shape)),
            version: 0,
            epsilon: 1.0,
            sample: false,
            dueling: false,
            rng: Pcg64::seed_from_u64(seed),
            states: Vec::new(),
            gathered: Vec::new(),
            logps: Vec::new(),
        }
    }

    /// The same policy over a dueling Q-network (one more output: the
    /// state value first).
    pub fn dueling(self, dueling: bool) -> QPolicy {
        if !dueling || self.dueling {
            return self;
        }
        let net = self.net.net();
        let shape = net.with_output(net.output_dim() + 1);
        QPolicy {
            net: Box::new(NetCopy::new(shape)),
            dueling: true,
            ..self
        }
    }

    /// The network this policy runs (to build another backend for it).
    pub fn net(&self) -> &NetShape {
        self.net.net()
    }

    /// Runs the network with `forward` instead (for example ONNX Runtime);
    /// refuses one for another network. Weights must be loaded again.
    pub fn with_forward(self, forward: Box<dyn Forward>) -> Result<QPolicy, String> {
        self.net.net().check_backend(forward.net())?;
        Ok(QPolicy {
            net: forward,
            ..self
        })
    }

    /// Parameters the network takes.
    pub fn numel(&self) -> usize {
        self.net.net().numel()
    }

    /// Takes weights of `version`; refuses a wrong parameter count.
    pub fn load(&mut self, version: u64, data: &[f32]) -> Result<(), String> {
        self.net.load(data)?;
        self.version = version;
        Ok(())
    }

    pub fn has_weights(&self) -> bool {
        self.net.loaded()
    }

    /// Epsilon-greedy (or sampled) actions for `n` observations (one index
    /// each).
    pub fn act(&mut self, obs: &[f32], n: usize, actions: &mut Vec<f32>) {
        self.act_rows(Rows::Values(obs), n, actions);
    }

    /// [`QPolicy::act`] for rows held either way (row `i` is env slot
    /// `i` for a recurrent core's state).
    pub fn act_rows(&mut self, obs: Rows<'_>, n: usize, actions: &mut Vec<f32>) {
        self.act_in(obs, n, None, actions);
    }

    /// [`QPolicy::act_rows`] for the env slots `slots` (row `i` is slot
    /// `slots[i]`): a recurrent core reads and advances their states.
    pub fn act_slots(&mut self, obs: Rows<'_>, slots: &[usize], actions: &mut Vec<f32>) {
        self.act_in(obs, slots.len(), Some(slots), actions);
    }

    /// For a sampling policy (`sample`), the log-probability of each
    /// action of the last call under the weights that picked it (uniform
    /// before any were loaded), one per row: the behaviour policy an
    /// off-policy correction needs. Empty for an epsilon-greedy policy.
    pub fn logps(&self) -> &[f32] {
        &self.logps
    }

    /// Slot `slot`'s recurrent state into `out` (`state_len` values:
    /// zeros before it first acts).
    pub fn state_into(&self, slot: usize, out: &mut [f32]) {
        let len = self.net.net().state_len();
        match self.states.get(slot * len..(slot + 1) * len) {
            Some(s) => out.copy_from_slice(s),
            None => out.fill(0.0),
        }
    }

    /// Zeros slot `slot`'s recurrent state (its env begins an episode).
    pub fn reset_slot(&mut self, slot: usize) {
        let len = self.net.net().state_len();
        if let Some(s) = self.states.get_mut(slot * len..(slot + 1) * len) {
            s.fill(0.0);
        }
    }

    fn act_in(&mut self, obs: Rows<'_>, n: usize, slots: Option<&[usize]>, actions: &mut Vec<f32>) {
        let len = self.net.net().state_len();
        if len == 0 {
            return self.act_states(obs, n, &mut [], actions);
        }
        let slot = |i: usize| slots.map_or(i, |s| s[i]);
        let top = (0..n).map(slot).max().map_or(0, |m| m + 1);
        if self.states.len() < top * len {
            self.states.resize(top * len, 0.0);
        }
        let mut gathered = std::mem::take(&mut self.gathered);
        gathered.clear();
        for i in 0..n {
            let s = slot(i);
            gathered.extend_from_slice(&self.states[s * len..(s + 1) * len]);
        }
        self.act_states(obs, n, &mut gathered, actions);
        for i in 0..n {
            let s = slot(i);
            self.states[s * len..(s + 1) * len].copy_from_slice(&gathered[i * len..(i + 1) * len]);
        }
        self.gathered = gathered;
    }

    /// [`QPolicy::act_rows`] with the rows' recurrent states held by the
    /// caller (`n * state_len` values, read and advanced; empty without a
    /// core): the `seed` front keeps each actor env's.
    pub fn act_states(
        &mut self,
        obs: Rows<'_>,
        n: usize,
        states: &mut [f32],
        actions: &mut Vec<f32>,
    ) {
        self.act_states_eps(obs, n, states, &[], actions);
    }

    /// [`QPolicy::act_states`] with each row's own exploration rate
    /// (`epsilons[i]` for row `i`; empty: `epsilon` for every row), as
    /// the `seed` front acts for R2D2's ladder.
    pub fn act_states_eps(
        &mut self,
        obs: Rows<'_>,
        n: usize,
        states: &mut [f32],
        epsilons: &[f32],
        actions: &mut Vec<f32>,
    ) {
        actions.clear();
        self.logps.clear();
        let width = self.net.net().output_dim();
        let skip = usize::from(self.dueling);
        let k = width - skip;
        // Every row explores (`random`'s actors, or an epsilon schedule at
        // its start): the actions do not depend on the network, so it is
        // not run. A recurrent core still is: its state must advance.
        let explores = |e: f32| e >= 1.0;
        let all_explore = !self.sample
            && states.is_empty()
            && if epsilons.is_empty() {
                explores(self.epsilon)
            } else {
                epsilons.iter().copied().all(explores)
            };
        let loaded = self.net.loaded();
        let q: &[f32] = if !loaded || all_explore {
            &[]
        } else if states.is_empty() {
            self.net.forward_rows(obs, n)
        } else {
            self.net.forward_state(obs, n, states)
        };
        for i in 0..n {
            // Rows that explore draw as they would with the network run
            // (the draw below is below 1 always), so a seeded actor's
            // actions are the same either way.
            let a = if !loaded {
                if self.sample {
                    self.logps.push(-(k as f32).ln());
                }
                self.rng.random_range(0..k)
            } else if self.sample {
                let logits = &q[i * width..(i + 1) * width];
                let a = sample_softmax(logits, self.rng.random::<f32>());
                self.logps.push(log_softmax_at(logits, a));
                a
            } else if self.rng.random::<f32>() < epsilons.get(i).copied().unwrap_or(self.epsilon) {
                self.rng.random_range(0..k)
            } else {
                // Q = V + A - mean(A): the best action has the best A.
                argmax(&q[i * width + skip..(i + 1) * width])
            };
            actions.push(a as f32);
        }
    }
}

/// log softmax(`logits`)[`a`], never above 0.
pub fn log_softmax_at(logits: &[f32], a: usize) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let total: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    (logits[a] - max) - total.ln()
}

/// The index whose cumulative softmax probability first exceeds `u` in
/// [0, 1).
pub fn sample_softmax(logits: &[f32], u: f32) -> usize {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let total: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    let mut acc = 0.0;
    for (i, &l) in logits.iter().enumerate() {
        acc += (l - max).exp() / total;
        if u < acc {
            return i;
        }
    }
    logits.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::Core;

    /// With a recurrent core each env slot keeps its own state: slots
    /// acting together, in any order, pick what each picks acting alone,
    /// and a reset slot starts again from zeros.
    #[test]
    fn each_slot_keeps_its_own_recurrent_state() {
        let shape = NetShape::new(2, &[4], 3).with_core(Some(Core { size: 3, layers: 2 }));
        let params: Vec<f32> = (0..shape.numel())
            .map(|i| ((i as u64 * 2_654_435_761 % 1000) as f32 / 250.0) - 2.0)
            .collect::<Vec<f32>>();
        // No output bias: the actions follow the state.
        let n = params.len();
        let params = [&params[..n - 3], &[0.0; 3]].concat();
        let policy = || {
            let mut p = QPolicy::from_shape(shape.clone(), 1);
            p.epsilon = 0.0;
            p.load(1, &params).unwrap();
            p
        };
        let obs = |t: usize, slot: usize| {
            let sign = if (t + slot).is_multiple_of(3) {
                -1.0
            } else {
                1.0
            };
            [
                sign * (t as f32 - slot as f32),
                (t * slot) as f32 * 0.5 - 1.0,
            ]
        };
        let mut alone = Vec::new();
        for slot in 0..3 {
            let mut p = policy();
            let mut picks = Vec::new();
            for t in 0..6 {
                p.act_slots(Rows::Values(&obs(t, slot)), &[slot], &mut picks);
                alone.push((slot, t, picks[0]));
            }
        }
        let mut together = policy();
        let mut picks = Vec::new();
        let mut got = Vec::new();
        for t in 0..6 {
            let order = if t % 2 == 0 { [2, 0, 1] } else { [1, 2, 0] };
            let x: Vec<f32> = order.iter().flat_map(|&s| obs(t, s)).collect();
            together.act_slots(Rows::Values(&x), &order, &mut picks);
            got.extend(order.iter().zip(&picks).map(|(&s, &a)| (s, t, a)));
        }
        assert!(alone.iter().any(|a| a.2 != alone[0].2), "{alone:?}");
        got.sort_by_key(|&(s, t, _)| (s, t));
        assert_eq!(got, alone);
        let states = |p: &QPolicy| p.states.chunks(12).map(|s| s.to_vec()).collect::<Vec<_>>();
        assert!(
            states(&together)
                .iter()
                .all(|s| s.iter().any(|&v| v != 0.0))
        );
        together.reset_slot(1);
        assert_eq!(states(&together)[1], vec![0.0; 12]);
        assert!(states(&together)[2].iter().any(|&v| v != 0.0));
    }

    #[test]
    fn softmax_sampling_follows_the_probabilities() {
        // ln 3: probabilities 1/4 and 3/4.
        let logits = [0.0, 3f32.ln()];
        let n = 10_000;
        let ones = (0..n)
            .filter(|i| sample_softmax(&logits, (*i as f32 + 0.5) / n as f32) == 1)
            .count();
        assert_eq!(ones, 7_500);
        assert_eq!(sample_softmax(&[5.0, -50.0, 1.0], 0.999_999), 2);
        assert_eq!(sample_softmax(&[5.0, -50.0, 1.0], 0.0), 0);
    }

    /// A sampling policy says the log-probability of each action it
    /// picked: uniform before weights, the log softmax of its logits
    /// after; an epsilon-greedy one says none.
    #[test]
    fn a_sampling_policy_says_the_log_probability_of_what_it_picked() {
        let shape = NetShape::new(3, &[5], 4);
        let mut p = QPolicy::from_shape(shape.clone(), 3);
        p.sample = true;
        let obs = [0.3f32, -0.2, 0.9, -1.0, 0.5, 0.1];
        let mut actions = Vec::new();
        p.act(&obs, 2, &mut actions);
        assert_eq!(p.logps(), [-(4f32.ln()); 2]);
        let params: Vec<f32> = (0..shape.numel())
            .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.1)
            .collect();
        p.load(1, &params).unwrap();
        let mut net = NetCopy::new(shape);
        net.load(&params).unwrap();
        let logits = net.forward(&obs, 2).to_vec();
        for _ in 0..20 {
            p.act(&obs, 2, &mut actions);
            for i in 0..2 {
                let row = &logits[i * 4..(i + 1) * 4];
                let z: f32 = row.iter().map(|l| l.exp()).sum();
                let want = (row[actions[i] as usize].exp() / z).ln();
                assert!((p.logps()[i] - want).abs() < 1e-6, "{:?} {want}", p.logps());
                assert!(p.logps()[i] <= 0.0);
            }
        }
        p.sample = false;
        p.epsilon = 0.1;
        p.act(&obs, 2, &mut actions);
        assert!(p.logps().is_empty());
    }

    /// A real `NetCopy` that counts its forward passes.
    #[derive(Debug)]
    struct Counted(NetCopy, std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl Forward for Counted {
        fn net(&self) -> &NetShape {
            self.0.net()
        }
        fn load(&mut self, params: &[f32]) -> Result<(), String> {
            self.0.load(params)
        }
        fn loaded(&self) -> bool {
            self.0.loaded()
        }
        fn forward(&mut self, x: &[f32], batch: usize) -> &[f32] {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.forward(x, batch)
        }
    }

    /// When every row explores, the network is not run, and the actions
    /// are the draws it would have made with the network run (one uniform
    /// draw against epsilon, then the action); as soon as one row may act
    /// greedily, it runs.
    #[test]
    fn rows_that_all_explore_skip_the_network_and_draw_the_same_actions() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let shape = NetShape::new(3, &[8], 4);
        let calls = std::sync::Arc::new(AtomicUsize::new(0));
        let mut p = QPolicy::from_shape(shape.clone(), 7)
            .with_forward(Box::new(Counted(
                NetCopy::new(shape.clone()),
                calls.clone(),
            )))
            .unwrap();
        let params: Vec<f32> = (0..shape.numel()).map(|i| (i % 7) as f32 * 0.1).collect();
        p.load(1, &params).unwrap();
        let obs = vec![0.5f32; 3 * 5];
        let mut actions = Vec::new();
        p.epsilon = 1.0;
        p.act(&obs, 5, &mut actions);
        assert_eq!(calls.load(Ordering::Relaxed), 0, "the network ran");
        let mut rng = Pcg64::seed_from_u64(7);
        let expected: Vec<f32> = (0..5)
            .map(|_| {
                assert!(rng.random::<f32>() < 1.0);
                rng.random_range(0..4) as f32
            })
            .collect();
        assert_eq!(actions, expected);
        // One greedy row among exploring ones: the network runs.
        p.act_states_eps(
            Rows::Values(&obs),
            5,
            &mut [],
            &[1.0, 1.0, 0.0, 1.0, 1.0],
            &mut actions,
        );
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        p.epsilon = 0.5;
        p.act(&obs, 5, &mut actions);
        assert_eq!(calls.load(Ordering::Relaxed), 2);
    }
}
