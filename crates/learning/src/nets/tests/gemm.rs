//! `rlfleet_kernels::gemm` (the networks' host products) against
//! libtorch's product.

use rlfleet_kernels::gemm::gemm;
use tch::{Device, Kind, Tensor};

/// Every transpose case, at sizes that fill no whole block or vector and
/// at the CartPole and MinAtar layers'.
#[test]
fn products_match_libtorch() {
    let shapes = [
        (5, 7, 3),
        (13, 37, 50),
        (9, 40, 17),
        (1, 16, 16),
        (64, 64, 64),
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
            let mut got = vec![f32::NAN; want.len()];
            gemm(
                (m as usize, n as usize, k as usize),
                &sa,
                a_t,
                &sb,
                b_t,
                &mut got,
            );
            for (g, w) in got.iter().zip(&want) {
                let tol = 1e-5 * (k as f32).sqrt() * (1.0 + w.abs());
                assert!((g - w).abs() <= tol, "{m}x{n}x{k} {a_t} {b_t}: {g} vs {w}");
            }
        }
    }
}
