//! [`DeviceForward`]: a network's forward pass in libtorch on the learner's
//! device (CUDA when there is one), behind the same [`Forward`] trait as
//! the plain-Rust copy, for the `seed` front's large networks. It keeps its
//! own copy of the parameters on the device, replaced on each publication:
//! inference never reads the tensors training writes, so neither waits for
//! the other.

use super::FlatNet;
use rlfleet_shared::config::SeedInference;
use rlfleet_shared::nets::{Forward, NetShape};
use rlfleet_shared::policy::ActorPolicy;
use tch::{Device, Kind, Tensor};

pub struct DeviceForward {
    net: FlatNet,
    device: Device,
    params: Option<Tensor>,
    out: Vec<f32>,
}

impl std::fmt::Debug for DeviceForward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceForward")
            .field("net", &self.net.shape().describe())
            .field("device", &self.device)
            .finish()
    }
}

impl DeviceForward {
    pub fn new(shape: NetShape, device: Device) -> DeviceForward {
        DeviceForward {
            net: FlatNet::from_shape(shape),
            device,
            params: None,
            out: Vec::new(),
        }
    }
}

impl Forward for DeviceForward {
    fn net(&self) -> &NetShape {
        self.net.shape()
    }

    fn load(&mut self, params: &[f32]) -> Result<(), String> {
        self.net.shape().check_params(params.len())?;
        // A new tensor, not a copy into the old one: a forward pass still
        // running on the old weights (on a CUDA stream) is not disturbed.
        self.params = Some(Tensor::from_slice(params).to_device(self.device));
        Ok(())
    }

    fn loaded(&self) -> bool {
        self.params.is_some()
    }

    /// Panics when nothing is loaded or `x` has the wrong size.
    fn forward(&mut self, x: &[f32], batch: usize) -> &[f32] {
        let params = self
            .params
            .as_ref()
            .expect("forward before any weights were loaded");
        let obs_dim = self.net.shape().obs_dim();
        assert_eq!(x.len(), batch * obs_dim, "input size");
        let x = Tensor::from_slice(x)
            .view([batch as i64, obs_dim as i64])
            .to_device(self.device);
        let y = tch::no_grad(|| self.net.forward(params, &x))
            .to_kind(Kind::Float)
            .to_device(Device::Cpu)
            .contiguous();
        let n = y.numel();
        self.out.resize(n, 0.0);
        y.copy_data(&mut self.out, n);
        &self.out
    }
}

/// `policy` running its network where `choice` says for its size and kind:
/// a [`DeviceForward`] on the learner's device, or left on its plain-Rust
/// copy. Logs a move to the device.
pub fn place(policy: ActorPolicy, choice: SeedInference, what: &str) -> ActorPolicy {
    let shape = policy.net().clone();
    if !choice.on_device(shape.numel(), shape.torso().is_some()) {
        return policy;
    }
    let device = crate::device::current();
    tracing::info!(net = %shape.describe(), ?device, "{what} on the learner's device");
    policy
        .with_forward(Box::new(DeviceForward::new(shape, device)))
        .expect("built for the same network")
}
