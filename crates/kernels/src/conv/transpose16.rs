//! Sixteen-by-sixteen transposes in AVX-512 registers, between a
//! convolution's outputs channels last (sixteen channels to a vector,
//! position by position: how `sparse.rs` sums them) and its channel
//! planes (how libtorch's tensors hold them). Element by element the
//! move cost more than the sparse convolution's sums.
//!
//! Every function here is compiled for AVX-512F: call them only once the
//! CPU is checked to have it.

#![cfg(target_arch = "x86_64")]

use super::{L, Lanes};
use std::arch::x86_64::{
    __m512, _CMP_GT_OQ, _mm512_add_ps, _mm512_cmp_ps_mask, _mm512_loadu_ps, _mm512_maskz_mov_ps,
    _mm512_max_ps, _mm512_setzero_ps, _mm512_shuffle_f32x4, _mm512_shuffle_ps, _mm512_storeu_ps,
    _mm512_unpackhi_ps, _mm512_unpacklo_ps,
};

/// Rows `r` (sixteen lanes each) as columns.
#[target_feature(enable = "avx512f")]
fn transpose(r: &[__m512; L]) -> [__m512; L] {
    // Pairs of rows interleaved, then quads, within each 128-bit block:
    // `u[4i + m]`'s block `k` holds column `4k + m` of rows `4i..4i + 4`.
    let t: [__m512; L] = std::array::from_fn(|j| {
        let (a, b) = (r[j & !1], r[j | 1]);
        if j % 2 == 0 {
            _mm512_unpacklo_ps(a, b)
        } else {
            _mm512_unpackhi_ps(a, b)
        }
    });
    let u: [__m512; L] = std::array::from_fn(|j| {
        let (i, m) = (j / 4, j % 4);
        let (a, b) = (t[4 * i + m / 2], t[4 * i + 2 + m / 2]);
        if m % 2 == 0 {
            _mm512_shuffle_ps::<0x44>(a, b)
        } else {
            _mm512_shuffle_ps::<0xEE>(a, b)
        }
    });
    // Then the blocks: column `c` gathers its four row quads.
    let mut out = [_mm512_setzero_ps(); L];
    for m in 0..4 {
        let even = _mm512_shuffle_f32x4::<0x88>(u[m], u[4 + m]);
        let odd = _mm512_shuffle_f32x4::<0xDD>(u[m], u[4 + m]);
        let even2 = _mm512_shuffle_f32x4::<0x88>(u[8 + m], u[12 + m]);
        let odd2 = _mm512_shuffle_f32x4::<0xDD>(u[8 + m], u[12 + m]);
        out[m] = _mm512_shuffle_f32x4::<0x88>(even, even2);
        out[8 + m] = _mm512_shuffle_f32x4::<0xDD>(even, even2);
        out[4 + m] = _mm512_shuffle_f32x4::<0x88>(odd, odd2);
        out[12 + m] = _mm512_shuffle_f32x4::<0xDD>(odd, odd2);
    }
    out
}

/// One group's sums channels last (`acc`: a vector per position) into
/// its `lanes` channel planes of `out` (`[lanes, positions]`), each
/// through a ReLU.
#[target_feature(enable = "avx512f")]
pub(super) fn planes_relu(acc: &[Lanes], out: &mut [f32], positions: usize, lanes: usize) {
    let zero = _mm512_setzero_ps();
    let full = positions / L * L;
    for q in (0..full).step_by(L) {
        let rows: [__m512; L] = std::array::from_fn(|i| {
            // SAFETY: a `Lanes` is sixteen f32, one vector's width.
            #[allow(unsafe_code)]
            unsafe {
                _mm512_loadu_ps(acc[q + i].as_ptr())
            }
        });
        for (c, col) in transpose(&rows).iter().enumerate().take(lanes) {
            let plane = &mut out[c * positions + q..c * positions + q + L];
            // SAFETY: `plane` is sixteen f32.
            #[allow(unsafe_code)]
            unsafe {
                _mm512_storeu_ps(plane.as_mut_ptr(), _mm512_max_ps(*col, zero))
            };
        }
    }
    for (c, plane) in out.chunks_exact_mut(positions).take(lanes).enumerate() {
        for (o, a) in plane[full..].iter_mut().zip(&acc[full..]) {
            *o = a[c].max(0.0);
        }
    }
}

