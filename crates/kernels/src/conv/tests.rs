//! The convolution kernels against the definition (plain nested loops
//! here), dense and sparse, through the dispatching entries (AVX-512
//! where this CPU may use it) and the plain loops other CPUs take. The
//! learner's tests compare the same entries with libtorch.

use super::sparse::Reach;
use super::*;
use std::sync::Arc;

/// A repeatable stream of values in [-1, 1).
fn noise(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// `x` is `[batch, c, h, w]`; `y` `[batch, o, oh, ow]`, ReLU'd if `relu`.
fn forward_def(d: &ConvDims, x: &[f32], w: &[f32], b: &[f32], relu: bool) -> Vec<f32> {
    let (oh, ow) = d.out_hw();
    let batch = x.len() / (d.c * d.h * d.w);
    let mut y = vec![0f32; batch * d.o * oh * ow];
    for n in 0..batch {
        for o in 0..d.o {
            for (oy, ox) in (0..oh).flat_map(|oy| (0..ow).map(move |ox| (oy, ox))) {
                let mut sum = f64::from(b[o]);
                for c in 0..d.c {
                    for ky in 0..d.k {
                        for kx in 0..d.k {
                            let xi = ((n * d.c + c) * d.h + oy * d.s + ky) * d.w + ox * d.s + kx;
                            let wi = ((o * d.c + c) * d.k + ky) * d.k + kx;
                            sum += f64::from(x[xi]) * f64::from(w[wi]);
                        }
                    }
                }
                let v = sum as f32;
                y[((n * d.o + o) * oh + oy) * ow + ox] = if relu { v.max(0.0) } else { v };
            }
        }
    }
    y
}

/// The weight and bias gradients from `dy` (already through any ReLU).
fn weight_grad_def(d: &ConvDims, x: &[f32], dy: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (oh, ow) = d.out_hw();
    let batch = x.len() / (d.c * d.h * d.w);
    let (mut gw, mut gb) = (vec![0f64; d.o * d.taps()], vec![0f64; d.o]);
    for n in 0..batch {
        for o in 0..d.o {
            for (oy, ox) in (0..oh).flat_map(|oy| (0..ow).map(move |ox| (oy, ox))) {
                let g = f64::from(dy[((n * d.o + o) * oh + oy) * ow + ox]);
                gb[o] += g;
                for c in 0..d.c {
                    for ky in 0..d.k {
                        for kx in 0..d.k {
                            let xi = ((n * d.c + c) * d.h + oy * d.s + ky) * d.w + ox * d.s + kx;
                            gw[((o * d.c + c) * d.k + ky) * d.k + kx] += g * f64::from(x[xi]);
                        }
                    }
                }
            }
        }
    }
    let f = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
    (f(gw), f(gb))
}

fn close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
            "{what}[{i}]: {a} vs {b}"
        );
    }
}

/// A stride and channel counts that fill no whole vector.
#[test]
fn the_dense_loops_follow_the_definition() {
    let d = ConvDims {
        c: 3,
        h: 9,
        w: 7,
        o: 5,
        k: 3,
        s: 2,
    };
    let (oh, ow) = d.out_hw();
    let x: Vec<f32> = noise(1, 4 * 3 * 9 * 7).iter().map(|v| v.max(0.0)).collect();
    let (w, b) = (noise(2, 5 * 27), noise(3, 5));
    let dy = noise(4, 4 * 5 * oh * ow);
    let mut y = vec![f32::NAN; 4 * 5 * oh * ow];
    if forward(&d, &x, &w, &b, &mut y) {
        close("y", &y, &forward_def(&d, &x, &w, &b, false));
    }
    let (gw_want, gb_want) = weight_grad_def(&d, &x, &dy);
    let (mut gw, mut gb) = (vec![f32::NAN; 5 * 27], vec![f32::NAN; 5]);
    weight_grad(&d, &x, &dy, &mut gw, &mut gb);
    close("gw", &gw, &gw_want);
    close("gb", &gb, &gb_want);
    let (mut gw, mut gb) = (vec![f32::NAN; 5 * 27], vec![f32::NAN; 5]);
    weight_grad_pass::<false>(&d, &x, &dy, &mut gw, &mut gb);
    close("gw (plain)", &gw, &gw_want);
    close("gb (plain)", &gb, &gb_want);
}

