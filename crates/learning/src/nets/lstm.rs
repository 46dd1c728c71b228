//! [`FlatNet::forward_seq`]: a network with a recurrent core run over a
//! batch of sequences in libtorch — the torso and hidden layers on every
//! step at once, the LSTM step by step from each sequence's start state,
//! the output layer on every step at once — so that training
//! backpropagates through the whole sequence.

use super::FlatNet;
use tch::{Kind, Tensor};

impl FlatNet {
    /// Outputs for `steps` steps of `batch` sequences, and the states they
    /// end in.
    ///
    /// `x` is `[steps * batch, obs_dim]`, time-major (row `t * batch + b`
    /// is sequence `b`'s step `t`); `state` is `[batch, state_len]`, each
    /// sequence's state before its first step (per layer `h` then `c`, as
    /// `rlfleet_shared::nets::Core` lays it out); `keep` is `[steps,
    /// batch]` f32, 1 where a step advances the state and 0 where the state
    /// is held (padding after a short sequence, or a last step whose output
    /// is read but whose state is not kept). Returns `[steps * batch,
    /// output]` and the states after each sequence's last kept step,
    /// `[batch, state_len]`.
    pub fn forward_seq(
        &self,
        params: &Tensor,
        x: &Tensor,
        state: &Tensor,
        keep: &Tensor,
    ) -> (Tensor, Tensor) {
        let core = *self.shape.core().expect("a network with a recurrent core");
        let (h, core_parts, head) = self.around_core(params, x);
        let (steps, batch) = (keep.size()[0], keep.size()[1]);
        let units = core.size as i64;
        let mut seq = h.view([steps, batch, -1]);
        let n = self.sizes.len();
        let mut ends = Vec::with_capacity(2 * core.layers);
        for (l, p) in core_parts.chunks_exact(4).enumerate() {
            let input = seq.size()[2];
            let w_ih = p[0].view([4 * units, input]);
            let w_hh_t = p[1].view([4 * units, units]).tr();
            // The input's share of every step's gates at once.
            let x_gates = seq.linear(&w_ih, Some(&(&p[2] + &p[3])));
            let l = l as i64;
            let mut hs = state.narrow(1, 2 * l * units, units);
            let mut cs = state.narrow(1, (2 * l + 1) * units, units);
            let mut outs = Vec::with_capacity(steps as usize);
            for t in 0..steps {
                let gates = x_gates.get(t) + hs.matmul(&w_hh_t);
                let g = gates.chunk(4, 1);
                let c_new = g[1].sigmoid() * &cs + g[0].sigmoid() * g[2].tanh();
                let h_new = g[3].sigmoid() * c_new.tanh();
                let k = keep.get(t).unsqueeze(1);
                hs = &hs + &k * (&h_new - &hs);
                cs = &cs + &k * (c_new - &cs);
                outs.push(h_new);
            }
            seq = Tensor::stack(&outs, 0);
            ends.push(hs);
            ends.push(cs);
        }
        let out_dim = self.sizes[n - 1];
        let out = seq
            .view([steps * batch, units])
            .linear(&head[0].view([out_dim, units]), Some(&head[1]));
        (out, Tensor::cat(&ends, 1))
    }
}

impl FlatNet {
    /// The layers before the core run on every row of `x`, the core's
    /// parameters (per layer `w_ih`, `w_hh`, `b_ih`, `b_hh`, flat) and the
    /// output layer's (weight, bias).
    fn around_core(&self, params: &Tensor, x: &Tensor) -> (Tensor, Vec<Tensor>, Vec<Tensor>) {
        let core = *self.shape.core().expect("a network with a recurrent core");
        let mut parts = self.shared_parts(params);
        let n = self.sizes.len();
        let head = parts.split_off(parts.len() - 2);
        let core_parts = parts.split_off(parts.len() - 4 * core.layers);
        let hidden_parts = parts.split_off(2 * self.convs.len());
        let conv_parts = parts;
        let x = &x.to_kind(Kind::Float);
        let mut h = match self.shape.torso() {
            Some(torso) => self.torso(torso, &conv_parts, x),
            None => x.shallow_clone(),
        };
        for (w, wb) in self.sizes[..n - 1]
            .windows(2)
            .zip(hidden_parts.chunks_exact(2))
        {
            h = h.linear(&wb[0].view([w[1], w[0]]), Some(&wb[1]));
            h = h.relu();
        }
        (h, core_parts, head)
    }

