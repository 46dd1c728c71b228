//! `rlfleet_kernels`' convolutions against autograd through libtorch's
//! convolution (and ReLU): the dense loops and the sparse ones, through
//! their dispatching entries (AVX-512 where this CPU may use it; the test
//! command runs these again with the portable path forced).

use rlfleet_kernels::conv::sparse::Reach;
use rlfleet_kernels::conv::{ConvDims, forward, weight_grad};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

fn values(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(t.detach().flatten(0, -1)).unwrap()
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
fn the_dense_convolution_matches_libtorch() {
    let d = ConvDims {
        c: 3,
        h: 9,
        w: 7,
        o: 5,
        k: 3,
        s: 2,
    };
    let (oh, ow) = d.out_hw();
    let opts = (Kind::Float, Device::Cpu);
    tch::manual_seed(5);
    let x = Tensor::randn([4, 3, 9, 7], opts).relu();
    let weight = Tensor::randn([5, 3, 3, 3], opts).set_requires_grad(true);
    let bias = Tensor::randn([5], opts).set_requires_grad(true);
    let dy = Tensor::randn([4, 5, oh as i64, ow as i64], opts);
    let y = x.conv2d(&weight, Some(&bias), [2, 2], [0, 0], [1, 1], 1);
    let [gw_want, gb_want] =
        crate::agents::gradients(&(&y * &dy).sum(Kind::Float), [&weight, &bias]);
    let mut got_y = vec![f32::NAN; 4 * 5 * oh * ow];
    if forward(
        &d,
        &values(&x),
        &values(&weight),
        &values(&bias),
        &mut got_y,
    ) {
        close("y", &got_y, &values(&y));
    }
    let (mut gw, mut gb) = (vec![f32::NAN; 5 * 27], vec![f32::NAN; 5]);
    weight_grad(&d, &values(&x), &values(&dy), &mut gw, &mut gb);
    close("gw", &gw, &values(&gw_want));
    close("gb", &gb, &values(&gb_want));
}

/// About one value in ten nonzero, as bytes channels last and f32
/// channels first; a stride, channel counts that fill no whole vector
/// (and one over sixteen).
#[test]
fn the_sparse_convolution_matches_libtorch() {
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
        let opts = (Kind::Float, Device::Cpu);
        tch::manual_seed(7);
        let mask = Tensor::rand([4, 3, 9, 7], opts).lt(0.1);
        let bytes = (Tensor::randint(255, [4, 3, 9, 7], (Kind::Uint8, Device::Cpu)) + 1) * mask;
        let x = bytes.to_kind(Kind::Float) / 255.0;
        let weight = Tensor::randn([o as i64, 3, 3, 3], opts).set_requires_grad(true);
        let bias = Tensor::randn([o as i64], opts).set_requires_grad(true);
        let y = x
            .conv2d(&weight, Some(&bias), [s as i64; 2], [0, 0], [1, 1], 1)
            .relu();
        let dy = Tensor::randn([4, o as i64, oh as i64, ow as i64], opts);
        let [gw_want, gb_want] =
            crate::agents::gradients(&(&y * &dy).sum(Kind::Float), [&weight, &bias]);
        let sparse = if channels_last {
            let hwc: Vec<u8> = Vec::try_from(bytes.permute([0, 2, 3, 1]).flatten(0, -1)).unwrap();
            Arc::new(Reach::new(&d, true)).gather(&hwc, 1.0 / 255.0)
        } else {
            Arc::new(Reach::new(&d, false)).gather(&values(&x), 1.0)
        }
        .expect("sparse enough");
        let mut got_y = vec![f32::NAN; 4 * o * oh * ow];
        sparse.forward_relu(&values(&weight), &values(&bias), &mut got_y);
        close("y", &got_y, &values(&y));
        let (mut gw, mut gb) = (vec![f32::NAN; o * 27], vec![f32::NAN; o]);
        sparse.weight_grad(&values(&dy), &got_y, &mut gw, &mut gb);
        close("gw", &gw, &values(&gw_want));
        close("gb", &gb, &values(&gb_want));
    }
}
