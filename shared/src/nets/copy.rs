//! [`NetCopy`]: a [`NetShape`]'s forward pass in plain Rust over its own
//! copy of the parameters: the torso's convolutions (im2col, `conv.rs`),
//! then the MLP through one vectorised dense kernel.

use super::conv::ConvCopy;
use super::{Forward, NetShape};

impl Forward for NetCopy {
    fn net(&self) -> &NetShape {
        NetCopy::net(self)
    }
    fn load(&mut self, params: &[f32]) -> Result<(), String> {
        NetCopy::load(self, params)
    }
    fn loaded(&self) -> bool {
        NetCopy::loaded(self)
    }
    fn forward(&mut self, x: &[f32], batch: usize) -> &[f32] {
        NetCopy::forward(self, x, batch)
    }
}

/// A [`NetShape`] with its own copy of the parameters and reusable buffers.
///
/// The copy keeps each weight transposed (`[fan_in, fan_out]`), so a layer
/// is a sum of input-scaled weight rows: contiguous, no horizontal sums,
/// and vectorised (AVX2 + FMA when the CPU has them).
#[derive(Debug, Clone)]
pub struct NetCopy {
    net: NetShape,
    /// The torso's copy of its parameters, and its buffers.
    conv: ConvCopy,
    /// Per MLP layer: transposed weight, then bias (empty until loaded).
    params: Vec<f32>,
    out: Vec<f32>,
    scratch: Vec<f32>,
}

impl NetCopy {
    /// A network with no parameters yet ([`NetCopy::loaded`] is false).
    pub fn new(net: NetShape) -> NetCopy {
        NetCopy {
            net,
            conv: ConvCopy::default(),
            params: Vec::new(),
            out: Vec::new(),
            scratch: Vec::new(),
        }
    }

    pub fn net(&self) -> &NetShape {
        &self.net
    }

    pub fn loaded(&self) -> bool {
        !self.params.is_empty()
    }

    /// Copies in flat parameters (the learner's layout); refuses a wrong
    /// count, naming both.
    pub fn load(&mut self, params: &[f32]) -> Result<(), String> {
        self.net.check_params(params.len())?;
        let mut offset = 0;
        if let Some(torso) = self.net.torso() {
            self.conv.load(torso, params);
            offset = torso.numel();
        }
        self.params.clear();
        for w in self.net.sizes().windows(2) {
            let (fan_in, fan_out) = (w[0], w[1]);
            let weight = &params[offset..offset + fan_in * fan_out];
            for k in 0..fan_in {
                self.params
                    .extend((0..fan_out).map(|j| weight[j * fan_in + k]));
            }
            offset += fan_in * fan_out;
            self.params
                .extend_from_slice(&params[offset..offset + fan_out]);
            offset += fan_out;
        }
        Ok(())
    }

    /// Outputs for `batch` rows of `x` (`batch * output_dim` values).
    /// Panics when nothing is loaded or `x` has the wrong size.
    pub fn forward(&mut self, x: &[f32], batch: usize) -> &[f32] {
        assert!(self.loaded(), "forward before any weights were loaded");
        assert_eq!(x.len(), batch * self.net.obs_dim(), "input size");
        let sizes = self.net.sizes();
        let n_layers = sizes.len() - 1;
        self.out.clear();
        match self.net.torso() {
            Some(torso) => {
                let features = self.conv.forward(torso, x, batch);
                self.out.extend_from_slice(features);
            }
            None => self.out.extend_from_slice(x),
        }
        let mut offset = 0;
        for (layer, w) in sizes.windows(2).enumerate() {
            let (fan_in, fan_out) = (w[0], w[1]);
            let weight_t = &self.params[offset..offset + fan_in * fan_out];
            offset += fan_in * fan_out;
            let bias = &self.params[offset..offset + fan_out];
            offset += fan_out;
            self.scratch.clear();
            self.scratch.resize(batch * fan_out, 0.0);
            let relu = layer + 1 < n_layers;
            dense(&self.out, weight_t, bias, relu, fan_in, &mut self.scratch);
            std::mem::swap(&mut self.out, &mut self.scratch);
        }
        &self.out
    }
}

/// `y[b] = act(bias + Σ_k x[b][k] · w_t[k])` for every row `b`, with the
/// fastest kernel this CPU runs.
pub(crate) fn dense(
    x: &[f32],
    w_t: &[f32],
    bias: &[f32],
    relu: bool,
    fan_in: usize,
    y: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU was just checked to have AVX2 and FMA, the only
        // requirement of a `target_feature` function. (The workspace denies
        // unsafe code; this is its one allowed use.)
        #[allow(unsafe_code)]
        unsafe {
            dense_avx2(x, w_t, bias, relu, fan_in, y)
        };
        return;
    }
    dense_kernel::<false>(x, w_t, bias, relu, fan_in, y);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dense_avx2(x: &[f32], w_t: &[f32], bias: &[f32], relu: bool, fan_in: usize, y: &mut [f32]) {
    dense_kernel::<true>(x, w_t, bias, relu, fan_in, y);
}

