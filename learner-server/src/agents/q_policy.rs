//! [`GreedyQPolicy`]: argmax over a Q-network's outputs, on the CPU in plain
//! Rust, from published flat weights.

use super::{AgentError, Policy, Weights, check_weights};
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::nets::{CpuMlp, MlpCopy, argmax};

/// Greedy action selection with its own copy of the weights.
#[derive(Debug)]
pub struct GreedyQPolicy {
    net: MlpCopy,
    version: u64,
}

impl GreedyQPolicy {
    pub fn new(hidden: &[u32], spec: &EnvSpec) -> Self {
        let n = spec
            .action_space
            .n()
            .expect("Q-policies need a discrete action space");
        let mut net = MlpCopy::new(CpuMlp::new(spec.obs_dim(), hidden, n));
        // Acts (with zero weights) before the first load, like the tensor
        // version did.
        net.load(&vec![0.0; net.net().numel()])
            .expect("sized from the network");
        GreedyQPolicy { net, version: 0 }
    }
}

impl Policy for GreedyQPolicy {
    fn load(&mut self, w: &Weights) -> Result<(), AgentError> {
        check_weights(&w.data, self.net.net().numel())?;
        self.net.load(&w.data).expect("count checked");
        self.version = w.version;
        Ok(())
    }

    fn act(&mut self, obs: &[f32], action: &mut [f32]) {
        action[0] = argmax(self.net.forward(obs, 1)) as f32;
    }

    fn version(&self) -> u64 {
        self.version
    }
}
