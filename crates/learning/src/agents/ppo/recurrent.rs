//! PPO with a recurrent core: the held segments laid out as padded,
//! time-major sequences; minibatches of whole segments, trained by
//! backpropagation through each segment. A segment's policy starts from
//! the state its actor acted its first step from, where the actor said
//! (`Learn::acted_from`); otherwise, and always for the value network,
//! from the state its episode reached at the previous update (zeros at an
//! episode's first step), kept here for unfinished episodes. The old log
//! probabilities are the actors' own, computed with the state each acted
//! from.

use super::log_prob::or_current;
use super::{Actor, Ppo, Rollout};
use crate::agents::sequences::{Padded, start_states, windowed_both};
use rand::Rng;
use tch::Tensor;

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
        let parts: Vec<&Rollout> = segments.iter().collect();
        let seq = Padded::new(&parts, self.obs_dim, window, self.device);
        let starts = start_states(&mut self.carry, &parts, 2 * len, self.device);
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
        let (carried, missing) = self.carried_logp(segments);
        // The whole pass, window by window: the old outputs, and the state
        // each piece starts from.
        // (A core's policy is discrete: its parameters are the network's.)
        let (current_logp, old_v, boot, piece_starts) = tch::no_grad(|| {
            let (logits, v, piece_starts, ends) = windowed_both(&self.nets, &seq, &starts);
            for (b, s) in segments.iter().enumerate().skip(finished) {
                self.carry.insert(s.episode, ends.get(b as i64));
            }
            let logp = self
                .log_prob_entropy_of(&self.nets.policy, &logits, &actions)
                .0;
            (
                logp,
                v.index_select(0, &seq.rows),
                v.index_select(0, &seq.boot_rows),
                piece_starts,
            )
        });
        // The steps' own behaviour log-probabilities, the update-time
        // policy's where a step carries none.
        let carried = seq.spread(&carried);
        let old_logp = if missing {
            or_current(&carried, &current_logp)
        } else {
            carried
        };
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
                let (logp, entropy) = self.log_prob_entropy_of(
                    &self.nets.policy,
                    &logits.index_select(0, &at),
                    &sel(&actions),
                );
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