/// About one value in ten nonzero, as bytes channels last and as f32
/// channels first; a stride, channel counts that fill no whole vector
/// (and one over sixteen).
#[test]
fn the_sparse_loops_follow_the_definition() {
    for (o, s, channels_last) in [(5, 2, true), (18, 1, false)] {
        let d = ConvDims {
            c: 3,
            h: 9,
            w: 7,
            o,
            k: 3,
            s,
        };
        let (oh, ow) = d.out_hw();
        let bytes: Vec<u8> = noise(5, 4 * 3 * 9 * 7)
            .iter()
            .zip(noise(6, 4 * 3 * 9 * 7))
            .map(|(&v, keep)| {
                if keep > 0.8 {
                    (v.abs() * 254.0) as u8 + 1
                } else {
                    0
                }
            })
            .collect();
        let x: Vec<f32> = bytes.iter().map(|&v| f32::from(v) / 255.0).collect();
        let (w, b) = (noise(7, o * 27), noise(8, o));
        let want = forward_def(&d, &x, &w, &b, true);
        let sparse = if channels_last {
            let mut hwc = vec![0u8; bytes.len()];
            for n in 0..4 {
                for (c, i, j) in
                    (0..3).flat_map(|c| (0..9).flat_map(move |i| (0..7).map(move |j| (c, i, j))))
                {
                    hwc[((n * 9 + i) * 7 + j) * 3 + c] = bytes[((n * 3 + c) * 9 + i) * 7 + j];
                }
            }
            Arc::new(Reach::new(&d, true)).gather(&hwc, 1.0 / 255.0)
        } else {
            Arc::new(Reach::new(&d, false)).gather(&x, 1.0)
        }
        .expect("sparse enough");
        assert_eq!(sparse.batch(), 4);
        let mut y = vec![f32::NAN; want.len()];
        sparse.forward_relu(&w, &b, &mut y);
        close("y", &y, &want);
        let mut y_plain = vec![f32::NAN; want.len()];
        sparse.forward_pass::<false>(&w, &b, &mut y_plain);
        close("y (plain)", &y_plain, &want);
        // The ReLU's backward: no gradient where the output was cut.
        let d_out = noise(9, want.len());
        let through: Vec<f32> = d_out
            .iter()
            .zip(&want)
            .map(|(&g, &y)| if y > 0.0 { g } else { 0.0 })
            .collect();
        let (gw_want, gb_want) = weight_grad_def(&d, &x, &through);
        let (mut gw, mut gb) = (vec![f32::NAN; o * 27], vec![f32::NAN; o]);
        sparse.weight_grad(&d_out, &y, &mut gw, &mut gb);
        close("gw", &gw, &gw_want);
        close("gb", &gb, &gb_want);
        let (mut gw, mut gb) = (vec![f32::NAN; o * 27], vec![f32::NAN; o]);
        sparse.weight_grad_pass::<false>(&d_out, &y, &mut gw, &mut gb);
        close("gw (plain)", &gw, &gw_want);
        close("gb (plain)", &gb, &gb_want);
        assert!(oh * ow > 0);
    }
}

#[test]
fn dense_inputs_are_left_to_the_dense_loops() {
    let d = ConvDims {
        c: 1,
        h: 4,
        w: 4,
        o: 2,
        k: 2,
        s: 1,
    };
    let mut x = vec![0u8; 32];
    x[..8].fill(1);
    let reach = Arc::new(Reach::new(&d, false));
    assert!(reach.gather(&x, 1.0).is_some());
    x[8] = 1;
    assert!(reach.gather(&x, 1.0).is_none());
}
