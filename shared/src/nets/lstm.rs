//! [`Core`]: the recurrent core a network may have between its hidden MLP
//! layers and its output layer — an LSTM of `layers` layers of `size`
//! units, PyTorch's `nn.LSTM` (gates in the order input, forget, cell,
//! output; each layer a `w_ih [4H, in]`, `w_hh [4H, H]`, `b_ih [4H]`,
//! `b_hh [4H]`, in that order in the flat parameters) — and [`LstmCopy`],
//! its step in plain Rust over batched rows.
//!
//! A row's recurrent state is `2 * layers * size` values: per layer its
//! `h`, then its `c`. Zeros are the state at an episode's start.

use rlfleet_kernels::dense::Dense;

/// An LSTM core: `layers` layers of `size` units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Core {
    pub size: usize,
    pub layers: usize,
}

impl Core {
    /// Parameters of the core over inputs of `input` values.
    pub fn numel(&self, input: usize) -> usize {
        let h = self.size;
        (0..self.layers)
            .map(|l| {
                let fan_in = if l == 0 { input } else { h };
                4 * h * fan_in + 4 * h * h + 8 * h
            })
            .sum()
    }

    /// Values of one row's state.
    pub fn state_len(&self) -> usize {
        2 * self.layers * self.size
    }

    /// Lengths of each layer's four tensors in the flat parameters, in
    /// order (over inputs of `input` values).
    pub fn parts(&self, input: usize) -> Vec<usize> {
        let h = self.size;
        (0..self.layers)
            .flat_map(|l| {
                let fan_in = if l == 0 { input } else { h };
                [4 * h * fan_in, 4 * h * h, 4 * h, 4 * h]
            })
            .collect()
    }

    pub fn describe(&self) -> String {
        format!("LSTM {}x{}", self.layers, self.size)
    }
}

/// One LSTM layer laid out for [`Dense`]'s kernel.
#[derive(Debug, Clone)]
struct Layer {
    ih: Dense,
    hh: Dense,
}

/// The core's parameters in plain Rust, and its buffers.
#[derive(Debug, Clone, Default)]
pub(crate) struct LstmCopy {
    size: usize,
    layers: Vec<Layer>,
    h: Vec<f32>,
    c: Vec<f32>,
    gx: Vec<f32>,
    gh: Vec<f32>,
    out: Vec<f32>,
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

impl LstmCopy {
    /// Takes the core's flat parameters (`Core::numel(input)` values).
    pub(crate) fn load(&mut self, core: &Core, input: usize, params: &[f32]) {
        let parts = core.parts(input);
        let mut offset = 0;
        let mut take = |n: usize| {
            let s = &params[offset..offset + n];
            offset += n;
            s
        };
        self.size = core.size;
        self.layers = parts
            .chunks_exact(4)
            .map(|p| {
                let (w_ih, w_hh) = (take(p[0]), take(p[1]));
                let (b_ih, b_hh) = (take(p[2]), take(p[3]));
                Layer {
                    ih: Dense::new(w_ih, b_ih),
                    hh: Dense::new(w_hh, b_hh),
                }
            })
            .collect();
    }

    /// One step for `batch` rows of `x`: reads and writes each row's
    /// `state` (`batch * state_len` values); returns the top layer's `h`
    /// (`batch * size` values).
    pub(crate) fn step(&mut self, x: &[f32], batch: usize, state: &mut [f32]) -> &[f32] {
        let h = self.size;
        let per_row = 2 * self.layers.len() * h;
        assert_eq!(state.len(), batch * per_row, "state size");
        self.out.clear();
        self.out.extend_from_slice(x);
        for (l, layer) in self.layers.iter().enumerate() {
            // This layer's h and c of every row, contiguous.
            self.h.clear();
            self.c.clear();
            for row in state.chunks_exact(per_row) {
                self.h.extend_from_slice(&row[2 * l * h..(2 * l + 1) * h]);
                self.c
                    .extend_from_slice(&row[(2 * l + 1) * h..(2 * l + 2) * h]);
            }
            self.gx.clear();
            self.gx.resize(batch * 4 * h, 0.0);
            self.gh.clear();
            self.gh.resize(batch * 4 * h, 0.0);
            layer.ih.apply(&self.out, false, &mut self.gx);
            layer.hh.apply(&self.h, false, &mut self.gh);
            for b in 0..batch {
                let g = |k: usize, j: usize| {
                    self.gx[b * 4 * h + k * h + j] + self.gh[b * 4 * h + k * h + j]
                };
                for j in 0..h {
                    let (i, f) = (sigmoid(g(0, j)), sigmoid(g(1, j)));
                    let (cell, o) = (g(2, j).tanh(), sigmoid(g(3, j)));
                    let c = f * self.c[b * h + j] + i * cell;
                    self.c[b * h + j] = c;
                    self.h[b * h + j] = o * c.tanh();
                }
            }
            for (b, row) in state.chunks_exact_mut(per_row).enumerate() {
                row[2 * l * h..(2 * l + 1) * h].copy_from_slice(&self.h[b * h..(b + 1) * h]);
                row[(2 * l + 1) * h..(2 * l + 2) * h].copy_from_slice(&self.c[b * h..(b + 1) * h]);
            }
            std::mem::swap(&mut self.out, &mut self.h);
        }
        &self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One unit, one layer, weights chosen by hand: the step computes
    /// PyTorch's LSTM cell and keeps its state.
    #[test]
    fn a_step_is_the_lstm_cell() {
        let core = Core { size: 1, layers: 1 };
        assert_eq!(core.numel(2), 4 * 2 + 4 + 8);
        // w_ih [4, 2], w_hh [4, 1], b_ih [4], b_hh [4].
        let params = [
            1.0, 0.0, 0.0, 1.0, 0.5, 0.5, -1.0, 1.0, // w_ih
            0.1, 0.2, 0.3, 0.4, // w_hh
            0.0, 0.1, 0.0, 0.1, // b_ih
            0.1, 0.0, 0.1, 0.0, // b_hh
        ];
        let mut lstm = LstmCopy::default();
        lstm.load(&core, 2, &params);
        let mut state = vec![0.5, -0.25];
        let x = [2.0, -1.0];
        let h = lstm.step(&x, 1, &mut state)[0];
        let pre = |k: usize| {
            params[2 * k] * x[0]
                + params[2 * k + 1] * x[1]
                + params[8 + k] * 0.5
                + params[12 + k]
                + params[16 + k]
        };
        let (i, f, g, o) = (
            sigmoid(pre(0)),
            sigmoid(pre(1)),
            pre(2).tanh(),
            sigmoid(pre(3)),
        );
        let c = f * -0.25 + i * g;
        let want = o * c.tanh();
        assert!((h - want).abs() < 1e-6, "{h} vs {want}");
        assert!((state[0] - want).abs() < 1e-6 && (state[1] - c).abs() < 1e-6);
    }
}
