//! [`ConvTorso`]: the convolutional layers in front of a network's MLP, for
//! image observations, and their forward pass in plain Rust (im2col into
//! the dense kernel). The flat layout matches the learner's
//! `learner_server::nets::FlatNet`: per layer a `[out, in, k, k]` weight
//! (PyTorch's `Conv2d` layout), then the bias; the output is flattened in
//! channel, row, column order, as `torch.flatten` does.

use super::dense;

/// One convolution: `out` channels, a square `kernel`, a `stride`, no
/// padding, then ReLU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvLayer {
    pub out: usize,
    pub kernel: usize,
    pub stride: usize,
}

/// Convolutions over an image observation, flattened into the MLP's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvTorso {
    /// The image as the network sees it: `[channels, height, width]`.
    pub input: [usize; 3],
    /// The observation arrives as `[height, width, channels]` (the network
    /// moves the channels first).
    pub channels_last: bool,
    /// The observation is bytes (0..=255): the network scales it by 1/255.
    pub bytes: bool,
    pub layers: Vec<ConvLayer>,
}

impl ConvTorso {
    /// Refuses layers that do not fit the image, naming the first.
    pub fn check(&self) -> Result<(), String> {
        if self.layers.is_empty() {
            return Err("a convolutional torso needs at least one layer".into());
        }
        let [c, h, w] = self.input;
        if c == 0 || h == 0 || w == 0 {
            return Err(format!("the image {:?} is empty", self.input));
        }
        let (mut h, mut w) = (h, w);
        for (i, l) in self.layers.iter().enumerate() {
            if l.out == 0 || l.kernel == 0 || l.stride == 0 {
                return Err(format!(
                    "conv layer {i}: channels, kernel and stride must be >= 1"
                ));
            }
            if l.kernel > h || l.kernel > w {
                return Err(format!(
                    "conv layer {i}: a {k}x{k} kernel does not fit its {h}x{w} input \
                     (the image is {:?}; use smaller kernels or strides for it)",
                    self.input,
                    k = l.kernel
                ));
            }
            (h, w) = ((h - l.kernel) / l.stride + 1, (w - l.kernel) / l.stride + 1);
        }
        Ok(())
    }

    /// Each layer's input channels, and the output height and width.
    pub fn geometry(&self) -> Vec<(usize, usize, usize)> {
        let [mut c, mut h, mut w] = self.input;
        self.layers
            .iter()
            .map(|l| {
                let cin = c;
                (c, h, w) = (
                    l.out,
                    (h - l.kernel) / l.stride + 1,
                    (w - l.kernel) / l.stride + 1,
                );
                (cin, h, w)
            })
            .collect()
    }

    /// Values of one observation.
    pub fn obs_dim(&self) -> usize {
        self.input.iter().product()
    }

    /// Parameters of the convolutions (weights and biases).
    pub fn numel(&self) -> usize {
        self.layers
            .iter()
            .zip(self.geometry())
            .map(|(l, (cin, _, _))| l.out * cin * l.kernel * l.kernel + l.out)
            .sum()
    }

    /// Features the torso gives the MLP.
    pub fn output_dim(&self) -> usize {
        let (_, h, w) = *self.geometry().last().expect("at least one layer");
        self.layers.last().expect("at least one layer").out * h * w
    }
}

/// The torso's forward pass over its own (transposed) copy of the
/// parameters, with reusable buffers.
#[derive(Debug, Clone, Default)]
pub(super) struct ConvCopy {
    /// Per layer: the weight as `[in * k * k, out]`, then the bias.
    params: Vec<f32>,
    /// Activations, one row of channels per pixel (`[batch, h, w, c]`).
    act: Vec<f32>,
    patches: Vec<f32>,
    out: Vec<f32>,
}

impl ConvCopy {
    /// Takes the torso's part of the flat parameters (the learner's
    /// layout).
    pub(super) fn load(&mut self, torso: &ConvTorso, params: &[f32]) {
        self.params.clear();
        let mut offset = 0;
        for (l, (cin, _, _)) in torso.layers.iter().zip(torso.geometry()) {
            let fan_in = cin * l.kernel * l.kernel;
            let weight = &params[offset..offset + fan_in * l.out];
            for k in 0..fan_in {
                self.params
                    .extend((0..l.out).map(|j| weight[j * fan_in + k]));
            }
            offset += fan_in * l.out;
            self.params
                .extend_from_slice(&params[offset..offset + l.out]);
            offset += l.out;
        }
    }

