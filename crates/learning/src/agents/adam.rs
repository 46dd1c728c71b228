//! [`Adam`] over one flat parameter tensor, with its state in the open so
//! that checkpoints can save and restore it (tch's built-in optimizers keep
//! their moments inside libtorch, out of reach). The step itself is ATen's
//! fused kernel, reached through a small C++ shim (`fused_adam.cpp`).

use std::ffi::{c_char, c_void};
use tch::{Kind, Tensor};

#[allow(unsafe_code)]
unsafe extern "C" {
    /// `src/agents/fused_adam.cpp`: `at::_fused_adam_` on one tensor each.
    fn rlfleet_fused_adam(
        param: *mut c_void,
        grad: *const c_void,
        exp_avg: *mut c_void,
        exp_avg_sq: *mut c_void,
        step: f64,
        lr: f64,
        beta1: f64,
        beta2: f64,
        eps: f64,
    ) -> *const c_char;
}

/// Adam (Kingma & Ba) with PyTorch's defaults and bias correction.
#[derive(Debug)]
pub struct Adam {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// First moment.
    pub m: Tensor,
    /// Second moment.
    pub v: Tensor,
    pub steps: u64,
}

impl Adam {
    pub fn new(params: &Tensor, lr: f64) -> Self {
        Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            m: params.zeros_like().set_requires_grad(false),
            v: params.zeros_like().set_requires_grad(false),
            steps: 0,
        }
    }

    /// One update of `params` from `grad`, in place: ATen's fused Adam
    /// kernel (one call over the flat vector instead of eight tensor ops),
    /// with the moments in `m` and `v`.
    #[allow(unsafe_code)]
    pub fn step(&mut self, params: &mut Tensor, grad: &Tensor) {
        self.steps += 1;
        // SAFETY: the pointers are tch's live tensors (`torch::Tensor*`),
        // borrowed for the call only; `params`, `m` and `v` are distinct
        // tensors the shim updates in place, `grad` is read. The shim catches
        // every C++ exception and returns its message (a NUL-terminated
        // string owned by its thread, read before the next call).
        let err = unsafe {
            rlfleet_fused_adam(
                params.as_mut_ptr().cast(),
                grad.as_ptr().cast(),
                self.m.as_mut_ptr().cast(),
                self.v.as_mut_ptr().cast(),
                self.steps as f64,
                self.lr,
                self.beta1,
                self.beta2,
                self.eps,
            )
        };
        if !err.is_null() {
            // SAFETY: non-null means a NUL-terminated message, as above.
            let msg = unsafe { std::ffi::CStr::from_ptr(err) }.to_string_lossy();
            panic!("fused Adam step failed: {msg}");
        }
    }

    /// Scales `grad` in place so that its L2 norm is at most `max_norm`
    /// (on a device, without a host synchronisation); returns the norm
    /// before clipping (a scalar tensor on the device).
    pub fn clip_grad_norm(grad: &mut Tensor, max_norm: f64) -> Tensor {
        tch::no_grad(|| {
            if let Some(values) = crate::device::host_values(grad) {
                // On the CPU the norm is one pass over host memory, and a
                // gradient within the bound (a scale of exactly 1) is left
                // as it is: no pass over it. The scale is the tensor
                // path's, in f32.
                let n = rlfleet_kernels::norm::l2(values);
                let coef = (1.0 / (n + 1e-6)) * max_norm as f32;
                if coef < 1.0 {
                    let _ = grad.g_mul_scalar_(f64::from(coef));
                }
                return Tensor::from(n);
            }
            let norm = grad.norm();
            let coef = (&norm + 1e-6).reciprocal() * max_norm;
            let coef = coef.clamp_max(1.0).to_kind(Kind::Float);
            let _ = grad.g_mul_(&coef);
            norm
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tch::{Device, nn};

    /// 50 steps of `ours` (an update of a flat tensor from its gradient)
    /// and of libtorch's optimizer `theirs` on the same quadratic, from
    /// zeros: the largest difference between the two parameter vectors,
    /// and the largest parameter of ours.
    pub(crate) fn against_libtorch(
        theirs: impl nn::OptimizerConfig,
        mut ours: impl FnMut(&mut Tensor, &Tensor),
    ) -> (f64, f64) {
        tch::manual_seed(3);
        let target = Tensor::randn([16], (Kind::Float, Device::Cpu));
        let vs = nn::VarStore::new(Device::Cpu);
        let p_theirs = vs.root().zeros("p", &[16]);
        let mut opt = theirs.build(&vs, 0.01).unwrap();
        let mut p = Tensor::zeros([16], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        for _ in 0..50 {
            let loss = (&p_theirs - &target).square().sum(Kind::Float);
            opt.backward_step(&loss);
            p.zero_grad();
            let loss = (&p - &target).square().sum(Kind::Float);
            loss.backward();
            let grad = p.grad();
            ours(&mut p, &grad);
        }
        let diff = (&p - &p_theirs).abs().max().double_value(&[]);
        (diff, p.abs().max().double_value(&[]))
    }

    /// Our Adam follows tch's (libtorch's) Adam on the same problem.
    #[test]
    fn matches_libtorch_adam() {
        let mut adam = Adam::new(&Tensor::zeros([16], (Kind::Float, Device::Cpu)), 0.01);
        let (diff, _) = against_libtorch(nn::Adam::default(), |p, g| adam.step(p, g));
        assert!(diff < 1e-5, "max difference {diff}");
    }

    #[test]
    fn clipping_bounds_the_norm_and_leaves_small_gradients() {
        let mut g = Tensor::from_slice(&[3.0f32, 4.0]);
        let before = Adam::clip_grad_norm(&mut g, 1.0);
        assert!((g.norm().double_value(&[]) - 1.0).abs() < 1e-5);
        assert!(
            (before.double_value(&[]) - 5.0).abs() < 1e-5,
            "the norm before clipping"
        );
        // The CPU's scale is the tensor formula's, bit for bit.
        let mut g = Tensor::from_slice(&[0.7f32, -1.3, 2.9]);
        let norm = g.norm();
        let coef = ((&norm + 1e-6).reciprocal() * 0.5).clamp_max(1.0);
        let by_tensors: Vec<f32> = Vec::try_from(&g * coef).unwrap();
        let _ = Adam::clip_grad_norm(&mut g, 0.5);
        assert_eq!(Vec::<f32>::try_from(&g).unwrap(), by_tensors);
        // Long gradients (the AVX-512 sums and a tail) against libtorch's
        // norm in f64 (its f32 norm is itself about 1e-6 off at 133k
        // values: this test failed one run in ten against it).
        for n in [3, 100, 133_413] {
            let g = Tensor::randn([n], (Kind::Float, Device::Cpu));
            let want = g.to_kind(Kind::Double).norm().double_value(&[]);
            let got = f64::from(rlfleet_kernels::norm::l2(
                &Vec::<f32>::try_from(&g).unwrap(),
            ));
            assert!((got - want).abs() <= 1e-6 * want, "{n}: {got} vs {want}");
        }
        let mut small = Tensor::from_slice(&[0.3f32, 0.4]);
        let before = Adam::clip_grad_norm(&mut small, 1.0);
        assert!((small.norm().double_value(&[]) - 0.5).abs() < 1e-6);
        assert!((before.double_value(&[]) - 0.5).abs() < 1e-6);
    }
}