    /// [`FlatNet::forward_seq`] where every step of every sequence
    /// advances the state (no padding to hold it through), in ATen's own
    /// LSTM — the fused kernel PyTorch's `nn.LSTM` runs, backward
    /// included: R2D2's training pass, whose padded steps are masked out of
    /// the loss instead. Returns the outputs `[steps * batch, output]` and
    /// the states after the last step, `[batch, state_len]`.
    pub fn forward_seq_all(
        &self,
        params: &Tensor,
        x: &Tensor,
        state: &Tensor,
        steps: i64,
    ) -> (Tensor, Tensor) {
        let core = *self.shape.core().expect("a network with a recurrent core");
        let (h, core_parts, head) = self.around_core(params, x);
        let (layers, units) = (core.layers as i64, core.size as i64);
        let batch = state.size()[0];
        let seq = h.view([steps, batch, -1]);
        let weights = core_weights(&core_parts, units, seq.size()[2]);
        // [batch, layers, (h, c), units] as the core lays it out.
        let st = state.view([batch, layers, 2, units]);
        let h0 = st.select(2, 0).transpose(0, 1).contiguous();
        let c0 = st.select(2, 1).transpose(0, 1).contiguous();
        let (out, h_n, c_n) = seq.lstm(&[h0, c0], &weights, true, layers, 0.0, true, false, false);
        let out_dim = self.sizes[self.sizes.len() - 1];
        let out = out
            .view([steps * batch, units])
            .linear(&head[0].view([out_dim, units]), Some(&head[1]));
        let end = Tensor::stack(&[h_n, c_n], 2)
            .permute([1, 0, 2, 3])
            .reshape([batch, -1]);
        (out, end)
    }
}

/// The core's parameters as ATen's `lstm` takes them: per layer `w_ih`
/// `[4 units, input]`, `w_hh` `[4 units, units]`, `b_ih`, `b_hh`. They open
/// the network's own order (`layout.rs`), so where the flat vector fills
/// its storage from the start (every parameter tensor the learner makes),
/// cuDNN runs on them in place.
fn core_weights(core_parts: &[Tensor], units: i64, input: i64) -> Vec<Tensor> {
    let mut weights = Vec::with_capacity(core_parts.len());
    let mut input = input;
    for p in core_parts.chunks_exact(4) {
        weights.push(p[0].view([4 * units, input]));
        weights.push(p[1].view([4 * units, units]));
        weights.push(p[2].shallow_clone());
        weights.push(p[3].shallow_clone());
        input = units;
    }
    weights
}

