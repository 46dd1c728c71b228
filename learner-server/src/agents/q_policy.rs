//! [`GreedyQPolicy`]: argmax over a Q-network's outputs, on the CPU, from
//! published flat weights.

use super::{AgentError, Policy, Weights, check_weights, copy_into};
use crate::nets::FlatMlp;
use rlfleet_shared::env::EnvSpec;
use tch::{Device, Tensor};

/// Greedy action selection with its own copy of the weights.
#[derive(Debug)]
pub struct GreedyQPolicy {
    net: FlatMlp,
    params: Tensor,
    version: u64,
}

impl GreedyQPolicy {
    pub fn new(hidden: &[u32], spec: &EnvSpec) -> Self {
        let n = spec
            .action_space
            .n()
            .expect("Q-policies need a discrete action space");
        let net = FlatMlp::new(spec.obs_dim(), hidden, n);
        let params = Tensor::zeros([net.numel()], (tch::Kind::Float, Device::Cpu));
        GreedyQPolicy {
            net,
            params,
            version: 0,
        }
    }
}

impl Policy for GreedyQPolicy {
    fn load(&mut self, w: &Weights) -> Result<(), AgentError> {
        check_weights(&w.data, self.net.numel() as usize)?;
        copy_into(&mut self.params, &w.data);
        self.version = w.version;
        Ok(())
    }

    fn act(&mut self, obs: &[f32], action: &mut [f32]) {
        let x = Tensor::from_slice(obs).view([1, -1]);
        let q = tch::no_grad(|| self.net.forward(&self.params, &x));
        action[0] = q.argmax(1, false).int64_value(&[0]) as f32;
    }

    fn version(&self) -> u64 {
        self.version
    }
}
