//! [`FlatNet`]'s MLP on host slices, for the hand-written passes on the
//! CPU (`manual.rs`): each layer one BLAS product (`blas.rs`) with its
//! bias and ReLU in plain loops, and the backward the same way, straight
//! into the flat gradient.

use super::FlatNet;
use crate::device::{host_values, host_values_mut};
use rlfleet_kernels::gemm::gemm;
use tch::{Device, Kind, Tensor};

impl FlatNet {
    /// The MLP layer `i`'s (fan-in, outputs) and its weight's and bias's
    /// ranges in the flat vector.
    fn layer(&self, i: usize, offsets: &[usize]) -> ((usize, usize), [std::ops::Range<usize>; 2]) {
        let (fan_in, out) = (self.sizes[i] as usize, self.sizes[i + 1] as usize);
        let part = 2 * self.convs.len() + 2 * i;
        let (w, b) = (offsets[part], offsets[part + 1]);
        ((fan_in, out), [w..w + out * fan_in, b..b + out])
    }

    /// The MLP from `h` (`[batch, features]`, contiguous host f32) under
    /// the flat parameters `params`, pushing each layer's input onto
    /// `inputs`. Returns the outputs `[batch, outputs]`.
    pub(super) fn mlp_host(
        &self,
        params: &[f32],
        mut h: Tensor,
        inputs: &mut Vec<Tensor>,
    ) -> Tensor {
        let offsets = &self.offsets;
        let batch = h.size()[0] as usize;
        let layers = self.sizes.len() - 1;
        for i in 0..layers {
            let ((fan_in, out), [w, b]) = self.layer(i, offsets);
            let mut y = Tensor::empty([batch as i64, out as i64], (Kind::Float, Device::Cpu));
            let x = host_values(&h).expect("the MLP's input: contiguous host f32");
            let ys = host_values_mut(&mut y).expect("a fresh CPU f32 tensor");
            gemm((batch, out, fan_in), x, false, &params[w], true, ys);
            let bias = &params[b];
            for row in ys.chunks_exact_mut(out) {
                for (v, b) in row.iter_mut().zip(bias) {
                    *v += b;
                }
                if i + 1 < layers {
                    for v in row.iter_mut() {
                        *v = v.max(0.0);
                    }
                }
            }
            inputs.push(std::mem::replace(&mut h, y));
        }
        h
    }

    /// The MLP's backward from `d_out` (`[batch, outputs]`): each layer's
    /// weight and bias gradients written into `grad` (the flat gradient),
    /// from its input in `inputs` (as [`FlatNet::mlp_host`] pushed them).
    /// Returns the gradient with respect to the MLP's input, before the
    /// torso's ReLU (`None` without a torso).
    pub(super) fn mlp_backward_host(
        &self,
        params: &[f32],
        inputs: &[Tensor],
        d_out: &[f32],
        grad: &mut [f32],
    ) -> Option<Vec<f32>> {
        let offsets = &self.offsets;
        let layers = self.sizes.len() - 1;
        let batch = d_out.len() / self.sizes[layers] as usize;
        let mut d = d_out.to_vec();
        for i in (0..layers).rev() {
            let ((fan_in, out), [w, b]) = self.layer(i, offsets);
            let a = host_values(&inputs[i]).expect("the forward's own tensors");
            gemm(
                (out, fan_in, batch),
                &d,
                true,
                a,
                false,
                &mut grad[w.clone()],
            );
            let g_bias = &mut grad[b];
            g_bias.fill(0.0);
            for row in d.chunks_exact(out) {
                for (g, v) in g_bias.iter_mut().zip(row) {
                    *g += v;
                }
            }
            if i == 0 && self.convs.is_empty() {
                return None;
            }
            let mut prev = vec![0f32; batch * fan_in];
            gemm(
                (batch, fan_in, out),
                &d,
                false,
                &params[w],
                false,
                &mut prev,
            );
            if i == 0 {
                return Some(prev);
            }
            // Through the previous layer's ReLU: its output is `a`.
            for (p, &x) in prev.iter_mut().zip(a) {
                if x <= 0.0 {
                    *p = 0.0;
                }
            }
            d = prev;
        }
        unreachable!("the loop returns at the first layer")
    }
}
