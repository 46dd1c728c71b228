//! [`NetCopy`]: a [`NetShape`]'s forward pass in plain Rust over its own
//! copy of the parameters: the torso's convolutions (im2col, `conv.rs`),
//! then the MLP, each layer a [`Dense`].

use super::conv::ConvCopy;
use super::dense::Dense;
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

/// A [`NetShape`] with its own copy of the parameters (each layer laid out
/// for the vectorised kernel, `dense.rs`) and reusable buffers.
#[derive(Debug, Clone)]
pub struct NetCopy {
    net: NetShape,
    /// The torso's copy of its parameters, and its buffers.
    conv: ConvCopy,
    /// The MLP's layers (empty until loaded).
    layers: Vec<Dense>,
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
        for w in self.net.sizes().windows(2) {
            let (fan_in, fan_out) = (w[0], w[1]);
            let weight = &params[offset..offset + fan_in * fan_out];
            offset += fan_in * fan_out;
            let bias = &params[offset..offset + fan_out];
            offset += fan_out;
            self.layers.push(Dense::new(weight, bias));
        }
        Ok(())
    }

    /// Outputs for `batch` rows of `x` (`batch * output_dim` values).
    /// Panics when nothing is loaded or `x` has the wrong size.
    pub fn forward(&mut self, x: &[f32], batch: usize) -> &[f32] {
        assert!(self.loaded(), "forward before any weights were loaded");
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
