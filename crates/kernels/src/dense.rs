//! [`Dense`]: one fully connected layer laid out for the plain-Rust forward
//! pass, and the vectorised kernel that applies it (AVX2 + FMA when the CPU
//! has them).
//!
//! Outputs come in two parts. The first multiple of [`BLOCK`] outputs keep
//! their weights transposed (`[fan_in, wide]`): a block of outputs is a sum
//! of input-scaled weight rows held in independent accumulators, no
//! horizontal sums. The rest (a Q-head's few actions, a 32-channel
//! convolution) keep PyTorch's rows (`[fan_out - wide, fan_in]`) and are dot
//! products over the input, two outputs at a time, so a narrow layer is not
//! one long chain of dependent multiply-adds per output.

/// Outputs summed together in the wide part: eight vector registers under
/// AVX2.
const BLOCK: usize = 64;
/// Lanes per dot-product accumulator (four AVX2 registers).
const LANES: usize = 32;

/// One layer's weights and bias, laid out for [`Dense::apply`].
#[derive(Debug, Clone, Default)]
pub struct Dense {
    fan_in: usize,
    /// Outputs in the transposed part (a multiple of [`BLOCK`]).
    wide: usize,
    /// `[fan_in, wide]`.
    w_t: Vec<f32>,
    /// `[fan_out - wide, fan_in]`.
    rows: Vec<f32>,
    bias: Vec<f32>,
}

impl Dense {
    /// From PyTorch's layout: `weight` is `[fan_out, fan_in]` row-major
    /// (a convolution's `[out, in, k, k]` is the same with `fan_in = in * k
    /// * k`).
    pub fn new(weight: &[f32], bias: &[f32]) -> Dense {
        let fan_out = bias.len();
        let fan_in = weight.len() / fan_out.max(1);
        assert_eq!(
            weight.len(),
            fan_in * fan_out,
            "weight is [fan_out, fan_in]"
        );
        let wide = fan_out - fan_out % BLOCK;
        // The transpose in tiles of `TILE` inputs: each row's run is read
        // in order, and the tile's output lines stay in cache while every
        // output's value for them is written (MinAtar DQN's copy, 1024 x
        // 128 inside, refreshes in about a third of the time a
        // column-by-column gather took: `rlfleet-bench inference`).
        const TILE: usize = 64;
        let mut w_t = vec![0f32; fan_in * wide];
        for k0 in (0..fan_in).step_by(TILE) {
            let k1 = (k0 + TILE).min(fan_in);
            for j in 0..wide {
                let row = &weight[j * fan_in + k0..j * fan_in + k1];
                for (k, &v) in (k0..k1).zip(row) {
                    w_t[k * wide + j] = v;
                }
            }
        }
        Dense {
            fan_in,
            wide,
            w_t,
            rows: weight[wide * fan_in..].to_vec(),
            bias: bias.to_vec(),
        }
    }

    pub fn fan_out(&self) -> usize {
        self.bias.len()
    }

