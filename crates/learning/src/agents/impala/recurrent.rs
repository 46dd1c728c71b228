//! IMPALA with a recurrent core: the held unrolls as padded sequences
//! (`agents::sequences`), run window by window (`model.max_seq_len`). An
//! unroll's policy starts from the state its actor acted its first step
//! from, where the actor said; otherwise, and always for the value
//! network, from the state its episode reached at the previous update
//! (zeros at an episode's first step). The behaviour log-probs μ are the
//! actors' own; each gradient step runs the current networks over every
//! piece at once (truncated backpropagation through time) and takes
//! V-trace's step on the result.

use super::{Impala, Unroll};
use crate::agents::rollout::{self, Rollout};
use crate::agents::sequences::{Padded, all_pieces, start_states, windowed_both};
use std::collections::BTreeSet;
use tch::{Kind, Tensor};

impl Impala {
    /// [`Impala::update`] for a recurrent core; unrolls of episodes in
    /// `finished` ended.
    pub(super) fn update_recurrent(&mut self, unrolls: &[Unroll], finished: &BTreeSet<u64>) -> u32 {
        let len = self.nets.policy_net.shape().state_len() as i64;
        let window = i64::from(self.max_seq_len);
        let parts: Vec<&Rollout> = unrolls.iter().collect();
        let seq = Padded::new(&parts, self.obs_dim, window, self.device);
        let starts = start_states(&mut self.carry, &parts, 2 * len, self.device);
        let padded_actions = seq.spread(&self.actions(unrolls));
        let logp_of = |logits: &Tensor| {
            logits
                .log_softmax(1, Kind::Float)
                .gather(1, &padded_actions, false)
                .squeeze_dim(1)
        };
        let mu = rollout::behaviour(unrolls);
        // The pieces' start states and the unfinished episodes' end states
        // from the current weights.
        let piece_starts = tch::no_grad(|| {
            let (_, _, piece_starts, ends) = windowed_both(&self.nets, &seq, &starts);
            for (b, u) in unrolls.iter().enumerate() {
                if !finished.contains(&u.episode) {
                    self.carry.insert(u.episode, ends.get(b as i64));
                }
            }
            piece_starts
        });
        for _ in 0..self.cfg.n_epochs {
            // Every piece at once, rows in the padded layout.
            let logits = all_pieces(
                &self.nets.policy_net,
                &self.nets.policy,
                &seq,
                &piece_starts.narrow(1, 0, len),
            );
            let values = all_pieces(
                &self.nets.value_net,
                &self.nets.value,
                &seq,
                &piece_starts.narrow(1, len, len),
            )
            .squeeze_dim(1);
            let logp_all = logits.log_softmax(1, Kind::Float);
            let entropy = -(logp_all.exp() * &logp_all).sum_dim_intlist(1, false, Kind::Float);
            let logp = logp_of(&logits);
            let at = |x: &Tensor| x.index_select(0, &seq.rows);
            let boot = values.detach().index_select(0, &seq.boot_rows);
            self.vtrace_step(unrolls, (at(&logp), at(&entropy), at(&values)), &boot, &mu);
        }
        self.actor.stale();
        self.cfg.n_epochs
    }
}
