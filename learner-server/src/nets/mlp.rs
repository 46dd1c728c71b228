//! [`FlatMlp`]: a ReLU multilayer perceptron over a flat parameter vector.

use tch::{Device, Kind, Tensor};

/// Layer sizes of an MLP, input first, output last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatMlp {
    sizes: Vec<i64>,
    /// Lengths of each layer's weight and bias in the flat vector, in order.
    parts: Vec<i64>,
}

impl FlatMlp {
    pub fn new(input: usize, hidden: &[u32], output: usize) -> Self {
        let mut sizes = vec![input as i64];
        sizes.extend(hidden.iter().map(|&h| h as i64));
        sizes.push(output as i64);
        let parts = sizes.windows(2).flat_map(|w| [w[0] * w[1], w[1]]).collect();
        FlatMlp { sizes, parts }
    }

    pub fn sizes(&self) -> &[i64] {
        &self.sizes
    }

    /// Total number of parameters (weights and biases).
    pub fn numel(&self) -> i64 {
        self.sizes.windows(2).map(|w| w[0] * w[1] + w[1]).sum()
    }

    /// Fresh parameters with PyTorch's `nn.Linear` initialisation
    /// (uniform in ±1/sqrt(fan_in) for weights and biases), drawn from
    /// libtorch's generator (seed it with `tch::manual_seed`).
    pub fn init(&self, device: Device) -> Tensor {
        let parts: Vec<Tensor> = self
            .sizes
            .windows(2)
            .flat_map(|w| {
                let bound = 1.0 / (w[0] as f64).sqrt();
                let weight =
                    Tensor::empty([w[0] * w[1]], (Kind::Float, device)).uniform_(-bound, bound);
                let bias = Tensor::empty([w[1]], (Kind::Float, device)).uniform_(-bound, bound);
                [weight, bias]
            })
            .collect();
        Tensor::cat(&parts, 0)
    }

    /// Applies the network with parameters `params` to `x` of shape
    /// `[batch, input]`, giving `[batch, output]`.
    ///
    /// The parameters are cut into layers with one `split_with_sizes`, not a
    /// `narrow` per weight and bias: the backward of a split is one
    /// concatenation into the flat gradient, where each `narrow`'s backward
    /// fills a zero tensor of the whole parameter vector and adds it in.
    pub fn forward(&self, params: &Tensor, x: &Tensor) -> Tensor {
        let n_layers = self.sizes.len() - 1;
        let parts = params.split_with_sizes(&self.parts, 0);
        let mut h = x.shallow_clone();
        for (i, (w, wb)) in self.sizes.windows(2).zip(parts.chunks_exact(2)).enumerate() {
            let weight = wb[0].view([w[1], w[0]]);
            h = h.linear(&weight, Some(&wb[1]));
            if i + 1 < n_layers {
                h = h.relu();
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_linear_layers() {
        let net = FlatMlp::new(4, &[8, 8], 2);
        assert_eq!(net.numel(), 4 * 8 + 8 + 8 * 8 + 8 + 8 * 2 + 2);
        tch::manual_seed(0);
        let p = net.init(Device::Cpu);
        assert_eq!(p.size(), [net.numel()]);
        let y = net.forward(&p, &Tensor::ones([3, 4], (Kind::Float, Device::Cpu)));
        assert_eq!(y.size(), [3, 2]);
        // Same as doing the first layer by hand.
        let w1 = p.narrow(0, 0, 32).view([8, 4]);
        let b1 = p.narrow(0, 32, 8);
        let x = Tensor::ones([1, 4], (Kind::Float, Device::Cpu));
        let h = (x.matmul(&w1.tr()) + &b1).relu();
        let w2 = p.narrow(0, 40, 64).view([8, 8]);
        let b2 = p.narrow(0, 104, 8);
        let h = (h.matmul(&w2.tr()) + &b2).relu();
        let w3 = p.narrow(0, 112, 16).view([2, 8]);
        let b3 = p.narrow(0, 128, 2);
        let by_hand = h.matmul(&w3.tr()) + &b3;
        let diff = (by_hand - y.narrow(0, 0, 1)).abs().max().double_value(&[]);
        assert!(diff < 1e-6, "{diff}");
    }
}