impl FlatNet {
    /// `params` cut into the network's parts with one split, listed in the
    /// shared order.
    fn shared_parts(&self, params: &Tensor) -> Vec<Tensor> {
        self.order
            .shared_from_own(params.split_with_sizes(&self.parts, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_shared::nets::{Core, Forward, NetCopy, NetShape, Rows};
    use tch::Device;

    /// Stepped one step at a time with each sequence's state, the
    /// plain-Rust copy actors act with gives the outputs and end states the
    /// sequence pass gives, held states included (two layers, hidden
    /// layers before the core, sequences of different lengths).
    #[test]
    fn the_sequence_pass_agrees_with_the_plain_rust_steps() {
        let core = Core { size: 5, layers: 2 };
        let shape = NetShape::new(3, &[8], 4).with_core(Some(core));
        let net = FlatNet::from_shape(shape.clone());
        assert_eq!(net.numel() as usize, shape.numel());
        tch::manual_seed(3);
        let p = net.init(Device::Cpu);
        let (steps, batch, sl) = (6usize, 3usize, core.state_len());
        let x: Vec<f32> = (0..steps * batch * 3)
            .map(|i| ((i * 37) % 17) as f32 / 8.0 - 1.0)
            .collect();
        let state0: Vec<f32> = (0..batch * sl)
            .map(|i| ((i % 7) as f32 - 3.0) / 5.0)
            .collect();
        // Sequence 1 holds its state after step 2, sequence 2 after step 4.
        let lens = [6, 3, 5];
        let keep: Vec<f32> = (0..steps * batch)
            .map(|i| f32::from(u8::from(i / batch < lens[i % batch])))
            .collect();
        let (out, end) = net.forward_seq(
            &p,
            &Tensor::from_slice(&x).view([(steps * batch) as i64, 3]),
            &Tensor::from_slice(&state0).view([batch as i64, sl as i64]),
            &Tensor::from_slice(&keep).view([steps as i64, batch as i64]),
        );
        let out: Vec<f32> = Vec::try_from(out.view([-1])).unwrap();
        let end: Vec<f32> = Vec::try_from(end.view([-1])).unwrap();
        let mut copy = NetCopy::new(shape);
        copy.load(&net.to_shared(Vec::<f32>::try_from(&p).unwrap()))
            .unwrap();
        for b in 0..batch {
            let mut s = state0[b * sl..(b + 1) * sl].to_vec();
            for t in 0..steps {
                let row = &x[(t * batch + b) * 3..(t * batch + b + 1) * 3];
                let mut next = s.clone();
                let y = copy.forward_state(Rows::Values(row), 1, &mut next).to_vec();
                let want = &out[(t * batch + b) * 4..(t * batch + b + 1) * 4];
                for (a, w) in y.iter().zip(want) {
                    assert!((a - w).abs() < 1e-5, "seq {b} step {t}: {a} vs {w}");
                }
                if t < lens[b] {
                    s = next;
                }
            }
            for (a, w) in s.iter().zip(&end[b * sl..(b + 1) * sl]) {
                assert!((a - w).abs() < 1e-5, "seq {b} end state: {a} vs {w}");
            }
        }
    }

    /// ATen's fused LSTM gives what the step-by-step pass gives when every
    /// step advances (two layers, hidden layers before the core): the same
    /// outputs, end states and gradient.
    #[test]
    fn the_fused_pass_agrees_with_the_step_by_step_one() {
        let core = Core { size: 5, layers: 2 };
        let net = FlatNet::from_shape(NetShape::new(3, &[8], 4).with_core(Some(core)));
        let p = net.init(Device::Cpu).set_requires_grad(true);
        let (steps, batch) = (7i64, 3i64);
        let x = Tensor::randn([steps * batch, 3], (Kind::Float, Device::Cpu));
        let s0 = Tensor::randn([batch, core.state_len() as i64], (Kind::Float, Device::Cpu));
        let keep = Tensor::ones([steps, batch], (Kind::Float, Device::Cpu));
        let (a, a_end) = net.forward_seq(&p, &x, &s0, &keep);
        let (b, b_end) = net.forward_seq_all(&p, &x, &s0, steps);
        let diff = (&a - &b).abs().max().double_value(&[]);
        assert!(diff < 1e-5, "outputs differ by {diff}");
        let diff = (&a_end - &b_end).abs().max().double_value(&[]);
        assert!(diff < 1e-5, "end states differ by {diff}");
        let mut p = p;
        let mut grads = Vec::new();
        for y in [&a, &b] {
            p.zero_grad();
            (y * y).sum(Kind::Float).backward();
            grads.push(p.grad().copy());
        }
        let (ga, gb) = (&grads[0], &grads[1]);
        let diff = (ga - gb).abs().max().double_value(&[]);
        assert!(diff < 1e-4, "gradients differ by {diff}");
    }

    /// The weights the fused pass hands to ATen (and so to cuDNN) lie
    /// back to back from the flat vector's start in `lstm`'s order, and
    /// the gradient reaches each part.
    #[test]
    fn the_core_weights_open_the_flat_vector() {
        let core = Core { size: 5, layers: 2 };
        let net = FlatNet::from_shape(NetShape::new(3, &[8], 4).with_core(Some(core)));
        let mut p = net.init(Device::Cpu).set_requires_grad(true);
        let x = Tensor::randn([4, 3], (Kind::Float, Device::Cpu));
        let (h, core_parts, _) = net.around_core(&p, &x);
        let w = core_weights(&core_parts, 5, h.size()[1]);
        assert_eq!(w.len(), 8);
        let shapes: Vec<Vec<i64>> = w.iter().map(Tensor::size).collect();
        assert_eq!(shapes[0], [20, 8]);
        assert_eq!(shapes[4], [20, 5]);
        assert_eq!(shapes[1], [20, 5]);
        assert_eq!(shapes[3], [20]);
        let mut at = p.data_ptr() as usize;
        for t in &w {
            assert_eq!(t.data_ptr() as usize, at, "a gap before {:?}", t.size());
            at += t.numel() * 4;
        }
        let weighted: Vec<Tensor> = w
            .iter()
            .enumerate()
            .map(|(i, t)| (t * (i as f64 + 1.0)).sum(Kind::Float))
            .collect();
        p.zero_grad();
        Tensor::stack(&weighted, 0).sum(Kind::Float).backward();
        // Layer 0's w_ih opens the vector with weight 1; layer 1's b_hh
        // (the core's last part) carries 8.
        let g = p.grad();
        assert_eq!(g.double_value(&[0]), 1.0);
        let core_len: i64 = w.iter().map(|t| t.numel() as i64).sum();
        assert_eq!(g.double_value(&[core_len - 1]), 8.0);
        assert_eq!(g.double_value(&[core_len]), 0.0);
    }
}
