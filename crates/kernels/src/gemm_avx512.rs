//! Matrix products in AVX-512 intrinsics for a small network's layers on
//! the CPU, reading the operands where they lie. MKL first copies both
//! operands into its own blocked layout and clears the output, which for
//! a batch of 32 rows against a 1,024 × 128 layer cost about a fifth of
//! each product; these kernels hold a block of the output in registers
//! and stream the operands instead. Three forms, named by which operands
//! are read transposed, all row-major:
//! - `nn`: `c = a · b` (a layer's input gradient, `d · W`);
//! - `tn`: `c = aᵀ · b` (a layer's weight gradient, `dᵀ · x`);
//! - `nt`: `c = a · bᵀ` (a layer's forward, `x · Wᵀ`), as dot products.
//!
//! Every kernel here is compiled for AVX-512F; [`gemm`] is the safe way
//! in, which runs them only where [`crate::cpu`] allows AVX-512F.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::{
    __m512, __mmask16, _mm512_fmadd_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps,
    _mm512_reduce_add_ps, _mm512_set1_ps, _mm512_setzero_ps,
};

/// `c = op(a) · op(b)`, all row-major (`op(a)` `[m, k]`, stored `[k, m]`
/// when `a_t`; `op(b)` `[k, n]`, stored `[n, k]` when `b_t`): through
/// these loops when this CPU may use AVX-512F and the shape suits them,
/// and then true; else false, with `c` untouched. Each form vectorises
/// along one dimension, and below one vector's width it declines.
pub fn gemm(
    (m, n, k): (usize, usize, usize),
    a: &[f32],
    a_t: bool,
    b: &[f32],
    b_t: bool,
    c: &mut [f32],
) -> bool {
    let suits = match (a_t, b_t) {
        (false, false) | (true, false) => n >= 16,
        (false, true) => k >= 16,
        (true, true) => false,
    };
    if !suits || !crate::cpu::avx512f() {
        return false;
    }
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "gemm: sizes"
    );
    // SAFETY: `crate::cpu` (which detected it on this CPU) allows
    // AVX-512F, the only requirement of a `target_feature` function.
    #[allow(unsafe_code)]
    unsafe {
        match (a_t, b_t) {
            (false, false) => broadcast_rows((m, n, k), a, (k, 1), b, c),
            (true, false) => broadcast_rows((m, n, k), a, (1, m), b, c),
            _ => dot_rows((m, n, k), a, b, c),
        }
    };
    true
}

/// Output columns a block holds: two vectors.
const COLS: usize = 32;

/// The lanes of a vector at column `j` of a row `n` wide.
fn lanes(j: usize, n: usize) -> __mmask16 {
    let left = n.saturating_sub(j).min(16);
    ((1u32 << left) - 1) as __mmask16
}

/// `c` (`[m, n]`) = the sum over `p` of `a(i, p) · b[p, ·]` for each row
/// `i`, where `a(i, p)` is `a[i · ai + p · ap]`: `nn` with `(ai, ap) =
/// (k, 1)`, `tn` with `(1, m)`. `b` is `[k, n]`.
#[target_feature(enable = "avx512f")]
fn broadcast_rows(
    (m, n, k): (usize, usize, usize),
    a: &[f32],
    (ai, ap): (usize, usize),
    b: &[f32],
    c: &mut [f32],
) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    for i0 in (0..m).step_by(8) {
        let rows = (m - i0).min(8);
        for j0 in (0..n).step_by(COLS) {
            let at = Block { i0, j0, m, n, k };
            match rows {
                8 => block::<8>(at, a, (ai, ap), b, c),
                7 => block::<7>(at, a, (ai, ap), b, c),
                6 => block::<6>(at, a, (ai, ap), b, c),
                5 => block::<5>(at, a, (ai, ap), b, c),
                4 => block::<4>(at, a, (ai, ap), b, c),
                3 => block::<3>(at, a, (ai, ap), b, c),
                2 => block::<2>(at, a, (ai, ap), b, c),
                _ => block::<1>(at, a, (ai, ap), b, c),
            }
        }
    }
}

/// Where a block of `c` starts, and the product's sizes.
#[derive(Clone, Copy)]
struct Block {
    i0: usize,
    j0: usize,
    m: usize,
    n: usize,
    k: usize,
}

