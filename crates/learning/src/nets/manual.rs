//! Hand-written backward passes for [`FlatNet`]s of plain convolutions and
//! ReLU layers (no recurrent core, no residual torso): the gradient of
//! `sum(out * d_out)` written straight into a flat gradient buffer.
//!
//! On the CPU a small network's update is mostly libtorch's per-operation
//! cost: autograd's graph, the nodes' saved tensors, the split's backward
//! concatenating into a fresh flat gradient, allocations that go back to
//! the OS between steps. Here each layer's backward is one or two kernels
//! whose outputs are views of a gradient buffer kept by the caller.
//! `Dqn` takes this path on the CPU; the tests hold it to autograd's
//! gradients.

use super::FlatNet;
use crate::device::{host_slice, host_values, host_values_mut};
use rlfleet_kernels::conv::sparse::SparseInput;
use rlfleet_kernels::conv::{self, ConvDims};
use rlfleet_shared::nets::{ConvTorso, TorsoKind};
use tch::{Device, Kind, Tensor};

/// A forward pass and what its backward needs: each layer's input (the
/// previous layer's output after its ReLU).
#[derive(Debug)]
pub struct Traced {
    /// The network's output `[batch, outputs]`.
    pub out: Tensor,
    inputs: Vec<Tensor>,
    /// The torso's output before flattening (`None` without a torso).
    torso_out: Option<Vec<i64>>,
    /// The first convolution's input as its nonzero values, where
    /// it was sparse (`inputs[0]` is then empty).
    sparse: Option<SparseInput>,
}

impl FlatNet {
    /// Whether [`FlatNet::backward_into`] covers this network: an MLP,
    /// optionally behind a plain convolutional torso.
    pub fn has_manual_backward(&self) -> bool {
        self.shape.core().is_none()
            && self
                .shape
                .torso()
                .is_none_or(|t| t.kind == TorsoKind::Plain)
    }

    /// [`FlatNet::forward`], keeping each layer's input for
    /// [`FlatNet::backward_into`]. On the CPU only (`params`: contiguous
    /// host f32); run it without a gradient (`tch::no_grad`): nothing here
    /// is for autograd.
    pub fn forward_traced(&self, params: &Tensor, x: &Tensor) -> Traced {
        assert!(self.has_manual_backward(), "no hand-written backward");
        let flat = host_values(params).expect("hand-written passes run over host parameters");
        let mut inputs = Vec::with_capacity(self.parts.len() / 2);
        let (h, torso_out, sparse) = match self.shape.torso() {
            Some(torso) => {
                let sparse = self.sparse_input(x);
                let img = self.torso_traced(torso, params, flat, x, &sparse, &mut inputs);
                (img.flatten(1, -1), Some(img.size()), sparse)
            }
            None => (x.to_kind(Kind::Float).contiguous(), None, None),
        };
        let out = self.mlp_host(flat, h, &mut inputs);
        Traced {
            out,
            inputs,
            torso_out,
            sparse,
        }
    }

    /// The torso's forward (each convolution's input pushed onto
    /// `inputs`), its output `[batch, c, h, w]` after the last ReLU.
    fn torso_traced(
        &self,
        torso: &ConvTorso,
        params: &Tensor,
        flat: &[f32],
        x: &Tensor,
        sparse: &Option<SparseInput>,
        inputs: &mut Vec<Tensor>,
    ) -> Tensor {
        let mut img = match sparse {
            Some(sp) => {
                // Already through its ReLU; the input stays as its hits.
                let offsets = &self.offsets;
                let (w, b) = (offsets[0], offsets[1]);
                let o = self.convs[0].0[0] as usize;
                let weight = &flat[w..b];
                inputs.push(Tensor::new());
                sparse_forward(sp, weight, &flat[b..b + o])
            }
            None => FlatNet::image(torso, &x.to_kind(Kind::Float)),
        };
        let first = usize::from(sparse.is_some());
        if first == self.convs.len() {
            return img;
        }
        let parts = params.split_with_sizes(&self.parts, 0);
        for (i, wb) in parts[..2 * self.convs.len()]
            .chunks_exact(2)
            .enumerate()
            .skip(first)
        {
            let (weight, stride, pad) = self.conv_weight(i, &wb[0]);
            let y = match self
                .first_on_host(i, &img)
                .and_then(|d| first_conv(&d, &img, &weight, &wb[1]))
            {
                Some(y) => y,
                None => img.conv2d(
                    &weight,
                    Some(&wb[1]),
                    [stride, stride],
                    [pad, pad],
                    [1, 1],
                    1,
                ),
            };
            inputs.push(img);
            img = y.relu();
        }
        img
    }

