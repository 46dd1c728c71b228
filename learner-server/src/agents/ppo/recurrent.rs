//! PPO with a recurrent core: the held segments laid out as padded,
//! time-major sequences, each starting from the state its episode had
//! reached at the previous update (zeros at an episode's first step);
//! minibatches of whole segments, trained by backpropagation through each
//! segment; the states unfinished episodes reach kept for their next
//! segment.
//!
//! The states are recomputed here with the weights of each update, not
//! sent by actors: the old log probabilities are the update-time policy's
//! anyway, and an actor (or the `single` loop) only needs its own state to
//! act.

use super::{Actor, Ppo, Rollout};
use crate::agents::rows_on_device;
use crate::replay::ObsStore;
use rand::Rng;
use tch::{Kind, Tensor};

/// Segments as `[steps, batch]` sequences: sequence `b` holds segment
/// `b`'s steps, then the observation after its last step (read for the
/// bootstrap value, its state not kept), then padding; `steps` is a
/// multiple of the window `window`. Training cuts them into pieces of
/// `window` steps (truncated backpropagation through time), each starting
/// from the state the whole pass reached there.
struct Padded {
    steps: i64,
    batch: i64,
    window: i64,
    /// `[steps * batch, obs_dim]`, time-major.
    obs: Tensor,
    /// `[steps, batch]`: 1 at a segment's steps.
    keep: Tensor,
    /// Each step's padded row, in the segments' order (`[n]`).
    rows: Tensor,
    /// Each segment's bootstrap row (`[batch]`).
    boot_rows: Tensor,
}

impl Padded {
    fn new(segments: &[Rollout], obs_dim: usize, window: i64, device: tch::Device) -> Padded {
        let lens: Vec<i64> = segments.iter().map(|s| s.len() as i64).collect();
        let (n, batch) = (lens.iter().sum::<i64>(), lens.len() as i64);
        let longest = lens.iter().max().copied().unwrap_or(0) + 1;
        let steps = (longest + window - 1) / window * window;
        let parts: Vec<&ObsStore> = segments
            .iter()
            .map(|s| &s.obs)
            .chain(segments.iter().map(|s| &s.last_next))
            .collect();
        // Every step's row, every segment's last observation, one zero row.
        let all = rows_on_device(&parts, obs_dim, device);
        let zero = Tensor::zeros([1, obs_dim as i64], (Kind::Float, device));
        let all = Tensor::cat(&[all, zero], 0);
        let mut index = vec![n + batch; (steps * batch) as usize];
        let mut keep = vec![0f32; (steps * batch) as usize];
        let (mut rows, mut boot_rows) = (Vec::with_capacity(n as usize), Vec::new());
        let mut start = 0;
        for (b, &len) in lens.iter().enumerate() {
            let b = b as i64;
            for t in 0..len {
                index[(t * batch + b) as usize] = start + t;
                keep[(t * batch + b) as usize] = 1.0;
                rows.push(t * batch + b);
            }
            index[(len * batch + b) as usize] = n + b;
            boot_rows.push(len * batch + b);
            start += len;
        }
        let on = |v: &[i64]| Tensor::from_slice(v).to_device(device);
        Padded {
            steps,
            batch,
            window,
            obs: all.index_select(0, &on(&index)),
            keep: Tensor::from_slice(&keep)
                .view([steps, batch])
                .to_device(device),
            rows: on(&rows),
            boot_rows: on(&boot_rows),
        }
    }

    /// Windows of `window` steps.
    fn windows(&self) -> i64 {
        self.steps / self.window
    }

    /// Time steps `[c * window, (c + 1) * window)` of `x` (`[steps *
    /// batch, ...]`, time-major).
    fn window_of(&self, x: &Tensor, c: i64) -> Tensor {
        x.narrow(0, c * self.window * self.batch, self.window * self.batch)
    }

    /// `[n, ...]` values of the segments' steps, laid out as `[steps *
    /// batch, ...]` (zeros at the other rows).
    fn spread(&self, x: &Tensor) -> Tensor {
        let mut size = x.size();
        size[0] = self.steps * self.batch;
        Tensor::zeros(size.as_slice(), (x.kind(), x.device())).index_copy(0, &self.rows, x)
    }

    /// The pieces `cols` (piece `c * batch + b` is window `c` of sequence
    /// `b`) of `x` (`[steps * batch, ...]`): `[window * cols, ...]`,
    /// time-major.
    fn pick(&self, x: &Tensor, cols: &Tensor) -> Tensor {
        let mut size = x.size();
        let rest = size.split_off(1);
        let mut shape = vec![self.windows(), self.window, self.batch];
        shape.extend(&rest);
        let mut pieces = vec![self.window, self.windows() * self.batch];
        pieces.extend(&rest);
        let mut order: Vec<i64> = (0..shape.len() as i64).collect();
        order.swap(0, 1);
        let mut flat = vec![-1];
        flat.extend(&rest);
        x.view(shape.as_slice())
            .permute(order.as_slice())
            .reshape(pieces.as_slice())
            .index_select(1, cols)
            .reshape(flat.as_slice())
    }
}

