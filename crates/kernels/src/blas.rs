//! The BLAS a loaded library carries (libtorch's MKL): its Fortran
//! `sgemm_`, looked up by name (`dlsym`) when first needed, and called on
//! row-major slices.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

/// BLAS's Fortran `sgemm`, column-major: `c = alpha · op(a) · op(b) + beta · c`.
type Sgemm = unsafe extern "C" fn(
    transa: *const c_char,
    transb: *const c_char,
    m: *const c_int,
    n: *const c_int,
    k: *const c_int,
    alpha: *const f32,
    a: *const f32,
    lda: *const c_int,
    b: *const f32,
    ldb: *const c_int,
    beta: *const f32,
    c: *mut f32,
    ldc: *const c_int,
);

/// The process's `sgemm_`, if a loaded library defines it.
fn sgemm_fn() -> Option<Sgemm> {
    static FOUND: OnceLock<Option<Sgemm>> = OnceLock::new();
    *FOUND.get_or_init(|| {
        // SAFETY: `dlsym` (libc's binding) with the default handle and a
        // NUL-terminated name only reads; a non-null result is the
        // address of the symbol `sgemm_`, which BLAS defines with the
        // signature `Sgemm` states.
        #[allow(unsafe_code)]
        unsafe {
            let at = libc::dlsym(libc::RTLD_DEFAULT, c"sgemm_".as_ptr());
            (!at.is_null()).then(|| std::mem::transmute::<*mut c_void, Sgemm>(at))
        }
    })
}

/// Whether a loaded library defines `sgemm_`.
pub fn available() -> bool {
    sgemm_fn().is_some()
}

/// `c = op(a) · op(b)`, all row-major (as in `gemm_avx512::gemm`),
/// through BLAS: true; false (`c` untouched) when no loaded library
/// defines `sgemm_`.
pub fn sgemm(
    (m, n, k): (usize, usize, usize),
    a: &[f32],
    a_t: bool,
    b: &[f32],
    b_t: bool,
    c: &mut [f32],
) -> bool {
    let Some(sgemm) = sgemm_fn() else {
        return false;
    };
    assert!(
        a.len() == m * k && b.len() == k * n && c.len() == m * n,
        "sgemm: sizes"
    );
    // Row-major `c` is column-major `cᵀ = op(b)ᵀ · op(a)ᵀ`; a row-major
    // matrix read column-major is its transpose.
    let (ta, lda) = if b_t { (b'T', k) } else { (b'N', n) };
    let (tb, ldb) = if a_t { (b'T', m) } else { (b'N', k) };
    let [m_, n_, k_, lda, ldb, ldc] = [n, m, k, lda, ldb, n].map(|v| v as c_int);
    let (alpha, beta) = (1f32, 0f32);
    // SAFETY: the sizes and leading dimensions describe exactly the
    // slices' lengths (checked above), `c` is borrowed mutably and
    // distinct from `a` and `b`; BLAS reads `a` and `b` and writes only
    // `c`, returning before this does.
    #[allow(unsafe_code)]
    unsafe {
        sgemm(
            (&ta as *const u8).cast(),
            (&tb as *const u8).cast(),
            &m_,
            &n_,
            &k_,
            &alpha,
            b.as_ptr(),
            &lda,
            a.as_ptr(),
            &ldb,
            &beta,
            c.as_mut_ptr(),
            &ldc,
        );
    }
    true
}