/// The kernel; inlined into each feature-specific wrapper so the compiler
/// vectorises the inner loop for that instruction set. `FUSED` uses
/// fused multiply-add (only where the CPU has it: elsewhere it is a slow
/// library call).
#[inline(always)]
fn dense_kernel<const FUSED: bool>(
    x: &[f32],
    w_t: &[f32],
    bias: &[f32],
    relu: bool,
    fan_in: usize,
    y: &mut [f32],
) {
    // Outputs are summed in blocks of BLOCK independent accumulators (eight
    // vector registers under AVX2), so consecutive multiply-adds never wait
    // on each other; the rest go through memory-held sums.
    const BLOCK: usize = 64;
    let fan_out = bias.len();
    let full = fan_out - fan_out % BLOCK;
    let fma = |x: f32, w: f32, a: f32| if FUSED { x.mul_add(w, a) } else { a + x * w };
    for (row, out) in x.chunks_exact(fan_in).zip(y.chunks_exact_mut(fan_out)) {
        for j in (0..full).step_by(BLOCK) {
            let mut acc = [0f32; BLOCK];
            acc.copy_from_slice(&bias[j..j + BLOCK]);
            for (&xk, wk) in row.iter().zip(w_t.chunks_exact(fan_out)) {
                let w: &[f32; BLOCK] = wk[j..j + BLOCK].try_into().expect("block");
                for l in 0..BLOCK {
                    acc[l] = fma(xk, w[l], acc[l]);
                }
            }
            out[j..j + BLOCK].copy_from_slice(&acc);
        }
        let rest = &mut out[full..];
        rest.copy_from_slice(&bias[full..]);
        for (&xk, wk) in row.iter().zip(w_t.chunks_exact(fan_out)) {
            for (a, &w) in rest.iter_mut().zip(&wk[full..]) {
                *a = fma(xk, w, *a);
            }
        }
        if relu {
            for a in out.iter_mut() {
                *a = a.max(0.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_matches_a_hand_computation() {
        // 3 -> 2 (ReLU) -> 1, weights chosen so one hidden unit is cut.
        let net = NetShape::new(3, &[2], 1);
        assert_eq!(net.numel(), 3 * 2 + 2 + 2 + 1);
        let params = [
            1.0, 2.0, 3.0, // hidden 0
            -1.0, -1.0, -1.0, // hidden 1
            0.5, 0.0, // biases
            2.0, 10.0, // output weights
            -1.0, // output bias
        ];
        let mut m = NetCopy::new(net);
        assert!(!m.loaded());
        m.load(&params).unwrap();
        let y = m.forward(&[1.0, 1.0, 1.0, 0.0, 0.0, -1.0], 2).to_vec();
        // Row 0: h = [6.5, relu(-3)=0] -> 2*6.5 - 1 = 12.
        // Row 1: h = [relu(-2.5)=0, relu(1)=1] -> 10 - 1 = 9.
        assert_eq!(y, vec![12.0, 9.0]);
        assert_eq!(
            m.load(&[0.0; 3]).unwrap_err(),
            "weights have 3 values, the network has 11"
        );
    }

    /// Both kernels against a naive row-major forward, on sizes that are
    /// not multiples of the vector width.
    #[test]
    fn kernels_agree_with_a_naive_forward() {
        let net = NetShape::new(5, &[13, 9], 3);
        let params: Vec<f32> = (0..net.numel())
            .map(|i| ((i * 7919) % 23) as f32 * 0.05 - 0.5)
            .collect();
        let x: Vec<f32> = (0..4 * 5).map(|i| (i % 6) as f32 * 0.3 - 0.7).collect();
        let mut h = x.clone();
        let mut offset = 0;
        let sizes = [5usize, 13, 9, 3];
        for (layer, w) in sizes.windows(2).enumerate() {
            let (fi, fo) = (w[0], w[1]);
            let mut next = Vec::new();
            for row in h.chunks(fi) {
                for j in 0..fo {
                    let mut v = params[offset + fi * fo + j];
                    for k in 0..fi {
                        v += params[offset + j * fi + k] * row[k];
                    }
                    next.push(if layer < 2 { v.max(0.0) } else { v });
                }
            }
            offset += fi * fo + fo;
            h = next;
        }
        let mut m = NetCopy::new(net);
        m.load(&params).unwrap();
        let got = m.forward(&x, 4).to_vec();
        for (i, (a, b)) in got.iter().zip(&h).enumerate() {
            assert!((a - b).abs() < 1e-5, "out[{i}]: {a} vs naive {b}");
        }
        // The portable kernel alone, on the first layer.
        let mut y = vec![0.0; 4 * 13];
        dense_kernel::<false>(&x, &m.params[..5 * 13], &m.params[65..78], true, 5, &mut y);
        let mut z = vec![0.0; 4 * 13];
        dense(&x, &m.params[..5 * 13], &m.params[65..78], true, 5, &mut z);
        for (a, b) in y.iter().zip(&z) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
        assert_eq!(crate::nets::argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
    }
}
