//! [`ConvTorso`]: the convolutional layers in front of a network's MLP, for
//! image observations — DQN-Nature's plain stack or IMPALA's residual
//! stacks — described once as a list of primitive [`Op`]s with their
//! shapes, which every backend (plain Rust, libtorch, ONNX) runs the same
//! way. The flat layout matches the learner's
//! `rlfleet_learning::nets::FlatNet`: per convolution, in op order, a `[out,
//! in, k, k]` weight (PyTorch's `Conv2d` layout), then the bias; the
//! output is flattened in channel, row, column order, as `torch.flatten`
//! does.

/// One entry of a torso's `layers`: for a plain torso a convolution of
/// `out` channels, a square `kernel` and a `stride`; for an IMPALA torso a
/// residual stack of `out` channels (kernel and stride are its fixed 3 and
/// 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvLayer {
    pub out: usize,
    pub kernel: usize,
    pub stride: usize,
}

/// How a torso's `layers` become operations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TorsoKind {
    /// Each layer a convolution without padding, then ReLU (DQN-Nature).
    #[default]
    Plain,
    /// Each layer a stack (Espeholt et al. 2018): a 3x3 convolution
    /// (padding 1), 3x3 max-pooling with stride 2 (padding 1), and two
    /// residual blocks of ReLU, 3x3 convolution, ReLU, 3x3 convolution plus
    /// the block's input; ReLU after the last stack.
    Impala,
}

/// A primitive of a torso's forward pass. Zero padding for convolutions,
/// padding that never wins for max-pooling (PyTorch's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Conv {
        out: usize,
        kernel: usize,
        stride: usize,
        pad: usize,
    },
    Relu,
    MaxPool {
        kernel: usize,
        stride: usize,
        pad: usize,
    },
    /// Keeps the current activation for the next [`Op::AddSaved`].
    Save,
    /// Adds the activation [`Op::Save`] kept last (a residual connection).
    AddSaved,
}

impl Op {
    /// A window op's kernel, stride and padding.
    fn window(self) -> Option<(usize, usize, usize)> {
        match self {
            Op::Conv {
                kernel,
                stride,
                pad,
                ..
            }
            | Op::MaxPool {
                kernel,
                stride,
                pad,
            } => Some((kernel, stride, pad)),
            _ => None,
        }
    }

    /// The `[channels, height, width]` this op makes of its input's.
    pub fn output(self, [c, h, w]: [usize; 3]) -> [usize; 3] {
        let Some((kernel, stride, pad)) = self.window() else {
            return [c, h, w];
        };
        let channels = match self {
            Op::Conv { out, .. } => out,
            _ => c,
        };
        [
            channels,
            out_size(h, kernel, stride, pad),
            out_size(w, kernel, stride, pad),
        ]
    }
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
    pub kind: TorsoKind,
    pub layers: Vec<ConvLayer>,
}

/// Output size of a window of `kernel` moved by `stride` over `n` cells
/// padded by `pad` on both sides.
pub(super) fn out_size(n: usize, kernel: usize, stride: usize, pad: usize) -> usize {
    (n + 2 * pad - kernel) / stride + 1
}

impl ConvTorso {
    /// The operations, in order.
    pub fn ops(&self) -> Vec<Op> {
        let conv = |out, kernel, stride, pad| Op::Conv {
            out,
            kernel,
            stride,
            pad,
        };
        match self.kind {
            TorsoKind::Plain => self
                .layers
                .iter()
                .flat_map(|l| [conv(l.out, l.kernel, l.stride, 0), Op::Relu])
                .collect(),
            TorsoKind::Impala => {
                let mut ops = Vec::new();
                for l in &self.layers {
                    ops.push(conv(l.out, 3, 1, 1));
                    ops.push(Op::MaxPool {
                        kernel: 3,
                        stride: 2,
                        pad: 1,
                    });
                    for _ in 0..2 {
                        ops.extend([
                            Op::Save,
                            Op::Relu,
                            conv(l.out, 3, 1, 1),
                            Op::Relu,
                            conv(l.out, 3, 1, 1),
                            Op::AddSaved,
                        ]);
                    }
                }
                ops.push(Op::Relu);
                ops
            }
        }
    }

    /// Refuses layers that do not fit the image, naming the first.
    pub fn check(&self) -> Result<(), String> {
        if self.layers.is_empty() {
            return Err("a convolutional torso needs at least one layer".into());
        }
        let [c, h, w] = self.input;
        if c == 0 || h == 0 || w == 0 {
            return Err(format!("the image {:?} is empty", self.input));
        }
        for (i, l) in self.layers.iter().enumerate() {
            if l.out == 0 || l.kernel == 0 || l.stride == 0 {
                return Err(format!(
                    "conv layer {i}: channels, kernel and stride must be >= 1"
                ));
            }
        }
        let mut shape = self.input;
        for op in self.ops() {
            let [_, h, w] = shape;
            if let Some((kernel, _, pad)) = op.window()
                && (kernel > h + 2 * pad || kernel > w + 2 * pad)
            {
                return Err(format!(
                    "a {kernel}x{kernel} kernel does not fit its {h}x{w} input \
                     (the image is {:?}; use smaller kernels or strides for it)",
                    self.input
                ));
            }
            shape = op.output(shape);
        }
        Ok(())
    }

    /// Per operation, its input's channels, height and width.
    pub fn geometry(&self) -> Vec<(Op, [usize; 3])> {
        let mut shape = self.input;
        self.ops()
            .into_iter()
            .map(|op| {
                let at = shape;
                shape = op.output(shape);
                (op, at)
            })
            .collect()
    }

    /// Per convolution, in order: `[out, in, kernel, kernel]`, its stride
    /// and padding.
    pub fn convs(&self) -> Vec<([usize; 4], usize, usize)> {
        self.geometry()
            .into_iter()
            .filter_map(|(op, [cin, _, _])| match op {
                Op::Conv {
                    out,
                    kernel,
                    stride,
                    pad,
                } => Some(([out, cin, kernel, kernel], stride, pad)),
                _ => None,
            })
            .collect()
    }

    /// Values of one observation.
    pub fn obs_dim(&self) -> usize {
        self.input.iter().product()
    }

    /// Parameters of the convolutions (weights and biases).
    pub fn numel(&self) -> usize {
        self.convs()
            .iter()
            .map(|(w, _, _)| w.iter().product::<usize>() + w[0])
            .sum()
    }

    /// The features' `[channels, height, width]` before flattening.
    pub fn output_shape(&self) -> [usize; 3] {
        let (op, at) = *self.geometry().last().expect("at least one op");
        op.output(at)
    }

    /// Features the torso gives the MLP.
    pub fn output_dim(&self) -> usize {
        self.output_shape().iter().product()
    }

    /// The layers in a few words, for errors and logs.
    pub fn describe(&self) -> String {
        match self.kind {
            TorsoKind::Plain => {
                let convs: Vec<String> = self
                    .layers
                    .iter()
                    .map(|l| format!("{}@{}/{}", l.out, l.kernel, l.stride))
                    .collect();
                format!("conv {:?} [{}]", self.input, convs.join(", "))
            }
            TorsoKind::Impala => {
                let stacks: Vec<usize> = self.layers.iter().map(|l| l.out).collect();
                format!("impala {:?} stacks {stacks:?}", self.input)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_that_do_not_fit_are_named() {
        let torso = ConvTorso {
            input: [1, 5, 10],
            channels_last: false,
            bytes: true,
            kind: TorsoKind::Plain,
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