    /// Features for `batch` observations of `x` (`batch *
    /// torso.output_dim()` values, channel-major per observation).
    pub(super) fn forward(&mut self, torso: &ConvTorso, x: &[f32], batch: usize) -> &[f32] {
        let [c, h, w] = torso.input;
        let scale = if torso.bytes { 1.0 / 255.0 } else { 1.0 };
        // Pixels first, channels last, scaled.
        self.act.clear();
        if torso.channels_last {
            self.act.extend(x.iter().map(|v| v * scale));
        } else {
            self.act.resize(x.len(), 0.0);
            for (img, dst) in x
                .chunks_exact(c * h * w)
                .zip(self.act.chunks_exact_mut(c * h * w))
            {
                for ch in 0..c {
                    for p in 0..h * w {
                        dst[p * c + ch] = img[ch * h * w + p] * scale;
                    }
                }
            }
        }
        let (mut cin, mut hin, mut win) = (c, h, w);
        let mut offset = 0;
        for (l, (_, ho, wo)) in torso.layers.iter().zip(torso.geometry()) {
            let k = l.kernel;
            let fan_in = cin * k * k;
            // One row per output pixel: the patch in (channel, row, column)
            // order, the order of the weight's flattened `[in, k, k]`.
            self.patches.clear();
            self.patches.resize(batch * ho * wo * fan_in, 0.0);
            let mut rows = self.patches.chunks_exact_mut(fan_in);
            for img in self.act.chunks_exact(hin * win * cin).take(batch) {
                for oy in 0..ho {
                    for ox in 0..wo {
                        let row = rows.next().expect("sized for every pixel");
                        for i in 0..k {
                            for j in 0..k {
                                let pixel = ((oy * l.stride + i) * win + ox * l.stride + j) * cin;
                                for ch in 0..cin {
                                    row[ch * k * k + i * k + j] = img[pixel + ch];
                                }
                            }
                        }
                    }
                }
            }
            let weight_t = &self.params[offset..offset + fan_in * l.out];
            offset += fan_in * l.out;
            let bias = &self.params[offset..offset + l.out];
            offset += l.out;
            self.act.clear();
            self.act.resize(batch * ho * wo * l.out, 0.0);
            dense(&self.patches, weight_t, bias, true, fan_in, &mut self.act);
            (cin, hin, win) = (l.out, ho, wo);
        }
        // Channel-major, as the learner flattens.
        let per = cin * hin * win;
        self.out.clear();
        self.out.resize(batch * per, 0.0);
        for (src, dst) in self
            .act
            .chunks_exact(per)
            .zip(self.out.chunks_exact_mut(per))
        {
            for p in 0..hin * win {
                for ch in 0..cin {
                    dst[ch * hin * win + p] = src[p * cin + ch];
                }
            }
        }
        &self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A direct convolution over `[C, H, W]` images, by definition.
    fn naive(torso: &ConvTorso, params: &[f32], x: &[f32]) -> Vec<f32> {
        let [c, h, w] = torso.input;
        let mut act: Vec<f32> = x.to_vec();
        let (mut cin, mut hin, mut win) = (c, h, w);
        let mut offset = 0;
        for l in &torso.layers {
            let k = l.kernel;
            let (ho, wo) = ((hin - k) / l.stride + 1, (win - k) / l.stride + 1);
            let bias_at = offset + l.out * cin * k * k;
            let mut next = vec![0.0; l.out * ho * wo];
            for o in 0..l.out {
                for oy in 0..ho {
                    for ox in 0..wo {
                        let mut v = params[bias_at + o];
                        for ch in 0..cin {
                            for i in 0..k {
                                for j in 0..k {
                                    let wgt = params[offset + ((o * cin + ch) * k + i) * k + j];
                                    let px = act
                                        [(ch * hin + oy * l.stride + i) * win + ox * l.stride + j];
                                    v += wgt * px;
                                }
                            }
                        }
                        next[(o * ho + oy) * wo + ox] = v.max(0.0);
                    }
                }
            }
            offset = bias_at + l.out;
            act = next;
            (cin, hin, win) = (l.out, ho, wo);
        }
        act
    }

    #[test]
    fn im2col_forward_matches_a_direct_convolution() {
        let layers = vec![
            ConvLayer {
                out: 5,
                kernel: 3,
                stride: 2,
            },
            ConvLayer {
                out: 4,
                kernel: 2,
                stride: 1,
            },
        ];
        let torso = ConvTorso {
            input: [3, 9, 7],
            channels_last: false,
            bytes: false,
            layers,
        };
        torso.check().unwrap();
        assert_eq!(torso.geometry(), vec![(3, 4, 3), (5, 3, 2)]);
        assert_eq!(torso.output_dim(), 4 * 3 * 2);
        assert_eq!(torso.numel(), 5 * 27 + 5 + 4 * 20 + 4);
        let params: Vec<f32> = (0..torso.numel())
            .map(|i| ((i * 7919) % 31) as f32 * 0.02 - 0.3)
            .collect();
        let batch = 2;
        let x: Vec<f32> = (0..batch * torso.obs_dim())
            .map(|i| ((i * 131) % 17) as f32 * 0.1 - 0.5)
            .collect();
        let mut copy = ConvCopy::default();
        copy.load(&torso, &params);
        let got = copy.forward(&torso, &x, batch).to_vec();
        let per = torso.obs_dim();
        let want: Vec<f32> = x
            .chunks(per)
            .flat_map(|img| naive(&torso, &params, img))
            .collect();
        assert_eq!(got.len(), want.len());
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() < 1e-5, "feature {i}: {a} vs direct {b}");
        }
        // The same images as bytes, channels last.
        let hwc = ConvTorso {
            channels_last: true,
            bytes: true,
            ..torso.clone()
        };
        let bytes: Vec<f32> = (0..per).map(|i| ((i * 37) % 256) as f32).collect();
        let mut moved = vec![0.0; per];
        let [c, h, w] = torso.input;
        for ch in 0..c {
            for p in 0..h * w {
                moved[p * c + ch] = bytes[ch * h * w + p];
            }
        }
        let scaled: Vec<f32> = bytes.iter().map(|b| b / 255.0).collect();
        let want = naive(&torso, &params, &scaled);
        let got = copy.forward(&hwc, &moved, 1).to_vec();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() < 1e-5, "feature {i}: {a} vs direct {b}");
        }
    }

    #[test]
    fn layers_that_do_not_fit_are_named() {
        let torso = ConvTorso {
            input: [1, 5, 10],
            channels_last: false,
            bytes: true,
            layers: vec![ConvLayer {
                out: 32,
                kernel: 8,
                stride: 4,
            }],
        };
        let err = torso.check().unwrap_err();
        assert!(
            err.contains("8x8 kernel does not fit its 5x10 input"),
            "{err}"
        );
    }
}
