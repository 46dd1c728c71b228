//! Matrix products on host f32 slices with no libtorch operation around
//! them (a small network's update on the CPU paid more for each
//! operation's dispatch, checks and output allocation than for many of
//! the products themselves): `rlfleet_kernels`' AVX-512 loops where the
//! CPU has them and the shape suits, else the BLAS libtorch carries (MKL's
//! `sgemm_`, through `rlfleet_kernels::blas`), else, where that symbol is
//! missing (a libtorch built without MKL), libtorch's `mm` on views of the
//! same slices.

use tch::{Device, Kind, Tensor};

/// `c = op(a) · op(b)`, all row-major: `op(a)` is `[m, k]` (`a` stored
/// `[k, m]` when `a_t`), `op(b)` is `[k, n]` (`b` stored `[n, k]` when
/// `b_t`); `c` (`[m, n]`) is overwritten.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm(
    (m, n, k): (usize, usize, usize),
    a: &[f32],
    a_t: bool,
    b: &[f32],
    b_t: bool,
    c: &mut [f32],
) {
    assert!(
        a.len() == m * k && b.len() == k * n && c.len() == m * n,
        "gemm: sizes"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if rlfleet_kernels::gemm_avx512::gemm((m, n, k), a, a_t, b, b_t, c) {
        return;
    }
    if !rlfleet_kernels::blas::sgemm((m, n, k), a, a_t, b, b_t, c) {
        gemm_libtorch((m, n, k), a, a_t, b, b_t, c);
    }
}

/// [`gemm`] through libtorch's `mm` on views of the slices.
fn gemm_libtorch(
    (m, n, k): (usize, usize, usize),
    a: &[f32],
    a_t: bool,
    b: &[f32],
    b_t: bool,
    c: &mut [f32],
) {
    let view = |v: &[f32], rows: usize, cols: usize, t: bool| {
        let (r, cl) = if t { (cols, rows) } else { (rows, cols) };
        // SAFETY: `v` holds `r · cl` values (checked by the caller) and
        // stays borrowed until the view is dropped, below.
        #[allow(unsafe_code)]
        let x = unsafe { blob(v.as_ptr(), r, cl) };
        if t { x.tr() } else { x }
    };
    let (a, b) = (view(a, m, k, a_t), view(b, k, n, b_t));
    // SAFETY: as above, for `c`, borrowed mutably: the product is written
    // into it and the view dropped here.
    #[allow(unsafe_code)]
    let out = unsafe { blob(c.as_mut_ptr(), m, n) };
    tch::no_grad(|| {
        let _ = a.mm_out(&out, &b);
    });
}

/// A `[rows, cols]` tensor over the `rows · cols` f32 values at `at`.
///
/// # Safety
/// `at` must point to that many values, which must outlive the tensor
/// (it does not own them), and nothing else may write them meanwhile.
#[allow(unsafe_code)]
unsafe fn blob(at: *const f32, rows: usize, cols: usize) -> Tensor {
    let shape = [rows as i64, cols as i64];
    // SAFETY: as the caller promises.
    unsafe { Tensor::from_blob(at.cast(), &shape, &[], Kind::Float, Device::Cpu) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every transpose case against libtorch's product, through the
    /// kernels, BLAS and the fallback, at sizes that fill no whole block
    /// or vector and at the MinAtar layer's.
    #[test]
    fn products_match_libtorch() {
        assert!(
            rlfleet_kernels::blas::available(),
            "libtorch's BLAS has sgemm_"
        );
        let shapes = [
            (5, 7, 3),
            (13, 37, 50),
            (9, 40, 17),
            (1, 16, 16),
            (32, 128, 1024),
        ];
        for (m, n, k) in shapes {
            for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
                let a = Tensor::randn([m, k], (Kind::Float, Device::Cpu));
                let b = Tensor::randn([k, n], (Kind::Float, Device::Cpu));
                let want = Vec::<f32>::try_from(a.mm(&b).flatten(0, -1)).unwrap();
                let stored = |t: &Tensor, tr: bool| {
                    let t = if tr {
                        t.tr().contiguous()
                    } else {
                        t.shallow_clone()
                    };
                    Vec::<f32>::try_from(t.flatten(0, -1)).unwrap()
                };
                let (sa, sb) = (stored(&a, a_t), stored(&b, b_t));
                let dims = (m as usize, n as usize, k as usize);
                let mut got = [
                    vec![f32::NAN; want.len()],
                    vec![f32::NAN; want.len()],
                    vec![f32::NAN; want.len()],
                ];
                gemm(dims, &sa, a_t, &sb, b_t, &mut got[0]);
                assert!(rlfleet_kernels::blas::sgemm(
                    dims,
                    &sa,
                    a_t,
                    &sb,
                    b_t,
                    &mut got[1]
                ));
                gemm_libtorch(dims, &sa, a_t, &sb, b_t, &mut got[2]);
                for got in got {
                    for (g, w) in got.iter().zip(&want) {
                        let tol = 1e-5 * (k as f32).sqrt() * (1.0 + w.abs());
                        assert!((g - w).abs() <= tol, "{m}x{n}x{k} {a_t} {b_t}: {g} vs {w}");
                    }
                }
            }
        }
    }
}