    /// Writes the gradient of `sum(traced.out * d_out)` with respect to
    /// `params` into `grad` (flat, `numel()` long), overwriting it. On the
    /// CPU only, as [`FlatNet::forward_traced`].
    pub fn backward_into(&self, params: &Tensor, traced: &Traced, d_out: &Tensor, grad: &Tensor) {
        let flat = host_values(params).expect("hand-written passes run over host parameters");
        let d_out = d_out.contiguous();
        let d_out = host_values(&d_out).expect("host f32 output gradients");
        let n_conv = self.convs.len();
        // The torso's output (after its ReLU), as the MLP saw it.
        let a = &traced.inputs[n_conv];
        let d = {
            let mut g = grad.shallow_clone();
            let g = host_values_mut(&mut g).expect("a host f32 gradient buffer");
            let Some(d) = self.mlp_backward_host(flat, &traced.inputs[n_conv..], d_out, g) else {
                return;
            };
            if let (1, Some(sp)) = (n_conv, &traced.sparse) {
                // The one convolution's ReLU is taken back with its
                // weights.
                let a = host_values(a).expect("the forward's own tensor");
                let offsets = &self.offsets;
                let (gw, gb) = g[offsets[0]..offsets[2]].split_at_mut(offsets[1]);
                sp.weight_grad(&d, a, gw, gb);
                return;
            }
            d
        };
        let shape = traced.torso_out.as_ref().expect("a torso before the MLP");
        let d = a.threshold_backward(&Tensor::from_slice(&d).view(a.size().as_slice()), 0.0);
        self.torso_backward(params, traced, d.view(shape.as_slice()), grad);
    }

    /// The torso's backward from `d`, the gradient of its last
    /// convolution's output before the ReLU.
    fn torso_backward(&self, params: &Tensor, traced: &Traced, mut d: Tensor, grad: &Tensor) {
        let parts = params.split_with_sizes(&self.parts, 0);
        let grads = grad.split_with_sizes(&self.parts, 0);
        for c in (0..self.convs.len()).rev() {
            if let (0, Some(sp)) = (c, &traced.sparse) {
                sparse_weight_grad(sp, &d, &traced.inputs[1], &grads[0], &grads[1]);
                return;
            }
            let (weight, stride, pad) = self.conv_weight(c, &parts[2 * c]);
            let a = &traced.inputs[c];
            let d_input = match self.first_on_host(c, a) {
                Some(dims) => {
                    host_weight_grad(&dims, a, &d, &grads[0], &grads[1]);
                    None
                }
                None => {
                    // (The first layer's input gradient is not needed, but
                    // the kernel writes one: its out-variant takes no
                    // undefined output.)
                    let d_input = a.empty_like();
                    let k = weight.size()[2];
                    let _ = a.internal_slow_conv2d_backward(
                        &d_input,
                        &grads[2 * c].view(self.convs[c].0),
                        &grads[2 * c + 1],
                        &d,
                        &weight,
                        [k, k],
                        [stride, stride],
                        [pad, pad],
                    );
                    Some(d_input)
                }
            };
            let Some(d_input) = d_input.filter(|_| c > 0) else {
                if let Some(s) = self.byte_scale() {
                    // The weights the forward used were `W * s`.
                    let _ = grads[0].shallow_clone().g_mul_scalar_(s);
                }
                return;
            };
            d = a.threshold_backward(&d_input, 0.0);
        }
    }

    /// The first convolution's sizes, where it runs in plain Rust: on
    /// host f32 images, unpadded (`i`: the convolution's index, `img`: its
    /// input).
    fn first_on_host(&self, i: usize, img: &Tensor) -> Option<ConvDims> {
        let ([o, c, k, _], stride, pad) = self.convs[i];
        let [_, _, h, w] = img.size()[..] else {
            return None;
        };
        let host = img.device() == Device::Cpu && img.kind() == Kind::Float;
        (i == 0 && pad == 0 && host && img.is_contiguous()).then_some(ConvDims {
            c: c as usize,
            h: h as usize,
            w: w as usize,
            o: o as usize,
            k: k as usize,
            s: stride as usize,
        })
    }

