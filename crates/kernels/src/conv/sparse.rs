//! A network's first convolution over sparse inputs, on the CPU. MinAtar's
//! bool planes are mostly zeros (Breakout's about one value in twelve), so
//! the forward adds each nonzero input's weighted taps into the outputs it
//! reaches, and the weight gradient sums each nonzero's products with the
//! output gradients it reached, instead of sweeping every window. The
//! observations are read as they come (bytes or f32, channels first or
//! last): no conversion, permutation or copy of the batch first. Inputs
//! more than a quarter nonzero take the dense loops (`conv/mod.rs`) instead.

#[cfg(target_arch = "x86_64")]
use super::transpose16;
use super::{ConvDims, L, Lanes, grouped};
use std::sync::Arc;

/// One output an input value reaches: the output position and the
/// weight's tap (`(channel · k + row) · k + column`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hit {
    p: u32,
    t: u32,
}

/// A batch of sparse inputs to a convolution: each image's nonzero values
/// and their places.
#[derive(Debug)]
pub struct SparseInput {
    reach: Arc<Reach>,
    /// Where each image's values start in `nonzeros` (one more than the
    /// batch).
    starts: Vec<usize>,
    nonzeros: Vec<(u32, f32)>,
}

/// Which outputs each input value reaches: for each place in an
/// observation (in its own layout), its (output position, tap) pairs.
/// Worked out once per network: the gather then does no division.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    dims: ConvDims,
    /// Where each place's hits start in `hits` (one more than places).
    starts: Vec<u32>,
    hits: Vec<Hit>,
}

impl Reach {
    /// For a convolution of `dims` over observations laid out channels
    /// last (`[h, w, c]`) or first (`[c, h, w]`).
    pub fn new(dims: &ConvDims, channels_last: bool) -> Reach {
        let d = *dims;
        let (oh, ow) = d.out_hw();
        // The output rows (or columns) that kernel row (column) `kk` at
        // input row (column) `i` reaches: `(i - kk) / s`, where that is
        // whole and in range.
        let reach = |i: usize, kk: usize, n: usize| {
            let r = i.checked_sub(kk)?;
            (r % d.s == 0 && r / d.s < n).then_some(r / d.s)
        };
        let mut starts = Vec::with_capacity(d.c * d.h * d.w + 1);
        let mut hits = Vec::new();
        for at in 0..d.c * d.h * d.w {
            starts.push(hits.len() as u32);
            let (c, i, j) = if channels_last {
                (at % d.c, at / d.c / d.w, at / d.c % d.w)
            } else {
                (at / (d.h * d.w), at / d.w % d.h, at % d.w)
            };
            for ky in 0..d.k {
                let Some(oy) = reach(i, ky, oh) else { continue };
                for kx in 0..d.k {
                    let Some(ox) = reach(j, kx, ow) else { continue };
                    let t = (c * d.k + ky) * d.k + kx;
                    hits.push(Hit {
                        p: (oy * ow + ox) as u32,
                        t: t as u32,
                    });
                }
            }
        }
        starts.push(hits.len() as u32);
        Reach {
            dims: d,
            starts,
            hits,
        }
    }

    /// The nonzero values of `x` (`[batch, c · h · w]` in this layout),
    /// each times `scale`; `None` where more than a quarter of the values
    /// are nonzero (the dense loops win there).
    pub fn gather<T: Copy + Default + PartialEq + Into<f32>>(
        self: &Arc<Reach>,
        x: &[T],
        scale: f32,
    ) -> Option<SparseInput> {
        let d = self.dims;
        let per = d.c * d.h * d.w;
        let limit = x.len() / 4;
        let mut starts = Vec::with_capacity(x.len() / per.max(1) + 1);
        let mut nonzeros = Vec::with_capacity(limit / 2);
        let zero = T::default();
        for img in x.chunks_exact(per) {
            starts.push(nonzeros.len());
            for (block, run) in img.chunks(8).enumerate() {
                if run.iter().all(|&v| v == zero) {
                    continue;
                }
                for (at, &v) in (block * 8..).zip(run) {
                    if v != zero {
                        nonzeros.push((at as u32, v.into() * scale));
                    }
                }
            }
            if nonzeros.len() > limit {
                return None;
            }
        }
        starts.push(nonzeros.len());
        Some(SparseInput {
            reach: Arc::clone(self),
            starts,
            nonzeros,
        })
    }

    /// The outputs the value at place `at` reaches.
    fn hits(&self, at: u32) -> &[Hit] {
        let at = at as usize;
        &self.hits[self.starts[at] as usize..self.starts[at + 1] as usize]
    }
}