impl Ppo {
    /// Zeros the state the `single` loop's actor acts from (its episode
    /// ended).
    pub(super) fn reset_actor_state(&mut self) {
        if let Actor::Discrete(q) = &mut self.actor {
            q.reset_slot(0);
        }
    }

    /// [`Ppo::update`] for a recurrent core; `segments[..finished]` are
    /// of episodes that ended.
    pub(super) fn update_recurrent(&mut self, segments: &[Rollout], finished: usize) -> u32 {
        let len = self.nets.policy_net.shape().state_len() as i64;
        let window = i64::from(self.max_seq_len);
        let seq = Padded::new(segments, self.obs_dim, window, self.device);
        let zeros = Tensor::zeros([2 * len], (Kind::Float, self.device));
        let starts: Vec<Tensor> = segments
            .iter()
            .map(|s| {
                self.carry
                    .remove(&s.episode)
                    .unwrap_or_else(|| zeros.copy())
            })
            .collect();
        let starts = Tensor::stack(&starts, 0);
        let actions: Vec<f32> = segments
            .iter()
            .flat_map(|s| s.actions.iter().copied())
            .collect();
        let actions = seq.spread(
            &Tensor::from_slice(&actions)
                .view([-1, 1])
                .to_device(self.device),
        );
        let run = |ppo: &Ppo, rows: &Tensor, starts: &Tensor, keep: &Tensor| {
            let n_mlp = ppo.nets.policy_net.numel();
            let policy = ppo.nets.policy.narrow(0, 0, n_mlp);
            let (logits, p_end) =
                ppo.nets
                    .policy_net
                    .forward_seq(&policy, rows, &starts.narrow(1, 0, len), keep);
            let (v, v_end) = ppo.nets.value_net.forward_seq(
                &ppo.nets.value,
                rows,
                &starts.narrow(1, len, len),
                keep,
            );
            (logits, v.squeeze_dim(1), Tensor::cat(&[p_end, v_end], 1))
        };
        // The whole pass, window by window: the old outputs, and the state
        // each piece starts from.
        let (old_logp, old_v, boot, piece_starts) = tch::no_grad(|| {
            let mut state = starts.shallow_clone();
            let (mut logits, mut values, mut piece_starts) = (Vec::new(), Vec::new(), Vec::new());
            for c in 0..seq.windows() {
                let keep = seq.keep.narrow(0, c * window, window);
                let (l, v, end) = run(self, &seq.window_of(&seq.obs, c), &state, &keep);
                piece_starts.push(std::mem::replace(&mut state, end));
                logits.push(l);
                values.push(v);
            }
            for (b, s) in segments.iter().enumerate().skip(finished) {
                self.carry.insert(s.episode, state.get(b as i64));
            }
            let v = Tensor::cat(&values, 0);
            let logp = self
                .log_prob_entropy_of(&Tensor::cat(&logits, 0), &actions)
                .0;
            (
                logp,
                v.index_select(0, &seq.rows),
                v.index_select(0, &seq.boot_rows),
                Tensor::cat(&piece_starts, 0),
            )
        });
        let adv = self.gae(segments, &old_v, &boot);
        let returns = &adv + &old_v;
        let (adv, returns) = (seq.spread(&adv), seq.spread(&returns));
        let old_v = seq.spread(&old_v);
        let keep = seq.keep.reshape([-1]);

        // Pieces with steps to train on, and how many each has; minibatches
        // of pieces, about `batch_size` steps each.
        let mut pieces: Vec<(i64, usize)> = Vec::new();
        for c in 0..seq.windows() {
            for (b, s) in segments.iter().enumerate() {
                let steps = (s.len() as i64 - c * window).clamp(0, window) as usize;
                if steps > 0 {
                    pieces.push((c * seq.batch + b as i64, steps));
                }
            }
        }
        let mut steps = 0;
        for _ in 0..self.cfg.n_epochs {
            for i in (1..pieces.len()).rev() {
                pieces.swap(i, self.rng.random_range(0..=i));
            }
            let mut chunk: Vec<i64> = Vec::new();
            let mut held = 0;
            for (k, &(piece, n)) in pieces.iter().enumerate() {
                chunk.push(piece);
                held += n;
                if held < self.cfg.batch_size as usize && k + 1 < pieces.len() {
                    continue;
                }
                let cols = Tensor::from_slice(&chunk).to_device(self.device);
                let kept = seq.pick(&keep, &cols);
                let (logits, v, _) = run(
                    self,
                    &seq.pick(&seq.obs, &cols),
                    &piece_starts.index_select(0, &cols),
                    &kept.view([window, -1]),
                );
                let at = kept.nonzero().squeeze_dim(1);
                let sel = |x: &Tensor| seq.pick(x, &cols).index_select(0, &at);
                let (logp, entropy) =
                    self.log_prob_entropy_of(&logits.index_select(0, &at), &sel(&actions));
                self.loss_step(
                    (logp, entropy, v.index_select(0, &at)),
                    &sel(&old_logp),
                    &sel(&old_v),
                    &sel(&adv),
                    &sel(&returns),
                );
                steps += 1;
                chunk.clear();
                held = 0;
            }
        }
        self.actor_fresh = false;
        steps
    }
}