    /// The first convolution's input `x` (flat images) as its nonzero values, where
    /// it runs on the CPU over sparse bytes or f32 values, unpadded.
    fn sparse_input(&self, x: &Tensor) -> Option<SparseInput> {
        let reach = self.reach.as_ref()?;
        let scale = self.byte_scale().unwrap_or(1.0) as f32;
        match x.kind() {
            Kind::Uint8 => reach.gather(host_slice::<u8>(x)?, scale),
            Kind::Float => reach.gather(host_slice::<f32>(x)?, scale),
            _ => None,
        }
    }

    /// Convolution `i`'s weight as the forward uses it (the first scaled
    /// by 1/255 for bytes), its stride and padding.
    fn conv_weight(&self, i: usize, flat: &Tensor) -> (Tensor, i64, i64) {
        let (shape, stride, pad) = self.convs[i];
        let weight = flat.view(shape);
        let weight = match (i, self.byte_scale()) {
            (0, Some(s)) => weight.g_mul_scalar(s),
            _ => weight,
        };
        (weight, stride, pad)
    }

    fn byte_scale(&self) -> Option<f64> {
        self.shape
            .torso()
            .is_some_and(|t| t.bytes)
            .then_some(1.0 / 255.0)
    }
}

/// [`conv::weight_grad`] of the first convolution from its input
/// `img` and output gradient `d`, into `g_weight` and `g_bias` (views of
/// the CPU gradient buffer).
fn host_weight_grad(dims: &ConvDims, img: &Tensor, d: &Tensor, g_weight: &Tensor, g_bias: &Tensor) {
    let d = d.contiguous();
    let (mut gw, mut gb) = (g_weight.shallow_clone(), g_bias.shallow_clone());
    let (Some(x), Some(dy)) = (host_values(img), host_values(&d)) else {
        unreachable!("first_on_host checked the input; d is contiguous f32")
    };
    let (Some(gw), Some(gb)) = (host_values_mut(&mut gw), host_values_mut(&mut gb)) else {
        unreachable!("the gradient buffer is f32 on the CPU")
    };
    conv::weight_grad(dims, x, dy, gw, gb);
}

/// The ReLU of the first convolution over `sp` (its weight and bias, as
/// stored: a byte scale is in the hits' values) as a fresh tensor.
fn sparse_forward(sp: &SparseInput, weight: &[f32], bias: &[f32]) -> Tensor {
    let (oh, ow) = sp.out_hw();
    let out = [sp.batch() as i64, bias.len() as i64, oh as i64, ow as i64];
    let mut y = Tensor::empty(out, (Kind::Float, Device::Cpu));
    let out = host_values_mut(&mut y).expect("a fresh CPU f32 tensor");
    sp.forward_relu(weight, bias, out);
    y
}

/// The first convolution's weight and bias gradients over `sp`, from
/// `d` (the gradient of its ReLU's output `out`), into views of the
/// gradient buffer.
fn sparse_weight_grad(
    sp: &SparseInput,
    d: &Tensor,
    out: &Tensor,
    g_weight: &Tensor,
    g_bias: &Tensor,
) {
    let (mut gw, mut gb) = (g_weight.shallow_clone(), g_bias.shallow_clone());
    let (Some(d), Some(out)) = (host_values(d), host_values(out)) else {
        unreachable!("a fresh product and the forward's output: contiguous f32")
    };
    let (Some(gw), Some(gb)) = (host_values_mut(&mut gw), host_values_mut(&mut gb)) else {
        unreachable!("the gradient buffer is f32 on the CPU")
    };
    sp.weight_grad(d, out, gw, gb);
}

