//! [`DeviceForward`]: a network's forward pass in libtorch on the learner's
//! device (CUDA when there is one), behind the same [`Forward`] trait as
//! the plain-Rust copy, for the `seed` front's large networks. It keeps its
//! own copy of the parameters on the device, replaced on each publication:
//! inference never reads the tensors training writes, so neither waits for
//! the other.

use super::FlatNet;
use crate::device::{download_into, upload};
use rlfleet_shared::config::SeedInference;
use rlfleet_shared::nets::{Forward, NetShape, Rows};
use rlfleet_shared::policy::ActorPolicy;
use tch::{Device, Tensor};

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
        // Held in the network's own order (its core first).
        let own = self.net.to_own(params);
        self.params = Some(upload(&own, &[own.len() as i64], self.device));
        Ok(())
    }

    fn loaded(&self) -> bool {
        self.params.is_some()
    }

    /// Panics when nothing is loaded or `x` has the wrong size.
    fn forward(&mut self, x: &[f32], batch: usize) -> &[f32] {
        self.forward_rows(Rows::Values(x), batch)
    }

    /// Bytes go to the device as bytes; the network converts them there.
    fn forward_rows(&mut self, x: Rows<'_>, batch: usize) -> &[f32] {
        let x = self.upload(x, batch);
        let params = self.params();
        let y = tch::no_grad(|| self.net.forward(params, &x));
        self.download(&y)
    }

    /// One step of the recurrent core for each row, from and into its
    /// state in `state` (the states cross to the device and back with the
    /// rows: the `seed` front keeps them per actor env).
    fn forward_state(&mut self, x: Rows<'_>, batch: usize, state: &mut [f32]) -> &[f32] {
        if state.is_empty() {
            return self.forward_rows(x, batch);
        }
        let x = self.upload(x, batch);
        let params = self.params();
        let s = upload(
            state,
            &[batch as i64, (state.len() / batch.max(1)) as i64],
            self.device,
        );
        let (y, end) = tch::no_grad(|| self.net.forward_seq_all(params, &x, &s, 1));
        download_into(&end, state);
        self.download(&y)
    }
}

impl DeviceForward {
    fn params(&self) -> &Tensor {
        self.params
            .as_ref()
            .expect("forward before any weights were loaded")
    }

    /// `batch` rows on the device as `[batch, obs_dim]` (bytes stay
    /// bytes).
    fn upload(&self, x: Rows<'_>, batch: usize) -> Tensor {
        let shape = [batch as i64, self.net.shape().obs_dim() as i64];
        match x {
            Rows::Values(v) => upload(v, &shape, self.device),
            Rows::Bytes(b) => upload(b, &shape, self.device),
        }
    }

    /// `y` copied out to the host buffer the trait returns.
    fn download(&mut self, y: &Tensor) -> &[f32] {
        self.out.resize(y.numel(), 0.0);
        download_into(y, &mut self.out);
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

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_shared::nets::{ConvLayer, ConvTorso, NetCopy, TorsoKind};

    /// A byte image's rows reach the device as bytes and give what the
    /// same values give, and what the plain-Rust copy computes.
    #[test]
    fn bytes_and_values_give_the_same_outputs() {
        let torso = ConvTorso {
            input: [4, 7, 6],
            channels_last: false,
            bytes: true,
            kind: TorsoKind::Plain,
            layers: vec![ConvLayer {
                out: 5,
                kernel: 3,
                stride: 2,
            }],
        };
        let shape = NetShape::with_torso(Some(torso), 4 * 7 * 6, &[16], 3);
        tch::manual_seed(3);
        let params: Vec<f32> =
            Vec::try_from(FlatNet::from_shape(shape.clone()).init(Device::Cpu)).unwrap();
        let mut dev = DeviceForward::new(shape.clone(), Device::Cpu);
        dev.load(&params).unwrap();
        let batch = 6;
        let bytes: Vec<u8> = (0..batch * 168).map(|i| ((i * 131) % 256) as u8).collect();
        let values: Vec<f32> = bytes.iter().map(|&b| f32::from(b)).collect();
        let from_bytes = dev.forward_rows(Rows::Bytes(&bytes), batch).to_vec();
        let from_values = dev.forward(&values, batch).to_vec();
        assert_eq!(from_bytes, from_values);
        let mut copy = NetCopy::new(shape);
        copy.load(&params).unwrap();
        for (a, b) in from_bytes.iter().zip(copy.forward(&values, batch)) {
            assert!((a - b).abs() < 1e-5, "device {a}, copy {b}");
        }
    }

    /// With a recurrent core, each row's step from its own state gives the
    /// outputs and new states the plain-Rust copy gives.
    #[test]
    fn a_core_steps_each_row_from_its_own_state() {
        let core = rlfleet_shared::nets::Core { size: 4, layers: 2 };
        let shape = NetShape::new(3, &[8], 2).with_core(Some(core));
        tch::manual_seed(5);
        let params: Vec<f32> =
            Vec::try_from(FlatNet::from_shape(shape.clone()).init(Device::Cpu)).unwrap();
        let mut dev = DeviceForward::new(shape.clone(), Device::Cpu);
        let mut copy = NetCopy::new(shape);
        dev.load(&params).unwrap();
        copy.load(&params).unwrap();
        let x: Vec<f32> = (0..9).map(|i| (i as f32 * 0.7).sin()).collect();
        let mut s_dev: Vec<f32> = (0..48).map(|i| (i as f32 * 0.3).cos() / 2.0).collect();
        let mut s_copy = s_dev.clone();
        for _ in 0..3 {
            let a = dev.forward_state(Rows::Values(&x), 3, &mut s_dev).to_vec();
            let b = copy
                .forward_state(Rows::Values(&x), 3, &mut s_copy)
                .to_vec();
            for (u, v) in a.iter().zip(&b).chain(s_dev.iter().zip(&s_copy)) {
                assert!((u - v).abs() < 1e-5, "{u} vs {v}");
            }
        }
    }
}
