//! [`ConvCopy`]: a [`ConvTorso`]'s forward pass in plain Rust over its own
//! copy of the parameters — im2col into a `Dense` layer for convolutions,
//! the same window walk for max-pooling.

use super::torso::{ConvTorso, Op};
use rlfleet_kernels::dense::Dense;

/// A kernel window slid over an image, as convolution and max-pooling
/// both walk it: output pixels in row-major order and, for each, the
/// kernel's taps that fall inside the image (padding contributes nothing).
struct Window {
    kernel: usize,
    stride: usize,
    pad: usize,
    input: [usize; 2],
    output: [usize; 2],
}

impl Window {
    fn new(
        (kernel, stride, pad): (usize, usize, usize),
        input: [usize; 2],
        output: [usize; 2],
    ) -> Window {
        Window {
            kernel,
            stride,
            pad,
            input,
            output,
        }
    }

    /// Output pixels `(row, column)`, row-major.
    fn outputs(&self) -> impl Iterator<Item = (usize, usize)> + use<> {
        let [ho, wo] = self.output;
        (0..ho).flat_map(move |oy| (0..wo).map(move |ox| (oy, ox)))
    }

    /// Calls `f(tap, pixel)` for each tap `i * kernel + j` of output pixel
    /// `(oy, ox)` inside the image; `pixel` is the input pixel's row-major
    /// index.
    #[inline(always)]
    fn taps(&self, oy: usize, ox: usize, mut f: impl FnMut(usize, usize)) {
        let (k, [hin, win]) = (self.kernel, self.input);
        for i in 0..k {
            let Some(y) = (oy * self.stride + i)
                .checked_sub(self.pad)
                .filter(|&y| y < hin)
            else {
                continue;
            };
            for j in 0..k {
                let Some(x) = (ox * self.stride + j)
                    .checked_sub(self.pad)
                    .filter(|&x| x < win)
                else {
                    continue;
                };
                f(i * k + j, y * win + x);
            }
        }
    }
}

/// The torso's forward pass over its own (transposed) copy of the
/// parameters, with reusable buffers.
#[derive(Debug, Clone, Default)]
pub(super) struct ConvCopy {
    /// Per convolution: its weight as a dense layer over patches.
    convs: Vec<Dense>,
    /// Activations, one row of channels per pixel (`[batch, h, w, c]`).
    act: Vec<f32>,
    patches: Vec<f32>,
    next: Vec<f32>,
    saved: Vec<Vec<f32>>,
    out: Vec<f32>,
}

