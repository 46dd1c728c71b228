//! Held segments as padded, time-major sequences for a network with a
//! recurrent core ([`Padded`]), and the pass that runs a network over them
//! window by window ([`windowed`]): what PPO's and IMPALA's recurrent
//! updates share.

use super::rollout::{Rollout, lasts_on_device};
use crate::nets::FlatNet;
use tch::{Kind, Tensor};

/// Segments as `[steps, batch]` sequences: sequence `b` holds segment
/// `b`'s steps, then the observation after its last step (read for the
/// bootstrap value, its state not kept), then padding; `steps` is a
/// multiple of the window `window`. Training cuts them into pieces of
/// `window` steps (truncated backpropagation through time), each starting
/// from the state the whole pass reached there.
pub(crate) struct Padded {
    pub steps: i64,
    pub batch: i64,
    pub window: i64,
    /// `[steps * batch, obs_dim]`, time-major.
    pub obs: Tensor,
    /// `[steps, batch]`: 1 at a segment's steps.
    pub keep: Tensor,
    /// Each step's padded row, in the segments' order (`[n]`).
    pub rows: Tensor,
    /// Each segment's bootstrap row (`[batch]`).
    pub boot_rows: Tensor,
}

impl Padded {
    pub fn new(segments: &[&Rollout], obs_dim: usize, window: i64, device: tch::Device) -> Padded {
        let lens: Vec<i64> = segments.iter().map(|s| s.len() as i64).collect();
        let (n, batch) = (lens.iter().sum::<i64>(), lens.len() as i64);
        let longest = lens.iter().max().copied().unwrap_or(0) + 1;
        let steps = (longest + window - 1) / window * window;
        // Every step's row, every segment's last observation, one zero row.
        let zero = Tensor::zeros([1, obs_dim as i64], (Kind::Float, device));
        let all = Tensor::cat(
            &[
                Rollout::obs_on_device(segments, device),
                lasts_on_device(segments, obs_dim, device),
                zero,
            ],
            0,
        );
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
    pub fn windows(&self) -> i64 {
        self.steps / self.window
    }

    /// Time steps `[c * window, (c + 1) * window)` of `x` (`[steps *
    /// batch, ...]`, time-major).
    pub fn window_of(&self, x: &Tensor, c: i64) -> Tensor {
        x.narrow(0, c * self.window * self.batch, self.window * self.batch)
    }

    /// `[n, ...]` values of the segments' steps, laid out as `[steps *
    /// batch, ...]` (zeros at the other rows).
    pub fn spread(&self, x: &Tensor) -> Tensor {
        let mut size = x.size();
        size[0] = self.steps * self.batch;
        Tensor::zeros(size.as_slice(), (x.kind(), x.device())).index_copy(0, &self.rows, x)
    }

    /// The pieces `cols` (piece `c * batch + b` is window `c` of sequence
    /// `b`) of `x` (`[steps * batch, ...]`): `[window * cols, ...]`,
    /// time-major.
    pub fn pick(&self, x: &Tensor, cols: &Tensor) -> Tensor {
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

/// Runs `net` with `params` over `seq` window by window from the states
/// `starts` (`[batch, state_len]`), in the caller's grad mode: the outputs
/// (`[steps * batch, output]`, time-major), the state each piece starts
/// from (`[windows * batch, state_len]`, piece `c * batch + b`), and the
/// states after each sequence's last kept step.
pub(crate) fn windowed(
    net: &FlatNet,
    params: &Tensor,
    seq: &Padded,
    starts: &Tensor,
) -> (Tensor, Tensor, Tensor) {
    let mut state = starts.shallow_clone();
    let (mut outs, mut piece_starts) = (Vec::new(), Vec::new());
    for c in 0..seq.windows() {
        let keep = seq.keep.narrow(0, c * seq.window, seq.window);
        let (out, end) = net.forward_seq(params, &seq.window_of(&seq.obs, c), &state, &keep);
        piece_starts.push(std::mem::replace(&mut state, end));
        outs.push(out);
    }
    (Tensor::cat(&outs, 0), Tensor::cat(&piece_starts, 0), state)
}

/// Runs `net` with `params` over every piece of `seq` at once (each from
/// its state in `piece_starts`, `[windows * batch, state_len]`, as
/// [`windowed`] gives them), with gradients: backpropagation through each
/// piece. Returns the outputs in `seq`'s padded, time-major layout
/// (`[steps * batch, output]`).
pub(crate) fn all_pieces(
    net: &FlatNet,
    params: &Tensor,
    seq: &Padded,
    piece_starts: &Tensor,
) -> Tensor {
    let (window, batch) = (seq.window, seq.batch);
    let pieces = seq.windows() * batch;
    let device = seq.obs.device();
    let all = Tensor::arange(pieces, (Kind::Int64, device));
    let keep = seq
        .pick(&seq.keep.reshape([-1]), &all)
        .view([window, pieces]);
    let (out, _) = net.forward_seq(params, &seq.pick(&seq.obs, &all), piece_starts, &keep);
    // Row t * batch + b of the padded layout is row
    // (t % window) * pieces + (t / window) * batch + b of the pieces'.
    let back: Vec<i64> = (0..seq.steps * batch)
        .map(|r| {
            let (t, b) = (r / batch, r % batch);
            (t % window) * pieces + (t / window) * batch + b
        })
        .collect();
    out.index_select(0, &Tensor::from_slice(&back).to_device(device))
}

/// The states `segments` start from (`[segments, width]`, the policy's
/// then the value's): each one's carried state (taken out of `carry`), or
/// zeros for an episode not seen before; the policy's part is the actor's
/// where it said what it acted the segment's first step from.
pub(crate) fn start_states(
    carry: &mut std::collections::HashMap<u64, Tensor>,
    segments: &[&Rollout],
    width: i64,
    device: tch::Device,
) -> Tensor {
    let zeros = Tensor::zeros([width], (Kind::Float, device));
    let starts: Vec<Tensor> = segments
        .iter()
        .map(|s| {
            let mut start = carry.remove(&s.episode).unwrap_or_else(|| zeros.copy());
            if let Some(actor) = &s.start {
                let n = actor.len() as i64;
                let actor = Tensor::from_slice(actor).to_device(device);
                start = Tensor::cat(&[actor, start.narrow(0, n, width - n)], 0);
            }
            start
        })
        .collect();
    Tensor::stack(&starts, 0)
}

/// A [`windowed`] pass of both of `nets`' networks (the policy's state
/// first in each row of `starts`, `[batch, 2 * state_len]`): the policy's
/// outputs, the values `[steps * batch]`, each piece's start states and
/// each sequence's end states, both in the same two-network layout.
pub(crate) fn windowed_both(
    nets: &super::policy_value::PolicyValue,
    seq: &Padded,
    starts: &Tensor,
) -> (Tensor, Tensor, Tensor, Tensor) {
    let len = starts.size()[1] / 2;
    let (logits, p_starts, p_end) = windowed(
        &nets.policy_net,
        &nets.policy,
        seq,
        &starts.narrow(1, 0, len),
    );
    let (values, v_starts, v_end) = windowed(
        &nets.value_net,
        &nets.value,
        seq,
        &starts.narrow(1, len, len),
    );
    (
        logits,
        values.squeeze_dim(1),
        Tensor::cat(&[p_starts, v_starts], 1),
        Tensor::cat(&[p_end, v_end], 1),
    )
}