/// [`conv::forward`] of `img` (`[batch, c, h, w]`, host f32,
/// contiguous) into a fresh `[batch, o, oh, ow]` tensor; `None` where the
/// kernel does not run (no AVX-512).
fn first_conv(d: &ConvDims, img: &Tensor, weight: &Tensor, bias: &Tensor) -> Option<Tensor> {
    let (weight, bias) = (weight.contiguous(), bias.contiguous());
    let (oh, ow) = ((d.h - d.k) / d.s + 1, (d.w - d.k) / d.s + 1);
    let shape = [img.size()[0], d.o as i64, oh as i64, ow as i64];
    let mut y = Tensor::empty(shape, (Kind::Float, Device::Cpu));
    let (x, w, b) = (
        host_values(img)?,
        host_values(&weight)?,
        host_values(&bias)?,
    );
    let out = host_values_mut(&mut y)?;
    conv::forward(d, x, w, b, out).then_some(())?;
    Some(y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_shared::nets::{ConvLayer, ConvTorso, NetShape};
    use tch::Device;

    fn net(channels_last: bool, bytes: bool) -> FlatNet {
        net_of(channels_last, bytes, 2)
    }

    /// Two convolutions, or the first alone.
    fn net_of(channels_last: bool, bytes: bool, convs: usize) -> FlatNet {
        let mut layers = vec![
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
        layers.truncate(convs);
        let torso = ConvTorso {
            input: [3, 9, 9],
            channels_last,
            bytes,
            kind: TorsoKind::Plain,
            layers,
        };
        FlatNet::from_shape(NetShape::with_torso(Some(torso), 243, &[16, 8], 3))
    }

    /// The hand-written gradient against autograd's, for `net` at `x`.
    fn check(net: &FlatNet, x: &Tensor) {
        tch::manual_seed(3);
        let params = net.init(Device::Cpu).set_requires_grad(true);
        let batch = x.size()[0];
        let d_out = Tensor::randn([batch, 3], (Kind::Float, Device::Cpu));
        let loss = (net.forward(&params, x) * &d_out).sum(Kind::Float);
        let [want] = crate::agents::gradients(&loss, [&params]);
        let grad = Tensor::full([net.numel()], f64::NAN, (Kind::Float, Device::Cpu));
        tch::no_grad(|| {
            let traced = net.forward_traced(&params, x);
            assert!(
                traced
                    .out
                    .allclose(&net.forward(&params, x), 1e-6, 1e-6, false)
            );
            net.backward_into(&params, &traced, &d_out, &grad);
        });
        let err = f64::try_from((&grad - &want).abs().max()).unwrap();
        let scale = f64::try_from(want.abs().max()).unwrap();
        assert!(
            scale > 0.0 && err <= 1e-5 * scale,
            "max error {err} of {scale}"
        );
    }

    #[test]
    fn matches_autograd_for_conv_torsos_and_mlps() {
        let x = Tensor::randn([6, 243], (Kind::Float, Device::Cpu)).relu();
        check(&net(false, false), &x);
        check(&net(true, false), &x);
        let bytes = Tensor::randint(256, [6, 243], (Kind::Uint8, Device::Cpu));
        check(&net(true, true), &bytes);
        let mlp = FlatNet::new(7, &[12, 5], 3);
        check(&mlp, &Tensor::randn([4, 7], (Kind::Float, Device::Cpu)));
        check(
            &FlatNet::new(7, &[], 3),
            &Tensor::randn([4, 7], (Kind::Float, Device::Cpu)),
        );
    }

    /// Inputs one value in ten nonzero take the first convolution's
    /// sparse path (`rlfleet_kernels::conv::sparse`): f32 and bytes, channels first and
    /// last, behind a second convolution or straight into the MLP (where
    /// the weight gradient takes the ReLU's backward itself).
    #[test]
    fn sparse_inputs_match_autograd() {
        let opts = (Kind::Float, Device::Cpu);
        let mask = Tensor::rand([6, 243], opts).lt(0.1);
        let x = Tensor::rand([6, 243], opts) * &mask;
        let bytes = (Tensor::randint(255, [6, 243], (Kind::Uint8, Device::Cpu)) + 1) * &mask;
        for convs in [1, 2] {
            for (net, x) in [
                (net_of(false, false, convs), &x),
                (net_of(true, true, convs), &bytes),
                (net_of(true, false, convs), &x),
            ] {
                assert!(net.sparse_input(x).is_some(), "the sparse path");
                check(&net, x);
            }
        }
        // Dense inputs keep the dense loops.
        assert!(
            net(false, false)
                .sparse_input(&Tensor::rand([6, 243], opts))
                .is_none()
        );
    }

    #[test]
    fn residual_torsos_and_recurrent_cores_have_none() {
        let mut torso = net(false, false).shape().torso().cloned().unwrap();
        torso.kind = TorsoKind::Impala;
        let shape = NetShape::with_torso(Some(torso), 243, &[16], 3);
        assert!(!FlatNet::from_shape(shape).has_manual_backward());
        assert!(net(true, true).has_manual_backward());
    }
}
