//! [`Optimizer`]: DQN's choice of update rule over its flat parameter
//! tensor — [`Adam`], or [`Rmsprop`] (centred by default, as DQN-Nature
//! and MinAtar's reference train) — with each one's state named for
//! checkpoints.

use super::{Adam, NamedTensor, named};
use rlfleet_shared::config::{DqnConfig, OptimizerKind};
use tch::Tensor;

/// RMSprop as PyTorch defines it (`torch.optim.RMSprop`, no momentum, no
/// weight decay): a running mean of squared gradients (and, centred, of
/// gradients), the step `lr * g / (sqrt(E[g²] − E[g]²) + eps)`.
#[derive(Debug)]
pub struct Rmsprop {
    pub lr: f64,
    /// Smoothing of the running means.
    pub alpha: f64,
    /// Added to the root in the denominator.
    pub eps: f64,
    pub centered: bool,
    /// Running mean of squared gradients.
    pub square_avg: Tensor,
    /// Running mean of gradients (centred only; zeros otherwise).
    pub grad_avg: Tensor,
    pub steps: u64,
}

impl Rmsprop {
    pub fn new(params: &Tensor, lr: f64, alpha: f64, eps: f64, centered: bool) -> Self {
        Rmsprop {
            lr,
            alpha,
            eps,
            centered,
            square_avg: params.zeros_like().set_requires_grad(false),
            grad_avg: params.zeros_like().set_requires_grad(false),
            steps: 0,
        }
    }

    /// One update of `params` from `grad`, in place: one pass over host
    /// memory for CPU tensors, else libtorch's ops.
    pub fn step(&mut self, params: &mut Tensor, grad: &Tensor) {
        self.steps += 1;
        if !self.step_on_host(params, grad) {
            self.step_tensors(params, grad);
        }
    }

    /// The step in one pass over host memory (CPU tensors): each of the
    /// tensor ops below reads and writes the whole parameter vector, and on
    /// a small network those passes cost more than its forward and
    /// backward. False where the tensors are elsewhere.
    fn step_on_host(&mut self, params: &mut Tensor, grad: &Tensor) -> bool {
        if !crate::device::distinct(&[params, grad, &self.square_avg, &self.grad_avg]) {
            return false;
        }
        let (Some(p), Some(g), Some(sq), Some(avg)) = (
            crate::device::host_values_mut(params),
            crate::device::host_values(grad),
            crate::device::host_values_mut(&mut self.square_avg),
            crate::device::host_values_mut(&mut self.grad_avg),
        ) else {
            return false;
        };
        let (w, eps, lr) = ((1.0 - self.alpha) as f32, self.eps as f32, self.lr as f32);
        let avg = self.centered.then_some(avg);
        rlfleet_kernels::rmsprop::step(p, g, sq, avg, (w, eps, lr));
        true
    }

    /// The step as libtorch tensor ops (any device), in place: every
    /// operation writes into the running means, one scratch tensor or the
    /// parameters (one allocation a step, where the plain expression takes
    /// nine: on a few hundred thousand parameters each was a fresh mapping
    /// of memory, and the step cost more than the network's forward pass).
    fn step_tensors(&mut self, params: &mut Tensor, grad: &Tensor) {
        let w = 1.0 - self.alpha;
        tch::no_grad(|| {
            // E[g²] ← α E[g²] + (1 − α) g²
            let mut denom = grad.square();
            let _ = self.square_avg.lerp_(&denom, w);
            if self.centered {
                // E[g] ← α E[g] + (1 − α) g; denom ← E[g²] − E[g]²
                let _ = self.grad_avg.lerp_(grad, w);
                denom.copy_(&self.grad_avg);
                let _ = denom.g_mul_(&self.grad_avg);
                let _ = denom.neg_();
                let _ = denom.g_add_(&self.square_avg);
            } else {
                denom.copy_(&self.square_avg);
            }
            let _ = denom.sqrt_();
            let _ = denom.g_add_scalar_(self.eps);
            // params ← params + g / (denom · (−1 / lr)) = params − lr g / denom
            let _ = denom.g_mul_scalar_(-1.0 / self.lr);
            let _ = params.addcdiv_(grad, &denom);
        });
    }
}

/// DQN's update rule.
#[derive(Debug)]
pub enum Optimizer {
    Adam(Adam),
    Rmsprop(Rmsprop),
}

