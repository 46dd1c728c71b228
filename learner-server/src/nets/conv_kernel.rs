//! The weight gradient of a network's first convolution on the CPU in
//! plain Rust: direct loops vectorised across output channels, four output
//! positions at a time. libtorch's only backward kernel that writes into a
//! given buffer (`_slow_conv2d_backward`) also computes the input's
//! gradient, which the first layer does not need: for MinAtar's 3x3
//! convolution at batch 32 it took 155 µs, this 87 µs.

/// One convolution's sizes (no padding: a plain torso has none).
#[derive(Debug, Clone, Copy)]
pub(super) struct ConvDims {
    /// Input channels, height and width.
    pub c: usize,
    pub h: usize,
    pub w: usize,
    /// Output channels, kernel size and stride.
    pub o: usize,
    pub k: usize,
    pub s: usize,
}

impl ConvDims {
    fn out_hw(&self) -> (usize, usize) {
        (
            (self.h - self.k) / self.s + 1,
            (self.w - self.k) / self.s + 1,
        )
    }

    fn taps(&self) -> usize {
        self.c * self.k * self.k
    }
}

/// The gradients of the convolution's weight (`[o, c, k, k]`) and bias
/// from the output's gradient `dy` (`[batch, o, oh, ow]`), written over
/// `g_weight` and `g_bias`.
pub(super) fn weight_grad(
    d: &ConvDims,
    x: &[f32],
    dy: &[f32],
    g_weight: &mut [f32],
    g_bias: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("fma")
    {
        // SAFETY: the CPU was just checked to have AVX-512F and FMA, the
        // only requirement of a `target_feature` function.
        #[allow(unsafe_code)]
        unsafe {
            weight_grad_avx512(d, x, dy, g_weight, g_bias)
        };
        return;
    }
    weight_grad_pass::<false>(d, x, dy, g_weight, g_bias);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
fn weight_grad_avx512(
    d: &ConvDims,
    x: &[f32],
    dy: &[f32],
    g_weight: &mut [f32],
    g_bias: &mut [f32],
) {
    weight_grad_pass::<true>(d, x, dy, g_weight, g_bias);
}

/// Lanes per vector: output channels go sixteen at a time (AVX-512's
/// width), their count padded up with zeros.
const L: usize = 16;
type Lanes = [f32; L];

/// Positions per block: independent accumulators that hide the
/// multiply-add latency.
const BLOCK: usize = 4;

/// `a * b + c`, fused where the CPU has FMA (one rounding instead of
/// two: results differ from the unfused path in the last bits).
#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// `acc += v * w` across the lanes.
#[inline(always)]
fn lanes_madd<const FMA: bool>(acc: &mut Lanes, v: f32, w: &Lanes) {
    // On copies: with both arrays in memory the compiler cannot rule out
    // that they overlap, and leaves the lanes scalar.
    let (w, mut a) = (*w, *acc);
    for l in 0..L {
        a[l] = madd::<FMA>(v, w[l], a[l]);
    }
    *acc = a;
}

/// Where each output position's window starts in an image, and each
/// tap's offset from there.
fn offsets(d: &ConvDims) -> (Vec<usize>, Vec<usize>) {
    let (oh, ow) = d.out_hw();
    let starts = (0..oh * ow)
        .map(|p| (p / ow) * d.s * d.w + (p % ow) * d.s)
        .collect();
    let k = d.k;
    let taps = (0..d.taps())
        .map(|t| ((t / (k * k)) * d.h + (t / k) % k) * d.w + t % k)
        .collect();
    (starts, taps)
}

#[inline(always)]
fn weight_grad_pass<const FMA: bool>(
    d: &ConvDims,
    x: &[f32],
    dy: &[f32],
    g_weight: &mut [f32],
    g_bias: &mut [f32],
) {
    let (oh, ow) = d.out_hw();
    let (positions, taps, groups) = (oh * ow, d.taps(), d.o.div_ceil(L));
    let (starts, tap_at) = offsets(d);
    let mut by_tap = vec![[0f32; L]; groups * taps];
    // One image's output gradient, channels last in groups of sixteen.
    let mut dy_p: Vec<Lanes> = vec![[0f32; L]; groups * positions];
    g_bias.fill(0.0);
    for (img, dy) in x
        .chunks_exact(d.c * d.h * d.w)
        .zip(dy.chunks_exact(d.o * positions))
    {
        for (oc, plane) in dy.chunks_exact(positions).enumerate() {
            g_bias[oc] += plane.iter().sum::<f32>();
            for (p, &v) in plane.iter().enumerate() {
                dy_p[(oc / L) * positions + p][oc % L] = v;
            }
        }
        for g in 0..groups {
            let dyg = &dy_p[g * positions..(g + 1) * positions];
            for (t, &off) in tap_at.iter().enumerate() {
                let mut acc = [[0f32; L]; BLOCK];
                let mut blocks = dyg.chunks_exact(BLOCK);
                let mut p = 0;
                for block in &mut blocks {
                    for j in 0..BLOCK {
                        let v = img[starts[p + j] + off];
                        lanes_madd::<FMA>(&mut acc[j], v, &block[j]);
                    }
                    p += BLOCK;
                }
                for (j, gv) in blocks.remainder().iter().enumerate() {
                    let v = img[starts[p + j] + off];
                    lanes_madd::<FMA>(&mut acc[0], v, gv);
                }
                let sum = &mut by_tap[g * taps + t];
                for a in &acc {
                    for l in 0..L {
                        sum[l] += a[l];
                    }
                }
            }
        }
    }
    for oc in 0..d.o {
        for t in 0..taps {
            g_weight[oc * taps + t] = by_tap[(oc / L) * taps + t][oc % L];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against autograd through libtorch's convolution, with a stride and
    /// channel counts that fill no whole vector.
    #[test]
    fn matches_libtorch() {
        use tch::{Device, Kind, Tensor};
        let d = ConvDims {
            c: 3,
            h: 9,
            w: 7,
            o: 5,
            k: 3,
            s: 2,
        };
        let (oh, ow) = d.out_hw();
        let opts = (Kind::Float, Device::Cpu);
        tch::manual_seed(5);
        let x = Tensor::randn([4, 3, 9, 7], opts).relu();
        let weight = Tensor::randn([5, 3, 3, 3], opts).set_requires_grad(true);
        let bias = Tensor::randn([5], opts).set_requires_grad(true);
        let dy = Tensor::randn([4, 5, oh as i64, ow as i64], opts);
        let y = x.conv2d(&weight, Some(&bias), [2, 2], [0, 0], [1, 1], 1);
        let [gw_want, gb_want] =
            crate::agents::gradients(&(&y * &dy).sum(Kind::Float), [&weight, &bias]);
        let v = |t: &Tensor| Vec::<f32>::try_from(t.detach().flatten(0, -1)).unwrap();
        let (mut gw, mut gb) = (vec![f32::NAN; 5 * 27], vec![f32::NAN; 5]);
        weight_grad(&d, &v(&x), &v(&dy), &mut gw, &mut gb);
        for (got, want) in [(gw, v(&gw_want)), (gb, v(&gb_want))] {
            assert_eq!(got.len(), want.len());
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "[{i}]: {a} vs {b}");
            }
        }
    }
}