impl ConvCopy {
    /// Takes the torso's part of the flat parameters (the learner's
    /// layout).
    pub(super) fn load(&mut self, torso: &ConvTorso, params: &[f32]) {
        self.convs.clear();
        let mut offset = 0;
        for (w, _, _) in torso.convs() {
            let (out, fan_in) = (w[0], w[1] * w[2] * w[3]);
            let weight = &params[offset..offset + fan_in * out];
            offset += fan_in * out;
            self.convs
                .push(Dense::new(weight, &params[offset..offset + out]));
            offset += out;
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
        self.saved.clear();
        let mut convs = self.convs.iter();
        for (op, at) in torso.geometry() {
            let [cin, hin, win] = at;
            let [_, ho, wo] = op.output(at);
            match op {
                Op::Conv {
                    out,
                    kernel,
                    stride,
                    pad,
                } => {
                    let k = kernel;
                    let fan_in = cin * k * k;
                    // One row per output pixel: the patch in (channel, row,
                    // column) order, the order of the weight's flattened
                    // `[in, k, k]`; zeros outside the image.
                    self.patches.clear();
                    self.patches.resize(batch * ho * wo * fan_in, 0.0);
                    let mut rows = self.patches.chunks_exact_mut(fan_in);
                    let window = Window::new((k, stride, pad), [hin, win], [ho, wo]);
                    for img in self.act.chunks_exact(hin * win * cin) {
                        for (oy, ox) in window.outputs() {
                            let row = rows.next().expect("sized for every pixel");
                            window.taps(oy, ox, |tap, pixel| {
                                let src = &img[pixel * cin..][..cin];
                                for (ch, &v) in src.iter().enumerate() {
                                    row[ch * k * k + tap] = v;
                                }
                            });
                        }
                    }
                    self.next.clear();
                    self.next.resize(batch * ho * wo * out, 0.0);
                    convs.next().expect("one layer per convolution").apply(
                        &self.patches,
                        false,
                        &mut self.next,
                    );
                    std::mem::swap(&mut self.act, &mut self.next);
                }
                Op::Relu => {
                    for v in &mut self.act {
                        *v = v.max(0.0);
                    }
                }
                Op::MaxPool {
                    kernel,
                    stride,
                    pad,
                } => {
                    self.next.clear();
                    self.next.resize(batch * ho * wo * cin, f32::NEG_INFINITY);
                    let window = Window::new((kernel, stride, pad), [hin, win], [ho, wo]);
                    for (img, dst) in self
                        .act
                        .chunks_exact(hin * win * cin)
                        .zip(self.next.chunks_exact_mut(ho * wo * cin))
                    {
                        for (cell, (oy, ox)) in dst.chunks_exact_mut(cin).zip(window.outputs()) {
                            window.taps(oy, ox, |_, pixel| {
                                let src = &img[pixel * cin..][..cin];
                                for (m, &v) in cell.iter_mut().zip(src) {
                                    *m = m.max(v);
                                }
                            });
                        }
                    }
                    std::mem::swap(&mut self.act, &mut self.next);
                }
                Op::Save => self.saved.push(self.act.clone()),
                Op::AddSaved => {
                    let saved = self.saved.pop().expect("a Save before each AddSaved");
                    for (a, s) in self.act.iter_mut().zip(saved) {
                        *a += s;
                    }
                }
            }
        }
        // Channel-major, as the learner flattens.
        let [co, ho, wo] = torso.output_shape();
        let per = co * ho * wo;
        self.out.clear();
        self.out.resize(batch * per, 0.0);
        for (src, dst) in self
            .act
            .chunks_exact(per)
            .zip(self.out.chunks_exact_mut(per))
        {
            for p in 0..ho * wo {
                for ch in 0..co {
                    dst[ch * ho * wo + p] = src[p * co + ch];
                }
            }
        }
        &self.out
    }
}

#[cfg(test)]
mod tests {
    use super::super::torso::out_size;
    use super::*;
    use crate::nets::{ConvLayer, TorsoKind};

    /// The torso by definition, over `[C, H, W]` images, op by op.
    fn naive(torso: &ConvTorso, params: &[f32], x: &[f32]) -> Vec<f32> {
        let mut act: Vec<f32> = x.to_vec();
        let mut saved = Vec::new();
        let mut offset = 0;
        for (op, [cin, hin, win]) in torso.geometry() {
            let at = |act: &[f32], ch: usize, y: isize, x: isize| {
                if y < 0 || x < 0 || y as usize >= hin || x as usize >= win {
                    None
                } else {
                    Some(act[(ch * hin + y as usize) * win + x as usize])
                }
            };
            act = match op {
                Op::Conv {
                    out,
                    kernel: k,
                    stride,
                    pad,
                } => {
                    let (ho, wo) = (out_size(hin, k, stride, pad), out_size(win, k, stride, pad));
                    let bias_at = offset + out * cin * k * k;
                    let mut next = vec![0.0; out * ho * wo];
                    for o in 0..out {
                        for oy in 0..ho {
                            for ox in 0..wo {
                                let mut v = params[bias_at + o];
                                for ch in 0..cin {
                                    for i in 0..k {
                                        for j in 0..k {
                                            let y = (oy * stride + i) as isize - pad as isize;
                                            let x = (ox * stride + j) as isize - pad as isize;
                                            let wgt =
                                                params[offset + ((o * cin + ch) * k + i) * k + j];
                                            v += wgt * at(&act, ch, y, x).unwrap_or(0.0);
                                        }
                                    }
                                }
                                next[(o * ho + oy) * wo + ox] = v;
                            }
                        }
                    }
                    offset = bias_at + out;
                    next
                }
                Op::Relu => act.iter().map(|v| v.max(0.0)).collect(),
                Op::MaxPool {
                    kernel: k,
                    stride,
                    pad,
                } => {
                    let (ho, wo) = (out_size(hin, k, stride, pad), out_size(win, k, stride, pad));
                    let mut next = vec![f32::NEG_INFINITY; cin * ho * wo];
                    for ch in 0..cin {
                        for oy in 0..ho {
                            for ox in 0..wo {
                                for i in 0..k {
                                    for j in 0..k {
                                        let y = (oy * stride + i) as isize - pad as isize;
                                        let x = (ox * stride + j) as isize - pad as isize;
                                        if let Some(v) = at(&act, ch, y, x) {
                                            let m = &mut next[(ch * ho + oy) * wo + ox];
                                            *m = m.max(v);
                                        }
                                    }
                                }
                            }
                        }
                    }
                    next
                }
                Op::Save => {
                    saved.push(act.clone());
                    act
                }
                Op::AddSaved => {
                    let s: Vec<f32> = saved.pop().unwrap();
                    act.iter().zip(&s).map(|(a, b)| a + b).collect()
                }
            };
        }
        act
    }

