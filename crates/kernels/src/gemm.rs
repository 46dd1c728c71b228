//! [`gemm`]: the one entry for a network's matrix products on host
//! slices. Each product goes where `rlfleet-bench products` measured it
//! fastest on the networks the benchmarks train: the hand-written AVX-512
//! loops (`gemm_avx512`) where they win, else the `matrixmultiply` crate
//! (pure Rust, BLIS's micro-kernels, its own runtime choice of AVX/FMA).
//! On the shapes measured, the loops beat `matrixmultiply` by 1.1–7.9×
//! wherever they run, and `matrixmultiply` beat MKL's `sgemm_` (which
//! this entry used to fall back to, with libtorch's `mm` after it) by
//! 1.2–3.3× on every shape the loops decline. The loops lose on one form:
//! `x · Wᵀ` with fewer than 128 inputs and 16 or more outputs (CartPole's
//! hidden layer: `matrixmultiply` 0.75–0.98× their time), which goes to
//! `matrixmultiply` here.

/// `c = op(a) · op(b)`, all row-major: `op(a)` is `[m, k]` (`a` stored
/// `[k, m]` when `a_t`), `op(b)` is `[k, n]` (`b` stored `[n, k]` when
/// `b_t`); `c` (`[m, n]`) is overwritten.
pub fn gemm(
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
    let narrow_dots = !a_t && b_t && n >= 16 && k < 128;
    #[cfg(target_arch = "x86_64")]
    if !narrow_dots && crate::gemm_avx512::gemm((m, n, k), a, a_t, b, b_t, c) {
        return;
    }
    matrixmultiply((m, n, k), a, a_t, b, b_t, c);
}

/// [`gemm`] through `matrixmultiply` alone, reading the operands where
/// they lie (its strides express the transposes); `k` > 0.
pub fn matrixmultiply(
    (m, n, k): (usize, usize, usize),
    a: &[f32],
    a_t: bool,
    b: &[f32],
    b_t: bool,
    c: &mut [f32],
) {
    assert!(a.len() == m * k && b.len() == k * n && c.len() == m * n);
    let (rsa, csa) = if a_t {
        (1, m as isize)
    } else {
        (k as isize, 1)
    };
    let (rsb, csb) = if b_t {
        (1, k as isize)
    } else {
        (n as isize, 1)
    };
    // SAFETY: the strides describe `op(a)` (`[m, k]`) and `op(b)`
    // (`[k, n]`) within their slices (lengths checked above), and `c` as
    // `[m, n]` row-major, borrowed mutably and distinct from both; with
    // beta 0 `c` is only written.
    #[allow(unsafe_code)]
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            rsa,
            csa,
            b.as_ptr(),
            rsb,
            csb,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A product's operands, stored both ways, and its value by the
    /// definition (summed in f64).
    pub(crate) struct Case {
        pub a: Vec<f32>,
        pub b: Vec<f32>,
        pub a_t: Vec<f32>,
        pub b_t: Vec<f32>,
        pub want: Vec<f32>,
    }

    impl Case {
        pub fn new((m, n, k): (usize, usize, usize)) -> Case {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
                .collect();
            let mut want = vec![0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    let s: f64 = (0..k)
                        .map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j]))
                        .sum();
                    want[i * n + j] = s as f32;
                }
            }
            let transposed = |v: &[f32], rows: usize, cols: usize| {
                let mut t = vec![0f32; v.len()];
                for r in 0..rows {
                    for c in 0..cols {
                        t[c * rows + r] = v[r * cols + c];
                    }
                }
                t
            };
            Case {
                a_t: transposed(&a, m, k),
                b_t: transposed(&b, k, n),
                a,
                b,
                want,
            }
        }

        /// The operands as stored for `(a_t, b_t)`.
        pub fn stored(&self, a_t: bool, b_t: bool) -> (&[f32], &[f32]) {
            (
                if a_t { &self.a_t } else { &self.a },
                if b_t { &self.b_t } else { &self.b },
            )
        }

        /// Panics unless `got` is the definition's value, to rounding.
        pub fn check(&self, what: &str, k: usize, got: &[f32]) {
            for (g, w) in got.iter().zip(&self.want) {
                let tol = 1e-5 * (k as f32).sqrt().max(1.0) * (1.0 + w.abs());
                assert!((g - w).abs() <= tol, "{what}: {g} vs {w}");
            }
        }
    }

    /// Every transpose case against the definition, through the entry and
    /// through `matrixmultiply` alone, at sizes that fill no whole block or
    /// vector, at the CartPole and MinAtar layers', and empty ones.
    #[test]
    fn every_case_follows_the_definition() {
        let shapes = [
            (5, 7, 3),
            (13, 37, 50),
            (9, 40, 17),
            (1, 16, 16),
            (64, 64, 64),
            (64, 4, 256),
            (32, 128, 1024),
            (3, 4, 0),
        ];
        for (m, n, k) in shapes {
            let case = Case::new((m, n, k));
            for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
                let (sa, sb) = case.stored(a_t, b_t);
                let mut got = vec![f32::NAN; m * n];
                gemm((m, n, k), sa, a_t, sb, b_t, &mut got);
                case.check(&format!("gemm {m}x{n}x{k} {a_t} {b_t}"), k, &got);
                if k > 0 {
                    matrixmultiply((m, n, k), sa, a_t, sb, b_t, &mut got);
                    case.check(&format!("matrixmultiply {m}x{n}x{k} {a_t} {b_t}"), k, &got);
                }
            }
        }
    }
}
