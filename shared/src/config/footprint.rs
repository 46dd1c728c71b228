//! A run's device memory as a daemon reserves it (`[runs]
//! device_memory_mb`): stated in `[fleet] device_memory_mb`, or estimated
//! from the agent's networks and batches over the env's spec.

use super::{AgentKind, RunConfig};
use crate::env::{EnvSpec, Space};

/// Megabytes a run keeps on the device beyond its tensors: the caching
/// allocator rounds blocks up and keeps them, and the BLAS and
/// convolution libraries keep workspaces.
pub const RUN_OVERHEAD_MB: u64 = 64;

/// What the estimate counts (all values are 4-byte floats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Parameters of the policy network.
    pub params: u64,
    /// Policy-sized tensors the agent keeps: its networks (a value
    /// network or critics count as policy-sized), target copies,
    /// gradients and Adam's two moments.
    pub copies: u64,
    /// Rows one gradient step runs through its networks (batch × unroll
    /// × forward passes).
    pub rows: u64,
    /// Values a row keeps for the backward pass: the observation, every
    /// layer's activations and the outputs.
    pub row_values: u64,
}

impl Footprint {
    /// Bytes of tensors: parameters and their copies, and each row's
    /// activations with their gradients.
    pub fn bytes(&self) -> u64 {
        4 * (self.params * self.copies + 2 * self.rows * self.row_values)
    }

    /// Megabytes reserved: the tensors, rounded up, and the overhead.
    pub fn mb(&self) -> u64 {
        self.bytes().div_ceil(1 << 20) + RUN_OVERHEAD_MB
    }
}

impl RunConfig {
    /// Device memory to reserve for this run, in MB: `[fleet]
    /// device_memory_mb` when stated, else [`RunConfig::footprint`]'s.
    pub fn device_memory_mb(&self, spec: &EnvSpec) -> u64 {
        self.fleet
            .device_memory_mb
            .unwrap_or_else(|| self.footprint(spec).mb())
    }

    /// The estimate of what this run's learner keeps on its device.
    pub fn footprint(&self, spec: &EnvSpec) -> Footprint {
        let outputs = match &spec.action_space {
            Space::Discrete { n } => n + usize::from(self.dueling()),
            Space::Box { low, .. } if self.agent == AgentKind::Sac => 2 * low.len(),
            Space::Box { low, .. } => low.len(),
        };
        let net = self.policy_shape(spec, outputs);
        let torso: usize = net.torso().map_or(0, |t| {
            t.geometry()
                .into_iter()
                .map(|(op, at)| op.output(at).iter().product::<usize>())
                .sum()
        });
        let hidden: usize = net.sizes()[1..].iter().sum();
        let core = net.core().map_or(0, |c| 4 * c.size);
        let row_values = (net.obs_dim() + torso + hidden + core) as u64;
        // Per agent: policy-sized tensors, then rows per gradient step.
        let (copies, rows) = match self.agent {
            AgentKind::Probe => (0, 0),
            // Online and target networks; a gradient and two moments.
            AgentKind::Dqn => (5, 3 * u64::from(self.dqn.batch_size)),
            AgentKind::R2d2 => {
                let r = &self.r2d2;
                let steps = u64::from(r.burn_in + r.unroll_length + 1);
                (5, 3 * u64::from(r.batch_size) * steps)
            }
            // Policy and value networks, each with a gradient and moments.
            AgentKind::Ppo => (8, 2 * u64::from(self.ppo.batch_size)),
            AgentKind::Impala => (8, 2 * u64::from(self.impala.n_steps)),
            // Trains on finished episodes: a thousand steps at a time.
            AgentKind::A2c => (8, 2 * 1_000),
            // Actor and critics with their targets; the trained ones with
            // a gradient and moments.
            AgentKind::Td3 => (15, 6 * u64::from(self.td3.batch_size)),
            AgentKind::Ddpg => (10, 4 * u64::from(self.ddpg.batch_size)),
            AgentKind::Sac => (14, 6 * u64::from(self.sac.batch_size)),
        };
        Footprint {
            params: net.numel() as u64,
            copies,
            rows,
            row_values: if rows == 0 { 0 } else { row_values },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(toml: &str) -> RunConfig {
        let text = format!(
            "name = \"t\"\nworkflow = \"single\"\noutput_dir = \"runs/t\"\n{toml}\n[stop]\nmax_env_steps = 100\n"
        );
        RunConfig::from_toml(&text, "test.toml").expect("valid config")
    }

    #[test]
    fn the_estimate_counts_networks_and_batches_and_a_stated_size_wins() {
        let small = cfg(
            "env = \"CartPole-v1\"\nagent = \"dqn\"\n[dqn]\nhidden = [64, 64]\nbatch_size = 64\n",
        );
        let spec = crate::env::spec("CartPole-v1").expect("builtin");
        let f = small.footprint(&spec);
        // 4·64+64 + 64·64+64 + 64·2+2 parameters.
        assert_eq!(f.params, 320 + 4_160 + 130);
        assert_eq!(f.copies, 5);
        assert_eq!(f.rows, 3 * 64);
        assert_eq!(f.row_values, 4 + 64 + 64 + 2);
        assert_eq!(f.bytes(), 4 * (4_610 * 5 + 2 * 192 * 134));
        assert_eq!(small.device_memory_mb(&spec), 1 + RUN_OVERHEAD_MB);
        let wide = cfg(
            "env = \"CartPole-v1\"\nagent = \"dqn\"\n[dqn]\nhidden = [2048, 2048]\nbatch_size = 4096\n",
        );
        let w = wide.footprint(&spec);
        // About 4.2M parameters ×5 and 4096·3 rows of ~4.1k values: ~470 MB.
        assert!(
            (400..600).contains(&(w.mb() - RUN_OVERHEAD_MB)),
            "{w:?}: {} MB",
            w.mb()
        );
        let stated =
            cfg("env = \"CartPole-v1\"\nagent = \"dqn\"\n[fleet]\ndevice_memory_mb = 3000\n");
        assert_eq!(stated.device_memory_mb(&spec), 3_000);
    }
}
