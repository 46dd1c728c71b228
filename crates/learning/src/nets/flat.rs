//! [`FlatNet`]: a ReLU network over a flat parameter vector: an optional
//! convolutional torso (image observations, bytes scaled on the device),
//! then an MLP, with an optional LSTM core before its output layer (run
//! over sequences by `lstm.rs`). The layout is
//! `rlfleet_shared::nets::NetShape`'s.

use super::layout::Order;
use rlfleet_kernels::conv::ConvDims;
use rlfleet_kernels::conv::sparse::Reach;
use rlfleet_shared::nets::{ConvTorso, NetShape, Op};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

/// A network's layers and where each sits in the flat parameter vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatNet {
    pub(super) shape: NetShape,
    /// MLP layer sizes, input first.
    pub(super) sizes: Vec<i64>,
    /// Lengths of each layer's weight and bias in the flat vector, in the
    /// network's own order (`layout.rs`): the torso's convolutions, then
    /// the MLP's hidden layers, the core's (four per layer), the output
    /// layer, except that a core's parts come first.
    pub(super) parts: Vec<i64>,
    /// Where each part starts in the flat vector (own order).
    pub(super) offsets: Vec<usize>,
    /// Each part's fan-in, for its initialisation (shared order).
    pub(super) fan_ins: Vec<i64>,
    /// Where the parts sit in the own order.
    pub(super) order: Order,
    /// Per convolution: its `[out, in, k, k]` weight shape, stride and
    /// padding.
    pub(super) convs: Vec<([i64; 4], i64, i64)>,
    /// Where the first convolution's inputs reach, for sparse inputs on
    /// the CPU (`rlfleet_kernels::conv::sparse`); `None` without an unpadded one.
    pub(super) reach: Option<Arc<Reach>>,
}

impl FlatNet {
    /// An MLP over `input` values.
    pub fn new(input: usize, hidden: &[u32], output: usize) -> Self {
        FlatNet::from_shape(NetShape::new(input, hidden, output))
    }

    pub fn from_shape(shape: NetShape) -> Self {
        let sizes: Vec<i64> = shape.sizes().iter().map(|&s| s as i64).collect();
        let convs: Vec<([i64; 4], i64, i64)> = shape
            .torso()
            .map(|t| {
                t.convs()
                    .into_iter()
                    .map(|(w, stride, pad)| (w.map(|d| d as i64), stride as i64, pad as i64))
                    .collect()
            })
            .unwrap_or_default();
        // Each weight and bias with its fan-in (PyTorch's default
        // initialisation is uniform in ±1/sqrt(fan_in); an LSTM's in
        // ±1/sqrt(units)).
        let n = sizes.len();
        let mut parts: Vec<(i64, i64)> = convs
            .iter()
            .flat_map(|(w, _, _)| {
                let fan_in = w[1] * w[2] * w[3];
                [(w.iter().product(), fan_in), (w[0], fan_in)]
            })
            .chain(
                sizes[..n - 1]
                    .windows(2)
                    .flat_map(|w| [(w[0] * w[1], w[0]), (w[1], w[0])]),
            )
            .collect();
        let mut core_parts = None;
        if let Some(core) = shape.core() {
            let h = core.size as i64;
            core_parts = Some(parts.len()..parts.len() + 4 * core.layers);
            parts.extend(
                core.parts(sizes[n - 2] as usize)
                    .into_iter()
                    .map(|len| (len as i64, h)),
            );
        }
        let head_in = shape.head_input() as i64;
        parts.extend([(head_in * sizes[n - 1], head_in), (sizes[n - 1], head_in)]);
        let reach = first_reach(shape.torso(), convs.first());
        let lens: Vec<usize> = parts.iter().map(|&(len, _)| len as usize).collect();
        let order = Order::new(&lens, core_parts);
        let own: Vec<i64> = order.canon.iter().map(|&j| lens[j] as i64).collect();
        let offsets = own
            .iter()
            .scan(0usize, |at, &len| {
                let start = *at;
                *at += len as usize;
                Some(start)
            })
            .collect();
        FlatNet {
            offsets,
            reach,
            shape,
            sizes,
            fan_ins: parts.iter().map(|&(_, fan_in)| fan_in).collect(),
            parts: own,
            order,
            convs,
        }
    }