/// One group's `lanes` channel planes of `d` (gradients of a ReLU's
/// outputs `y`, both `[lanes, positions]`) channels last into `dy` (a
/// vector per position; lanes past `lanes` zero), zero where `y` is not
/// positive. Returns their sums over the positions.
#[target_feature(enable = "avx512f")]
pub(super) fn lanes_masked(
    d: &[f32],
    y: &[f32],
    positions: usize,
    lanes: usize,
    dy: &mut [Lanes],
) -> Lanes {
    let zero = _mm512_setzero_ps();
    let mut total = zero;
    let full = positions / L * L;
    for q in (0..full).step_by(L) {
        let rows: [__m512; L] = std::array::from_fn(|c| {
            if c >= lanes {
                return zero;
            }
            let at = c * positions + q;
            let (d, y) = (&d[at..at + L], &y[at..at + L]);
            // SAFETY: `d` and `y` are sixteen f32 each.
            #[allow(unsafe_code)]
            let (d, y) = unsafe { (_mm512_loadu_ps(d.as_ptr()), _mm512_loadu_ps(y.as_ptr())) };
            _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(y, zero), d)
        });
        for (i, col) in transpose(&rows).iter().enumerate() {
            total = _mm512_add_ps(total, *col);
            // SAFETY: a `Lanes` is sixteen f32.
            #[allow(unsafe_code)]
            unsafe {
                _mm512_storeu_ps(dy[q + i].as_mut_ptr(), *col)
            };
        }
    }
    let mut sums = [0f32; L];
    // SAFETY: as above.
    #[allow(unsafe_code)]
    unsafe {
        _mm512_storeu_ps(sums.as_mut_ptr(), total)
    };
    for (p, slot) in dy.iter_mut().enumerate().take(positions).skip(full) {
        *slot = std::array::from_fn(|c| {
            let at = c * positions + p;
            if c < lanes && y[at] > 0.0 { d[at] } else { 0.0 }
        });
        for (s, v) in sums.iter_mut().zip(slot.iter()) {
            *s += v;
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both moves against element-by-element ones, over a full block of
    /// positions and a tail, with a partial group of channels.
    #[test]
    fn moves_agree_with_element_by_element_ones() {
        if !crate::cpu::Features::detected().avx512f {
            return;
        }
        let (positions, lanes) = (37, 11);
        let value = |c: usize, p: usize| (c * 100 + p) as f32 - 500.0;
        let acc: Vec<Lanes> = (0..positions)
            .map(|p| std::array::from_fn(|c| value(c, p)))
            .collect();
        let mut out = vec![f32::NAN; lanes * positions];
        // SAFETY: the CPU was just checked to have AVX-512F.
        #[allow(unsafe_code)]
        unsafe {
            planes_relu(&acc, &mut out, positions, lanes)
        };
        for c in 0..lanes {
            for p in 0..positions {
                assert_eq!(out[c * positions + p], value(c, p).max(0.0), "c {c} p {p}");
            }
        }
        let d: Vec<f32> = (0..lanes * positions)
            .map(|i| i as f32 * 0.5 + 1.0)
            .collect();
        let mut dy = vec![[f32::NAN; L]; positions];
        // SAFETY: as above.
        #[allow(unsafe_code)]
        let sums = unsafe { lanes_masked(&d, &out, positions, lanes, &mut dy) };
        for c in 0..L {
            let mut want = 0.0;
            for p in 0..positions {
                let v = match c < lanes && out[c * positions + p] > 0.0 {
                    true => d[c * positions + p],
                    false => 0.0,
                };
                assert_eq!(dy[p][c], v, "c {c} p {p}");
                want += v;
            }
            assert_eq!(sums[c], want, "sum of c {c}");
        }
    }
}