impl SparseInput {
    pub fn batch(&self) -> usize {
        self.starts.len() - 1
    }

    /// The output's height and width.
    pub fn out_hw(&self) -> (usize, usize) {
        self.reach.dims.out_hw()
    }

    /// Image `n`'s nonzero values and their places.
    fn image(&self, n: usize) -> &[(u32, f32)] {
        &self.nonzeros[self.starts[n]..self.starts[n + 1]]
    }

    /// `y` (`[batch, o, oh, ow]`) = ReLU(the convolution with `weight`
    /// (`[o, c, k, k]`) plus `bias`).
    pub fn forward_relu(&self, weight: &[f32], bias: &[f32], y: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::avx512f() {
            // SAFETY: `crate::cpu` (which detected it on this CPU) allows AVX-512F, the only
            // requirement of a `target_feature` function.
            #[allow(unsafe_code)]
            unsafe {
                self.forward_avx512(weight, bias, y)
            };
            return;
        }
        self.forward_pass::<false>(weight, bias, y);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn forward_avx512(&self, weight: &[f32], bias: &[f32], y: &mut [f32]) {
        self.forward_pass::<true>(weight, bias, y);
    }

    /// The forward's loops, sixteen output channels side by side;
    /// `AVX512`: the hits' sums in AVX-512 intrinsics (only from
    /// `forward_avx512`).
    #[inline(always)]
    pub(super) fn forward_pass<const AVX512: bool>(
        &self,
        weight: &[f32],
        bias: &[f32],
        y: &mut [f32],
    ) {
        let d = &self.reach.dims;
        let (oh, ow) = d.out_hw();
        let (positions, taps, groups) = (oh * ow, d.taps(), d.o.div_ceil(L));
        let (by_tap, bias16) = grouped(d, weight, bias);
        let mut acc: Vec<Lanes> = vec![[0f32; L]; groups * positions];
        for (n, out) in y.chunks_exact_mut(d.o * positions).enumerate() {
            for (g, b) in bias16.iter().enumerate() {
                acc[g * positions..(g + 1) * positions].fill(*b);
            }
            for g in 0..groups {
                let to = &mut acc[g * positions..(g + 1) * positions];
                let from = &by_tap[g * taps..(g + 1) * taps];
                self.add_hits::<AVX512>(n, to, |h| h.p, from, |h| h.t);
            }
            #[cfg(target_arch = "x86_64")]
            if AVX512 {
                for g in 0..groups {
                    let lanes = (d.o - g * L).min(L);
                    let acc = &acc[g * positions..(g + 1) * positions];
                    let out = &mut out[g * L * positions..(g * L + lanes) * positions];
                    // SAFETY: as in `add_hits`.
                    #[allow(unsafe_code)]
                    unsafe {
                        transpose16::planes_relu(acc, out, positions, lanes)
                    };
                }
                continue;
            }
            for (oc, plane) in out.chunks_exact_mut(positions).enumerate() {
                let (g, l) = (oc / L, oc % L);
                for (o, a) in plane.iter_mut().zip(&acc[g * positions..]) {
                    *o = a[l].max(0.0);
                }
            }
        }
    }

    /// The gradients of the weight (`[o, c, k, k]`) and bias, written over
    /// `g_weight` and `g_bias`, from `d_out`, the gradient of the ReLU's
    /// output `out` (both `[batch, o, oh, ow]`): the ReLU's backward is
    /// taken here.
    pub fn weight_grad(
        &self,
        d_out: &[f32],
        out: &[f32],
        g_weight: &mut [f32],
        g_bias: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::avx512f() {
            // SAFETY: as in `forward_relu`.
            #[allow(unsafe_code)]
            unsafe {
                self.weight_grad_avx512(d_out, out, g_weight, g_bias)
            };
            return;
        }
        self.weight_grad_pass::<false>(d_out, out, g_weight, g_bias);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn weight_grad_avx512(&self, d_out: &[f32], out: &[f32], gw: &mut [f32], gb: &mut [f32]) {
        self.weight_grad_pass::<true>(d_out, out, gw, gb);
    }

    /// The weight gradient's loops (`AVX512` as in `forward_pass`).
    #[inline(always)]
    pub(super) fn weight_grad_pass<const AVX512: bool>(
        &self,
        d_out: &[f32],
        out: &[f32],
        gw: &mut [f32],
        gb: &mut [f32],
    ) {
        let d = &self.reach.dims;
        let (oh, ow) = d.out_hw();
        let (positions, taps, groups) = (oh * ow, d.taps(), d.o.div_ceil(L));
        let mut sums: Vec<Lanes> = vec![[0f32; L]; groups * taps];
        // One image's output gradient, channels last in groups of sixteen.
        let mut dy: Vec<Lanes> = vec![[0f32; L]; groups * positions];
        let mut bias = vec![0f32; d.o];
        let per = d.o * positions;
        for (n, (d_img, out_img)) in d_out
            .chunks_exact(per)
            .zip(out.chunks_exact(per))
            .enumerate()
        {
            self.to_lanes::<AVX512>(d_img, out_img, &mut dy, &mut bias);
            for g in 0..groups {
                let to = &mut sums[g * taps..(g + 1) * taps];
                let from = &dy[g * positions..(g + 1) * positions];
                self.add_hits::<AVX512>(n, to, |h| h.t, from, |h| h.p);
            }
        }
        for oc in 0..d.o {
            for t in 0..taps {
                gw[oc * taps + t] = sums[(oc / L) * taps + t][oc % L];
            }
        }
        gb.copy_from_slice(&bias);
    }

    /// One image's output gradients `d_img` (channel planes) through the
    /// ReLU whose outputs are `out_img`, channels last into `dy` (a group
    /// of sixteen channels after another); their sums over the positions
    /// added to `bias`.
    #[inline(always)]
    fn to_lanes<const AVX512: bool>(
        &self,
        d_img: &[f32],
        out_img: &[f32],
        dy: &mut [Lanes],
        bias: &mut [f32],
    ) {
        let d = &self.reach.dims;
        let (oh, ow) = d.out_hw();
        let positions = oh * ow;
        #[cfg(target_arch = "x86_64")]
        if AVX512 {
            for g in 0..d.o.div_ceil(L) {
                let lanes = (d.o - g * L).min(L);
                let planes = g * L * positions..(g * L + lanes) * positions;
                let (d_g, y_g) = (&d_img[planes.clone()], &out_img[planes]);
                let dy = &mut dy[g * positions..(g + 1) * positions];
                // SAFETY: as in `add_hits`.
                #[allow(unsafe_code)]
                let sums = unsafe { transpose16::lanes_masked(d_g, y_g, positions, lanes, dy) };
                for (b, s) in bias[g * L..g * L + lanes].iter_mut().zip(sums) {
                    *b += s;
                }
            }
            return;
        }
        for (oc, (dp, op)) in d_img
            .chunks_exact(positions)
            .zip(out_img.chunks_exact(positions))
            .enumerate()
        {
            let (g, l) = (oc / L, oc % L);
            let mut total = 0.0;
            for ((slot, &gv), &ov) in dy[g * positions..].iter_mut().zip(dp).zip(op) {
                let v = if ov > 0.0 { gv } else { 0.0 };
                slot[l] = v;
                total += v;
            }
            bias[oc] += total;
        }
    }
}

impl SparseInput {
    /// For each nonzero value `v` of image `n` and each output `h` it
    /// reaches: `to[at(h)] += v · from[of(h)]`, sixteen lanes at a time;
    /// `AVX512`: in AVX-512 intrinsics (the compiler left the plain loop's
    /// lanes one at a time).
    #[inline(always)]
    fn add_hits<const AVX512: bool>(
        &self,
        n: usize,
        to: &mut [Lanes],
        at: impl Fn(&Hit) -> u32,
        from: &[Lanes],
        of: impl Fn(&Hit) -> u32,
    ) {
        for &(place, v) in self.image(n) {
            for h in self.reach.hits(place) {
                let (to, from) = (&mut to[at(h) as usize], &from[of(h) as usize]);
                #[cfg(target_arch = "x86_64")]
                if AVX512 {
                    // SAFETY: `AVX512` is set only by functions compiled
                    // for AVX-512F, which run once the CPU is checked to
                    // have it.
                    #[allow(unsafe_code)]
                    unsafe {
                        axpy_avx512(to, v, from)
                    };
                    continue;
                }
                for (a, x) in to.iter_mut().zip(from) {
                    *a += v * x;
                }
            }
        }
    }
}

/// `to += v · from` on sixteen lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn axpy_avx512(to: &mut Lanes, v: f32, from: &Lanes) {
    use std::arch::x86_64::{_mm512_fmadd_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_storeu_ps};
    // SAFETY: a `Lanes` is sixteen f32, one vector's width.
    #[allow(unsafe_code)]
    unsafe {
        let sum = _mm512_fmadd_ps(
            _mm512_set1_ps(v),
            _mm512_loadu_ps(from.as_ptr()),
            _mm512_loadu_ps(to.as_ptr()),
        );
        _mm512_storeu_ps(to.as_mut_ptr(), sum);
    }
}