    /// The network's layers, as actors and the ONNX writer see them.
    pub fn shape(&self) -> &NetShape {
        &self.shape
    }

    /// MLP layer sizes (after the torso).
    pub fn sizes(&self) -> &[i64] {
        &self.sizes
    }

    /// Total number of parameters (weights and biases).
    pub fn numel(&self) -> i64 {
        self.parts.iter().sum()
    }

    /// Fresh parameters with PyTorch's default initialisation of `Conv2d`
    /// and `nn.Linear` (uniform in ±1/sqrt(fan_in) for weights and
    /// biases), drawn from libtorch's generator (seed it with
    /// `tch::manual_seed`) part by part in the shared order, and laid out
    /// in the own order.
    pub fn init(&self, device: Device) -> Tensor {
        let lens = self.order.shared_from_own(self.parts.clone());
        let shared: Vec<Tensor> = lens
            .iter()
            .zip(&self.fan_ins)
            .map(|(&n, &fan_in)| {
                let bound = 1.0 / (fan_in as f64).sqrt();
                Tensor::empty([n], (Kind::Float, device)).uniform_(-bound, bound)
            })
            .collect();
        Tensor::cat(&self.order.own_from_shared(shared), 0)
    }

    /// Applies the network with parameters `params` to `x` of shape
    /// `[batch, obs_dim]` (f32, or uint8: bytes are converted here, on
    /// `x`'s device, to their values 0..=255), giving `[batch, output]`.
    ///
    /// The parameters are cut into layers with one `split_with_sizes`, not a
    /// `narrow` per weight and bias: the backward of a split is one
    /// concatenation into the flat gradient, where each `narrow`'s backward
    /// fills a zero tensor of the whole parameter vector and adds it in.
    pub fn forward(&self, params: &Tensor, x: &Tensor) -> Tensor {
        assert!(
            self.shape.core().is_none(),
            "a network with a recurrent core runs through forward_seq"
        );
        let parts = params.split_with_sizes(&self.parts, 0);
        let (conv_parts, mlp_parts) = parts.split_at(2 * self.convs.len());
        let x = &x.to_kind(Kind::Float);
        let h = match self.shape.torso() {
            Some(torso) => self.torso(torso, conv_parts, x),
            None => x.shallow_clone(),
        };
        self.mlp(h, mlp_parts, |_| {})
    }

    /// The MLP over features `h` (a ReLU after every layer but the last),
    /// handing each layer's input to `keep` first.
    pub(super) fn mlp(
        &self,
        mut h: Tensor,
        parts: &[Tensor],
        mut keep: impl FnMut(&Tensor),
    ) -> Tensor {
        let n_layers = self.sizes.len() - 1;
        for (i, (w, wb)) in self.sizes.windows(2).zip(parts.chunks_exact(2)).enumerate() {
            keep(&h);
            h = h.linear(&wb[0].view([w[1], w[0]]), Some(&wb[1]));
            if i + 1 < n_layers {
                h = h.relu();
            }
        }
        h
    }

    /// Flat images `x` as `[batch, channels, height, width]`. Channels-last
    /// images are made contiguous: a strided input leads libtorch's
    /// convolution to channels-last outputs, which the flatten before the
    /// MLP must then copy back (and `_slow_conv2d_backward` writes the
    /// weights' gradient in its input's memory format).
    pub(super) fn image(torso: &ConvTorso, x: &Tensor) -> Tensor {
        let [c, h, w] = torso.input.map(|d| d as i64);
        if torso.channels_last {
            x.view([-1, h, w, c]).permute([0, 3, 1, 2]).contiguous()
        } else {
            x.view([-1, c, h, w])
        }
    }

