//! [`NetCopy`]: a [`NetShape`]'s forward pass in plain Rust over its own
//! copy of the parameters: the torso's convolutions (im2col, `conv.rs`),
//! then the MLP, each layer a [`Dense`], with the recurrent core's step
//! ([`LstmCopy`]) before the output layer when the network has one.

use super::conv::ConvCopy;
use super::lstm::LstmCopy;
use super::{Forward, NetShape, Rows};
use rlfleet_kernels::dense::Dense;

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
    fn forward_state(&mut self, x: Rows<'_>, batch: usize, state: &mut [f32]) -> &[f32] {
        self.run(&x.values(), batch, state)
    }
}

/// A [`NetShape`] with its own copy of the parameters (each layer laid out
/// for the vectorised kernel, `rlfleet_kernels::dense`) and reusable buffers.
#[derive(Debug, Clone)]
pub struct NetCopy {
    net: NetShape,
    /// The torso's copy of its parameters, and its buffers.
    conv: ConvCopy,
    /// The MLP's layers (empty until loaded).
    layers: Vec<Dense>,
    /// The recurrent core's copy, run before the last of `layers`.
    core: LstmCopy,
    out: Vec<f32>,
    scratch: Vec<f32>,
}

impl NetCopy {
    /// A network with no parameters yet ([`NetCopy::loaded`] is false).
    pub fn new(net: NetShape) -> NetCopy {
        NetCopy {
            net,
            conv: ConvCopy::default(),
            layers: Vec::new(),
            core: LstmCopy::default(),
            out: Vec::new(),
            scratch: Vec::new(),
        }
    }

    pub fn net(&self) -> &NetShape {
        &self.net
    }

    pub fn loaded(&self) -> bool {
        !self.layers.is_empty()
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
        self.layers.clear();
        let sizes = self.net.sizes();
        let n = sizes.len();
        let dense = |fan_in: usize, fan_out: usize, offset: &mut usize| {
            let weight = &params[*offset..*offset + fan_in * fan_out];
            *offset += fan_in * fan_out;
            let bias = &params[*offset..*offset + fan_out];
            *offset += fan_out;
            Dense::new(weight, bias)
        };
        for w in sizes[..n - 1].windows(2) {
            self.layers.push(dense(w[0], w[1], &mut offset));
        }
        if let Some(core) = self.net.core() {
            let numel = core.numel(sizes[n - 2]);
            self.core
                .load(core, sizes[n - 2], &params[offset..offset + numel]);
            offset += numel;
        }
        self.layers
            .push(dense(self.net.head_input(), sizes[n - 1], &mut offset));
        Ok(())
    }

    /// Outputs for `batch` rows of `x` (`batch * output_dim` values).
    /// Panics when nothing is loaded or `x` has the wrong size.
    pub fn forward(&mut self, x: &[f32], batch: usize) -> &[f32] {
        self.run(x, batch, &mut [])
    }

    /// [`NetCopy::forward`], through the recurrent core when there is one
    /// (reading and writing each row's `state`; empty without a core).
    fn run(&mut self, x: &[f32], batch: usize, state: &mut [f32]) -> &[f32] {
        assert!(self.loaded(), "forward before any weights were loaded");
        assert_eq!(
            state.len(),
            batch * self.net.state_len(),
            "recurrent state size"
        );
        assert_eq!(x.len(), batch * self.net.obs_dim(), "input size");
        self.out.clear();
        match self.net.torso() {
            Some(torso) => {
                let features = self.conv.forward(torso, x, batch);
                self.out.extend_from_slice(features);
            }
            None => self.out.extend_from_slice(x),
        }
        let n_layers = self.layers.len();
        for (i, layer) in self.layers.iter().enumerate() {
            if i + 1 == n_layers && self.net.core().is_some() {
                let h = self.core.step(&self.out, batch, state);
                self.scratch.clear();
                self.scratch.extend_from_slice(h);
                std::mem::swap(&mut self.out, &mut self.scratch);
            }
            self.scratch.clear();
            self.scratch.resize(batch * layer.fan_out(), 0.0);
            layer.apply(&self.out, i + 1 < n_layers, &mut self.scratch);
            std::mem::swap(&mut self.out, &mut self.scratch);
        }
        &self.out
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

    #[test]
    fn argmax_takes_the_first_of_equals() {
        assert_eq!(crate::nets::argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
    }
}