    fn check_against_naive(torso: &ConvTorso) {
        torso.check().unwrap();
        let params: Vec<f32> = (0..torso.numel())
            .map(|i| ((i * 7919) % 31) as f32 * 0.02 - 0.3)
            .collect();
        let batch = 2;
        let per = torso.obs_dim();
        let x: Vec<f32> = (0..batch * per)
            .map(|i| ((i * 131) % 17) as f32 * 0.1 - 0.5)
            .collect();
        let mut copy = ConvCopy::default();
        copy.load(torso, &params);
        let got = copy.forward(torso, &x, batch).to_vec();
        let want: Vec<f32> = x
            .chunks(per)
            .flat_map(|img| naive(torso, &params, img))
            .collect();
        assert_eq!(got.len(), want.len());
        assert_eq!(got.len(), batch * torso.output_dim());
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() < 1e-4, "feature {i}: {a} vs direct {b}");
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
        let want = naive(torso, &params, &scaled);
        let got = copy.forward(&hwc, &moved, 1).to_vec();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() < 1e-4, "feature {i}: {a} vs direct {b}");
        }
    }

    fn layer(out: usize, kernel: usize, stride: usize) -> ConvLayer {
        ConvLayer {
            out,
            kernel,
            stride,
        }
    }

    #[test]
    fn im2col_forward_matches_a_direct_convolution() {
        let torso = ConvTorso {
            input: [3, 9, 7],
            channels_last: false,
            bytes: false,
            kind: TorsoKind::Plain,
            layers: vec![layer(5, 3, 2), layer(4, 2, 1)],
        };
        let convs: Vec<_> = torso.convs().into_iter().map(|(w, _, _)| w).collect();
        assert_eq!(convs, vec![[5, 3, 3, 3], [4, 5, 2, 2]]);
        assert_eq!(torso.output_shape(), [4, 3, 2]);
        assert_eq!(torso.numel(), 5 * 27 + 5 + 4 * 20 + 4);
        check_against_naive(&torso);
    }

    #[test]
    fn impala_stacks_match_their_definition() {
        let torso = ConvTorso {
            input: [2, 11, 8],
            channels_last: false,
            bytes: false,
            kind: TorsoKind::Impala,
            layers: vec![layer(4, 3, 1), layer(3, 3, 1)],
        };
        // 11x8 -> pool 6x4 -> pool 3x2; 5 convolutions a stack.
        assert_eq!(torso.output_shape(), [3, 3, 2]);
        assert_eq!(torso.convs().len(), 10);
        let first = (4 * 2 * 9 + 4) + 4 * (4 * 4 * 9 + 4);
        let second = (3 * 4 * 9 + 3) + 4 * (3 * 3 * 9 + 3);
        assert_eq!(torso.numel(), first + second);
        check_against_naive(&torso);
        // IMPALA's own 84x84 frames: 42, 21, 11.
        let atari = ConvTorso {
            input: [4, 84, 84],
            channels_last: false,
            bytes: true,
            kind: TorsoKind::Impala,
            layers: vec![layer(16, 3, 1), layer(32, 3, 1), layer(32, 3, 1)],
        };
        assert_eq!(atari.output_shape(), [32, 11, 11]);
    }
}