    /// The torso's features `[batch, features]` for flat images `x`.
    pub(super) fn torso(&self, torso: &ConvTorso, parts: &[Tensor], x: &Tensor) -> Tensor {
        let mut img = FlatNet::image(torso, x);
        // Bytes are scaled by 1/255 in the first convolution's weights (a
        // few thousand values), not in the image (every value of the
        // batch): conv(x / 255, W) = conv(x, W / 255). (Every torso starts
        // with a convolution.)
        let mut scale = torso.bytes.then_some(1.0 / 255.0);
        let mut convs = self.convs.iter().zip(parts.chunks_exact(2));
        let mut saved = Vec::new();
        for op in torso.ops() {
            img = match op {
                Op::Conv { .. } => {
                    let ((shape, stride, pad), wb) = convs.next().expect("one per Conv op");
                    let weight = wb[0].view(*shape);
                    let weight = match scale.take() {
                        Some(s) => weight.g_mul_scalar(s),
                        None => weight,
                    };
                    img.conv2d(
                        &weight,
                        Some(&wb[1]),
                        [*stride, *stride],
                        [*pad, *pad],
                        [1, 1],
                        1,
                    )
                }
                Op::Relu => img.relu(),
                Op::MaxPool {
                    kernel,
                    stride,
                    pad,
                } => {
                    let (k, s, p) = (kernel as i64, stride as i64, pad as i64);
                    img.max_pool2d([k, k], [s, s], [p, p], [1, 1], false)
                }
                Op::Save => {
                    saved.push(img.shallow_clone());
                    img
                }
                Op::AddSaved => img + saved.pop().expect("a Save before each AddSaved"),
            };
        }
        img.flatten(1, -1)
    }
}

/// Which outputs each input value of a torso's first convolution reaches
/// (`first`: its weight shape, stride and padding), where it is unpadded.
fn first_reach(
    torso: Option<&ConvTorso>,
    first: Option<&([i64; 4], i64, i64)>,
) -> Option<Arc<Reach>> {
    let (torso, &([o, _, k, _], stride, pad)) = (torso?, first?);
    let [c, h, w] = torso.input;
    let dims = ConvDims {
        c,
        h,
        w,
        o: o as usize,
        k: k as usize,
        s: stride as usize,
    };
    (pad == 0).then(|| Arc::new(Reach::new(&dims, torso.channels_last)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_linear_layers() {
        let net = FlatNet::new(4, &[8, 8], 2);
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

    /// With a convolutional torso (plain or IMPALA's; bytes, channels first
    /// or last), the tensor network computes what the plain-Rust copy
    /// actors use does.
    #[test]
    fn a_cnn_agrees_with_the_plain_rust_copy() {
        use rlfleet_shared::nets::{ConvLayer, ConvTorso, NetCopy, TorsoKind};
        let layer = |out, kernel, stride| ConvLayer {
            out,
            kernel,
            stride,
        };
        let plain = |channels_last| ConvTorso {
            input: [2, 12, 10],
            channels_last,
            bytes: true,
            kind: TorsoKind::Plain,
            layers: vec![layer(6, 4, 2), layer(8, 3, 1)],
        };
        let impala = |channels_last| ConvTorso {
            kind: TorsoKind::Impala,
            layers: vec![layer(4, 3, 1), layer(5, 3, 1)],
            ..plain(channels_last)
        };
        for (torso, features) in [
            (plain(false), 8 * 3 * 2),
            (plain(true), 8 * 3 * 2),
            (impala(false), 5 * 3 * 3),
            (impala(true), 5 * 3 * 3),
        ] {
            let shape = NetShape::with_torso(Some(torso.clone()), 240, &[16], 3);
            let net = FlatNet::from_shape(shape.clone());
            assert_eq!(net.numel() as usize, shape.numel());
            assert_eq!(shape.sizes()[0], features);
            tch::manual_seed(7);
            let p = net.init(Device::Cpu);
            let batch = 5;
            let x: Vec<f32> = (0..batch * 240).map(|i| ((i * 97) % 256) as f32).collect();
            let y = net.forward(&p, &Tensor::from_slice(&x).view([batch as i64, 240]));
            assert_eq!(y.size(), [batch as i64, 3]);
            let y: Vec<f32> = Vec::try_from(y.view([-1])).unwrap();
            let mut copy = NetCopy::new(shape);
            copy.load(&Vec::<f32>::try_from(&p).unwrap()).unwrap();
            let got = copy.forward(&x, batch);
            for (i, (a, b)) in y.iter().zip(got).enumerate() {
                assert!((a - b).abs() < 1e-5, "out[{i}]: tensor {a}, copy {b}");
            }
        }
    }
}
