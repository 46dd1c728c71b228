//! One RMSprop step over host memory (the running means of `g²`, and of
//! `g` when centred, then the parameters): compiled for AVX-512 where
//! [`crate::cpu`] allows it, else for the baseline; the same bits either
//! way.

/// The step, with `(w, eps, lr)`: `w` = 1 − α, the running means' weight
/// of the new gradient.
pub fn step(
    p: &mut [f32],
    g: &[f32],
    sq: &mut [f32],
    avg: Option<&mut [f32]>,
    (w, eps, lr): (f32, f32, f32),
) {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::avx512f() {
        // SAFETY: `crate::cpu` (which detected it on this CPU) allows
        // AVX-512F, the only requirement of a `target_feature` function.
        #[allow(unsafe_code)]
        unsafe {
            rmsprop_avx512(p, g, sq, avg, w, eps, lr)
        };
        return;
    }
    rmsprop_pass(p, g, sq, avg, w, eps, lr);
}

/// One RMSprop pass over host memory: the running means of `g²` (and of
/// `g`, centred), then the parameters. Each element's arithmetic is the
/// same however wide the vectors it is compiled to (no fused multiply-adds:
/// Rust does not contract), so every build gives the same bits.
#[inline(always)]
fn rmsprop_pass(
    p: &mut [f32],
    g: &[f32],
    sq: &mut [f32],
    avg: Option<&mut [f32]>,
    w: f32,
    eps: f32,
    lr: f32,
) {
    match avg {
        Some(avg) => {
            for (((p, &g), sq), avg) in p.iter_mut().zip(g).zip(sq).zip(avg) {
                *sq += w * (g * g - *sq);
                *avg += w * (g - *avg);
                *p -= lr * g / ((*sq - *avg * *avg).sqrt() + eps);
            }
        }
        None => {
            for ((p, &g), sq) in p.iter_mut().zip(g).zip(sq) {
                *sq += w * (g * g - *sq);
                *p -= lr * g / (sq.sqrt() + eps);
            }
        }
    }
}

/// [`rmsprop_pass`] compiled for AVX-512: the baseline x86-64 build's
/// four-wide square roots and divisions were a tenth of a small network's
/// update (MinAtar's DQN, 132k parameters).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn rmsprop_avx512(
    p: &mut [f32],
    g: &[f32],
    sq: &mut [f32],
    avg: Option<&mut [f32]>,
    w: f32,
    eps: f32,
    lr: f32,
) {
    rmsprop_pass(p, g, sq, avg, w, eps, lr);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX-512 build of the host pass gives the baseline build's bits
    /// (where the CPU has AVX-512; elsewhere there is nothing to compare).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx512_pass_gives_the_same_bits() {
        if !crate::cpu::Features::detected().avx512f {
            return;
        }
        let n = 1003;
        let g: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 1e-3)
            .collect();
        for centered in [true, false] {
            let mut a = (vec![0.5f32; n], vec![1e-3f32; n], vec![1e-4f32; n]);
            let mut b = a.clone();
            for _ in 0..5 {
                let avg_a = centered.then_some(&mut a.2[..]);
                rmsprop_pass(&mut a.0, &g, &mut a.1, avg_a, 0.05, 0.01, 2.5e-4);
                let avg_b = centered.then_some(&mut b.2[..]);
                // SAFETY: the CPU was checked to have AVX-512F above.
                #[allow(unsafe_code)]
                unsafe {
                    rmsprop_avx512(&mut b.0, &g, &mut b.1, avg_b, 0.05, 0.01, 2.5e-4)
                };
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a.0), bits(&b.0), "centred {centered}");
            assert_eq!(bits(&a.1), bits(&b.1), "centred {centered}");
        }
    }
}
