//! [`CpuMlp`]: the forward pass of the learner's flat-parameter ReLU MLP in
//! plain Rust, so actors act from published weights without libtorch. The
//! layout matches `learner_server::nets::FlatMlp`: per layer a row-major
//! `[fan_out, fan_in]` weight, then the bias.

/// Layer sizes, input first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuMlp {
    sizes: Vec<usize>,
}

impl CpuMlp {
    pub fn new(input: usize, hidden: &[u32], output: usize) -> CpuMlp {
        let mut sizes = vec![input];
        sizes.extend(hidden.iter().map(|&h| h as usize));
        sizes.push(output);
        CpuMlp { sizes }
    }

    pub fn numel(&self) -> usize {
        self.sizes.windows(2).map(|w| w[0] * w[1] + w[1]).sum()
    }

    pub fn output_dim(&self) -> usize {
        *self.sizes.last().expect("at least two sizes")
    }

    /// Applies the network to `batch` rows of `x`; writes `batch * output`
    /// values into `out`. `scratch` is reused between calls.
    pub fn forward(
        &self,
        params: &[f32],
        x: &[f32],
        batch: usize,
        out: &mut Vec<f32>,
        scratch: &mut Vec<f32>,
    ) {
        assert_eq!(params.len(), self.numel(), "parameter count");
        assert_eq!(x.len(), batch * self.sizes[0], "input size");
        out.clear();
        out.extend_from_slice(x);
        let n_layers = self.sizes.len() - 1;
        let mut offset = 0;
        for (layer, w) in self.sizes.windows(2).enumerate() {
            let (fan_in, fan_out) = (w[0], w[1]);
            let weight = &params[offset..offset + fan_in * fan_out];
            let bias = &params[offset + fan_in * fan_out..offset + fan_in * fan_out + fan_out];
            offset += fan_in * fan_out + fan_out;
            scratch.clear();
            for row in out.chunks_exact(fan_in) {
                for (j, wrow) in weight.chunks_exact(fan_in).enumerate() {
                    let dot: f32 = wrow.iter().zip(row).map(|(a, b)| a * b).sum();
                    let v = dot + bias[j];
                    scratch.push(if layer + 1 < n_layers { v.max(0.0) } else { v });
                }
            }
            std::mem::swap(out, scratch);
        }
    }
}

/// Index of the largest value (the first one on ties, like `argmax`).
pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}