impl Optimizer {
    /// The rule `cfg.optimizer` names, for `params`.
    pub fn for_dqn(cfg: &DqnConfig, params: &Tensor) -> Optimizer {
        match cfg.optimizer {
            OptimizerKind::Adam => Optimizer::Adam(Adam::new(params, cfg.lr)),
            OptimizerKind::Rmsprop => Optimizer::Rmsprop(Rmsprop::new(
                params,
                cfg.lr,
                cfg.rmsprop_alpha,
                cfg.rmsprop_eps,
                cfg.rmsprop_centered,
            )),
        }
    }

    pub fn step(&mut self, params: &mut Tensor, grad: &Tensor) {
        match self {
            Optimizer::Adam(a) => a.step(params, grad),
            Optimizer::Rmsprop(r) => r.step(params, grad),
        }
    }

    pub fn lr(&self) -> f64 {
        match self {
            Optimizer::Adam(a) => a.lr,
            Optimizer::Rmsprop(r) => r.lr,
        }
    }

    pub fn set_lr(&mut self, lr: f64) {
        match self {
            Optimizer::Adam(a) => a.lr = lr,
            Optimizer::Rmsprop(r) => r.lr = lr,
        }
    }

    /// Updates taken (restored from checkpoints).
    pub fn steps_mut(&mut self) -> &mut u64 {
        match self {
            Optimizer::Adam(a) => &mut a.steps,
            Optimizer::Rmsprop(r) => &mut r.steps,
        }
    }

    pub fn steps(&self) -> u64 {
        match self {
            Optimizer::Adam(a) => a.steps,
            Optimizer::Rmsprop(r) => r.steps,
        }
    }

    /// Its state, named for a checkpoint (a checkpoint of one rule does not
    /// load into the other: the names differ).
    pub fn state(&self) -> Vec<NamedTensor> {
        match self {
            Optimizer::Adam(a) => vec![named("adam.m", &a.m), named("adam.v", &a.v)],
            Optimizer::Rmsprop(r) => vec![
                named("rmsprop.square_avg", &r.square_avg),
                named("rmsprop.grad_avg", &r.grad_avg),
            ],
        }
    }

    /// The tensors of [`Optimizer::state`], to restore in place.
    pub fn tensors_mut(&mut self) -> [(&'static str, &mut Tensor); 2] {
        match self {
            Optimizer::Adam(a) => [("adam.m", &mut a.m), ("adam.v", &mut a.v)],
            Optimizer::Rmsprop(r) => [
                ("rmsprop.square_avg", &mut r.square_avg),
                ("rmsprop.grad_avg", &mut r.grad_avg),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::adam::tests::against_libtorch;
    use tch::{Device, Kind, nn};

    /// The one-pass step on host memory and the tensor ops agree, centred
    /// and not, over many steps of noisy gradients.
    #[test]
    fn the_host_pass_agrees_with_the_tensor_ops() {
        for centered in [true, false] {
            tch::manual_seed(5);
            let start = Tensor::randn([1000], (Kind::Float, Device::Cpu));
            let mut host = Rmsprop::new(&start, 2.5e-4, 0.95, 0.01, centered);
            let mut ops = Rmsprop::new(&start, 2.5e-4, 0.95, 0.01, centered);
            let (mut p_host, mut p_ops) = (start.copy(), start.copy());
            for _ in 0..100 {
                let g = Tensor::randn([1000], (Kind::Float, Device::Cpu));
                assert!(host.step_on_host(&mut p_host, &g), "CPU tensors");
                ops.step_tensors(&mut p_ops, &g);
            }
            let diff = (&p_host - &p_ops).abs().max().double_value(&[]);
            let moved = (&p_host - &start).abs().max().double_value(&[]);
            assert!(diff < 1e-6, "centered {centered}: {diff}");
            assert!(moved > 1e-3, "it moved: {moved}");
            let sq = (&host.square_avg - &ops.square_avg)
                .abs()
                .max()
                .double_value(&[]);
            assert!(sq < 1e-6, "{sq}");
        }
    }

    /// Ours follows libtorch's RMSprop (PyTorch's algorithm), centred and
    /// not, with MinAtar's settings (alpha 0.95, eps 0.01).
    #[test]
    fn matches_libtorch_rmsprop() {
        for centered in [true, false] {
            let zeros = Tensor::zeros([16], (Kind::Float, Device::Cpu));
            let mut rms = Rmsprop::new(&zeros, 0.01, 0.95, 0.01, centered);
            let theirs = nn::rms_prop(0.95, 0.01, 0.0, 0.0, centered);
            let (diff, moved) = against_libtorch(theirs, |p, g| rms.step(p, g));
            assert!(diff < 1e-5, "centered {centered}: {diff}");
            assert!(moved > 0.1, "it trained: {moved}");
            assert_eq!(rms.steps, 50);
        }
    }
}