    /// `y[b] = act(bias + W · x[b])` for every row `b` of `x` (`y` holds
    /// `rows * fan_out` values), with the fastest kernel this CPU runs.
    pub fn apply(&self, x: &[f32], relu: bool, y: &mut [f32]) {
        assert_eq!(
            x.len() / self.fan_in.max(1),
            y.len() / self.fan_out().max(1)
        );
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::avx2_fma() {
            // SAFETY: `crate::cpu` (which detected it on this CPU) allows AVX2 and FMA, the
            // only requirement of a `target_feature` function. (The
            // workspace denies unsafe code; calls like this one are
            // allowed one by one.)
            #[allow(unsafe_code)]
            unsafe {
                apply_avx2(self, x, relu, y)
            };
            return;
        }
        kernel::<false>(self, x, relu, y);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn apply_avx2(d: &Dense, x: &[f32], relu: bool, y: &mut [f32]) {
    kernel::<true>(d, x, relu, y);
}

/// `a * b + c`, fused where the CPU has it (elsewhere a fused multiply-add
/// is a slow library call).
#[inline(always)]
fn fma<const FUSED: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FUSED { a.mul_add(b, c) } else { c + a * b }
}

/// The kernel; inlined into each feature-specific wrapper so the compiler
/// vectorises its loops for that instruction set.
#[inline(always)]
fn kernel<const FUSED: bool>(d: &Dense, x: &[f32], relu: bool, y: &mut [f32]) {
    let (fan_in, wide, fan_out) = (d.fan_in, d.wide, d.fan_out());
    for (row, out) in x.chunks_exact(fan_in).zip(y.chunks_exact_mut(fan_out)) {
        for j in (0..wide).step_by(BLOCK) {
            let mut acc = [0f32; BLOCK];
            acc.copy_from_slice(&d.bias[j..j + BLOCK]);
            for (&xk, wk) in row.iter().zip(d.w_t.chunks_exact(wide)) {
                let w: &[f32; BLOCK] = wk[j..j + BLOCK].try_into().expect("block");
                for l in 0..BLOCK {
                    acc[l] = fma::<FUSED>(xk, w[l], acc[l]);
                }
            }
            out[j..j + BLOCK].copy_from_slice(&acc);
        }
        let narrow = &mut out[wide..];
        let bias = &d.bias[wide..];
        let mut pairs = d.rows.chunks_exact(2 * fan_in);
        for ((o, b), w) in narrow
            .chunks_exact_mut(2)
            .zip(bias.chunks_exact(2))
            .zip(&mut pairs)
        {
            let (s0, s1) = dot2::<FUSED>(row, &w[..fan_in], &w[fan_in..]);
            o[0] = b[0] + s0;
            o[1] = b[1] + s1;
        }
        if fan_out % 2 == 1 {
            let w = pairs.remainder();
            let (s, _) = dot2::<FUSED>(row, w, w);
            out[fan_out - 1] = bias[bias.len() - 1] + s;
        }
        if relu {
            for a in out.iter_mut() {
                *a = a.max(0.0);
            }
        }
    }
}

/// `(x · a, x · b)`, in [`LANES`]-wide partial sums.
#[inline(always)]
fn dot2<const FUSED: bool>(x: &[f32], a: &[f32], b: &[f32]) -> (f32, f32) {
    let mut sa = [0f32; LANES];
    let mut sb = [0f32; LANES];
    let mut xs = x.chunks_exact(LANES);
    for ((xc, ac), bc) in (&mut xs)
        .zip(a.chunks_exact(LANES))
        .zip(b.chunks_exact(LANES))
    {
        for l in 0..LANES {
            sa[l] = fma::<FUSED>(xc[l], ac[l], sa[l]);
            sb[l] = fma::<FUSED>(xc[l], bc[l], sb[l]);
        }
    }
    let done = x.len() - xs.remainder().len();
    for (l, &xk) in xs.remainder().iter().enumerate() {
        sa[l] = fma::<FUSED>(xk, a[done + l], sa[l]);
        sb[l] = fma::<FUSED>(xk, b[done + l], sb[l]);
    }
    (fold(sa), fold(sb))
}

/// The sum of the lanes, halving (a tree, as a vector unit folds).
#[inline(always)]
fn fold(mut s: [f32; LANES]) -> f32 {
    let mut n = LANES;
    while n > 1 {
        n /= 2;
        for l in 0..n {
            s[l] += s[l + n];
        }
    }
    s[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `act(bias + W x)` row by row, the definition.
    fn naive(weight: &[f32], bias: &[f32], x: &[f32], relu: bool) -> Vec<f32> {
        let fan_out = bias.len();
        let fan_in = weight.len() / fan_out;
        let mut y = Vec::new();
        for row in x.chunks(fan_in) {
            for j in 0..fan_out {
                let mut v = bias[j];
                for k in 0..fan_in {
                    v += weight[j * fan_in + k] * row[k];
                }
                y.push(if relu { v.max(0.0) } else { v });
            }
        }
        y
    }

    /// Both kernels against the definition, on widths that exercise the
    /// wide part, the pairs and the odd output, inputs shorter and longer
    /// than the lanes, and more than one transpose tile with a short last
    /// one (150 inputs).
    #[test]
    fn kernels_agree_with_the_definition() {
        let sizes = [
            (4, 64),
            (64, 2),
            (5, 13),
            (37, 131),
            (100, 1),
            (3, 65),
            (150, 33),
        ];
        for (fan_in, fan_out) in sizes {
            let weight: Vec<f32> = (0..fan_in * fan_out)
                .map(|i| ((i * 7919) % 23) as f32 * 0.05 - 0.5)
                .collect();
            let bias: Vec<f32> = (0..fan_out).map(|j| (j % 5) as f32 * 0.1 - 0.2).collect();
            let x: Vec<f32> = (0..3 * fan_in)
                .map(|i| (i % 6) as f32 * 0.3 - 0.7)
                .collect();
            let d = Dense::new(&weight, &bias);
            for relu in [false, true] {
                let want = naive(&weight, &bias, &x, relu);
                let mut fast = vec![f32::NAN; 3 * fan_out];
                d.apply(&x, relu, &mut fast);
                let mut portable = vec![f32::NAN; 3 * fan_out];
                kernel::<false>(&d, &x, relu, &mut portable);
                for (i, w) in want.iter().enumerate() {
                    for (what, got) in [("dispatched", fast[i]), ("portable", portable[i])] {
                        assert!(
                            (got - w).abs() < 1e-4,
                            "{fan_in}->{fan_out} relu {relu} {what} y[{i}] = {got}, want {w}"
                        );
                    }
                }
            }
        }
    }
}