/// Rows `i0..i0 + R` and columns `j0..j0 + 32` (fewer at the edge) of
/// [`broadcast_rows`], in `2R` registers.
#[target_feature(enable = "avx512f")]
fn block<const R: usize>(
    Block { i0, j0, m, n, k }: Block,
    a: &[f32],
    (ai, ap): (usize, usize),
    b: &[f32],
    c: &mut [f32],
) {
    debug_assert!(i0 + R <= m);
    let masks = [lanes(j0, n), lanes(j0 + 16, n)];
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for p in 0..k {
        let row = &b[p * n..(p + 1) * n];
        // SAFETY: the masks cover only the columns below `n`, which `row`
        // holds; masked-off lanes are not read.
        #[allow(unsafe_code)]
        let bs: [__m512; 2] = std::array::from_fn(|v| unsafe {
            _mm512_maskz_loadu_ps(masks[v], row.as_ptr().wrapping_add(j0 + 16 * v))
        });
        for (r, acc) in acc.iter_mut().enumerate() {
            let x = _mm512_set1_ps(a[(i0 + r) * ai + p * ap]);
            acc[0] = _mm512_fmadd_ps(x, bs[0], acc[0]);
            acc[1] = _mm512_fmadd_ps(x, bs[1], acc[1]);
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        let out = &mut c[(i0 + r) * n..(i0 + r + 1) * n];
        for v in 0..2 {
            // SAFETY: as above, for the writes.
            #[allow(unsafe_code)]
            unsafe {
                _mm512_mask_storeu_ps(out.as_mut_ptr().wrapping_add(j0 + 16 * v), masks[v], acc[v])
            };
        }
    }
}

/// `c` (`[m, n]`) = `a · bᵀ` for `a` `[m, k]` and `b` `[n, k]`: blocks of
/// four rows by four columns, each a dot product over `k` sixteen lanes
/// at a time.
#[target_feature(enable = "avx512f")]
fn dot_rows((m, n, k): (usize, usize, usize), a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= n * k && c.len() >= m * n);
    let (m4, n4) = (m / 4 * 4, n / 4 * 4);
    for i in (0..m4).step_by(4) {
        for j in (0..n4).step_by(4) {
            dots::<4, 4>((i, j), (n, k), a, b, c);
        }
        for j in n4..n {
            dots::<4, 1>((i, j), (n, k), a, b, c);
        }
    }
    for i in m4..m {
        for j in (0..n4).step_by(4) {
            dots::<1, 4>((i, j), (n, k), a, b, c);
        }
        for j in n4..n {
            dots::<1, 1>((i, j), (n, k), a, b, c);
        }
    }
}

/// Rows `i..i + R` by columns `j..j + C` of [`dot_rows`].
#[target_feature(enable = "avx512f")]
fn dots<const R: usize, const C: usize>(
    (i, j): (usize, usize),
    (n, k): (usize, usize),
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
) {
    let rows: [*const f32; R] = std::array::from_fn(|r| a[(i + r) * k..(i + r + 1) * k].as_ptr());
    let cols: [*const f32; C] =
        std::array::from_fn(|col| b[(j + col) * k..(j + col + 1) * k].as_ptr());
    let mut acc = [[_mm512_setzero_ps(); C]; R];
    let mut step = |p: usize, mask: __mmask16| {
        // SAFETY (each load): every row and column holds `k` values from
        // its pointer; the mask covers only those below `k` (masked-off
        // lanes are not read).
        #[allow(unsafe_code)]
        let xs: [__m512; R] = std::array::from_fn(|r| unsafe {
            _mm512_maskz_loadu_ps(mask, rows[r].wrapping_add(p))
        });
        for (col, at) in cols.iter().enumerate() {
            // SAFETY: as above.
            #[allow(unsafe_code)]
            let w = unsafe { _mm512_maskz_loadu_ps(mask, at.wrapping_add(p)) };
            for (acc, x) in acc.iter_mut().zip(&xs) {
                acc[col] = _mm512_fmadd_ps(*x, w, acc[col]);
            }
        }
    };
    let full = k / 16 * 16;
    for p in (0..full).step_by(16) {
        step(p, !0);
    }
    if full < k {
        step(full, lanes(full, k));
    }
    for (r, row) in acc.iter().enumerate() {
        for (col, sum) in row.iter().enumerate() {
            c[(i + r) * n + j + col] = _mm512_reduce_add_ps(*sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::tests::Case;

    /// Every form against the definition, at sizes that fill no whole
    /// block or vector and at the MinAtar layer's (where this CPU may use
    /// AVX-512; elsewhere `gemm` declines).
    #[test]
    fn every_form_follows_the_definition() {
        for (m, n, k) in [(5, 17, 3), (13, 37, 50), (9, 40, 17), (32, 128, 1024)] {
            let case = Case::new((m, n, k));
            for (a_t, b_t) in [(false, false), (true, false), (false, true)] {
                let (sa, sb) = case.stored(a_t, b_t);
                let mut got = vec![f32::NAN; m * n];
                if !gemm((m, n, k), sa, a_t, sb, b_t, &mut got) {
                    assert!(!crate::cpu::avx512f() || n < 16 || (b_t && k < 16));
                    continue;
                }
                case.check(&format!("{m}x{n}x{k} {a_t} {b_t}"), k, &got);
            }
        }
    }
}
