//! The L2 norm of a gradient held on the host (for clipping it).

/// The L2 norm of `v`: with AVX-512, its squares summed in 64 f32 lanes
/// (fused multiply-adds), then across lanes in f64; on the portable path
/// summed in sixteen f64 lanes. (The portable path's first form, four f32
/// lanes, put a 133k-element gradient's norm 1e-6 off libtorch's, which
/// forcing the portable path in the tests showed.)
pub fn l2(v: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::avx512f() {
        // SAFETY: `crate::cpu` (which detected it on this CPU)
        // allows AVX-512F, the only requirement of a `target_feature`
        // function.
        #[allow(unsafe_code)]
        return unsafe { norm_avx512(v) };
    }
    let mut lanes = [0f64; 16];
    let blocks = v.chunks_exact(16);
    let tail: f64 = blocks
        .remainder()
        .iter()
        .map(|&x| f64::from(x).powi(2))
        .sum();
    for block in blocks {
        for (s, &x) in lanes.iter_mut().zip(block) {
            *s += f64::from(x) * f64::from(x);
        }
    }
    (lanes.iter().sum::<f64>() + tail).sqrt() as f32
}

/// [`l2`] in AVX-512 intrinsics: four independent sums of sixteen
/// lanes (the plain loop's one sum would wait on each addition).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn norm_avx512(v: &[f32]) -> f32 {
    use std::arch::x86_64::{
        _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_setzero_ps, _mm512_storeu_ps,
    };
    let mut acc = [_mm512_setzero_ps(); 4];
    let blocks = v.chunks_exact(64);
    let tail: f64 = blocks.remainder().iter().map(|&x| f64::from(x * x)).sum();
    for block in blocks {
        for (acc, sixteen) in acc.iter_mut().zip(block.chunks_exact(16)) {
            // SAFETY: `sixteen` holds sixteen f32, one vector's width.
            #[allow(unsafe_code)]
            let x = unsafe { _mm512_loadu_ps(sixteen.as_ptr()) };
            *acc = _mm512_fmadd_ps(x, x, *acc);
        }
    }
    let mut lanes = [0f32; 64];
    for (acc, out) in acc.iter().zip(lanes.chunks_exact_mut(16)) {
        // SAFETY: `out` holds sixteen f32.
        #[allow(unsafe_code)]
        unsafe {
            _mm512_storeu_ps(out.as_mut_ptr(), *acc)
        };
    }
    (lanes.iter().map(|&s| f64::from(s)).sum::<f64>() + tail).sqrt() as f32
}
