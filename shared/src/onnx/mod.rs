//! ONNX export of rlfleet's policy networks, written directly as protobuf
//! (no ONNX library): the flat-parameter network (`nets::NetShape`'s
//! layout: an optional convolutional torso as `Conv` nodes, then the ReLU
//! MLP as `Gemm` nodes) and its heads. The flat parameters are either a graph input `params`
//! (what actors use: a weight update is a new input, the graph is never
//! rebuilt) or embedded as an initializer (a standalone file any ONNX
//! runtime loads). Every model has the input `obs` `[batch, obs_dim]`, the
//! raw network output `out` `[batch, width]`, and the head's output: `q`
//! (Q-values; a dueling head's `V + A - mean(A)`), `logits`, or `action`
//! (the greedy action in the env's box). A network with a recurrent core
//! also has the input `state` and the output `state_out` (`lstm.rs`).

mod graph;
mod lstm;
mod proto;

use crate::config::{AgentKind, RunConfig};
use crate::env::{EnvSpec, Space};
use crate::nets::NetShape;
use graph::{Dim, Graph, attr_int, attr_ints, value_info};
use proto::Msg;

/// ONNX IR version and default-domain opset the models use.
pub const IR_VERSION: i64 = 8;
pub const OPSET: i64 = 17;

const FLOAT: i64 = 1;
const INT64: i64 = 7;

/// What the model computes from the network's raw output.
#[derive(Debug, Clone, PartialEq)]
pub enum Head {
    /// Q-values.
    Q,
    /// Raw outputs are `[V, A_0..A_k]`; `q = V + A - mean(A)`.
    DuelingQ,
    /// Logits of a softmax policy.
    Logits,
    /// `action = center + half * tanh(out)`.
    Tanh { low: Vec<f32>, high: Vec<f32> },
    /// Raw outputs are `[mean, log_std]`; `action = center + half *
    /// tanh(mean)`.
    SquashedGaussian { low: Vec<f32>, high: Vec<f32> },
    /// Raw outputs are the mean (log stds follow the network's parameters
    /// in `params`); `action = clip(mean, low, high)`.
    Gaussian { low: Vec<f32>, high: Vec<f32> },
}

impl Head {
    /// The name of the head's output.
    pub fn output(&self) -> &'static str {
        match self {
            Head::Q | Head::DuelingQ => "q",
            Head::Logits => "logits",
            _ => "action",
        }
    }
}

/// A policy network and its head.
#[derive(Debug, Clone)]
pub struct PolicyGraph {
    pub net: NetShape,
    pub head: Head,
}

impl PolicyGraph {
    /// The network and head a run's agent publishes.
    pub fn for_run(cfg: &RunConfig, spec: &EnvSpec) -> PolicyGraph {
        match &spec.action_space {
            Space::Discrete { n } => {
                let (width, head) = if cfg.dueling() {
                    (n + 1, Head::DuelingQ)
                } else if cfg.agent.samples_softmax() {
                    (*n, Head::Logits)
                } else {
                    (*n, Head::Q)
                };
                PolicyGraph {
                    net: cfg.policy_shape(spec, width),
                    head,
                }
            }
            Space::Box { low, high } => {
                let (low, high) = (low.clone(), high.clone());
                let d = low.len();
                let (width, head) = match cfg.agent {
                    AgentKind::Sac => (2 * d, Head::SquashedGaussian { low, high }),
                    AgentKind::Ppo => (d, Head::Gaussian { low, high }),
                    _ => (d, Head::Tanh { low, high }),
                };
                PolicyGraph {
                    net: cfg.policy_shape(spec, width),
                    head,
                }
            }
        }
    }

    /// Values `params` holds: the network's, then a Gaussian head's log
    /// stds.
    pub fn numel(&self) -> usize {
        self.net.numel()
            + match &self.head {
                Head::Gaussian { low, .. } => low.len(),
                _ => 0,
            }
    }

    /// The serialized `ModelProto`. With `params`, they are embedded (a
    /// standalone file); without, `params` is a graph input.
    pub fn model(&self, params: Option<&[f32]>) -> Vec<u8> {
        let mut g = Graph::default();
        let sizes = self.net.sizes().to_vec();
        let obs_dim = self.net.obs_dim();
        let mut inputs = vec![value_info("obs", &[Dim::Batch, Dim::Fixed(obs_dim)])];
        match params {
            Some(p) => {
                assert_eq!(p.len(), self.numel(), "parameter count");
                g.init_f32("params", &[p.len() as i64], p);
            }
            // Only the network's part of the weights is read: a Gaussian
            // head's log stds may follow or not (actors feed the network's).
            None => inputs.push(value_info("params", &[Dim::Named("n_params")])),
        }
        let core = self.net.core().copied();
        if let Some(core) = &core {
            let len = core.state_len();
            inputs.push(value_info("state", &[Dim::Batch, Dim::Fixed(len)]));
        }
        let n_layers = sizes.len() - 1;
        let mut h = "obs".to_string();
        let mut offset = 0i64;
        if let Some(torso) = self.net.torso() {
            h = g.torso(torso, &mut offset);
        }
        // The hidden layers, then (through the core, if any) the output.
        let mut layers: Vec<(usize, usize)> =
            sizes[..n_layers].windows(2).map(|w| (w[0], w[1])).collect();
        layers.push((self.net.head_input(), sizes[n_layers]));
        for (i, (fan_in, fan_out)) in layers.into_iter().enumerate() {
            if let Some(core) = core.as_ref().filter(|_| i + 1 == n_layers) {
                h = g.lstm_step(core, &h, sizes[n_layers - 1], &mut offset);
            }
            let (fan_in, fan_out) = (fan_in as i64, fan_out as i64);
            let flat = g.slice("params", offset, offset + fan_in * fan_out, 0);
            offset += fan_in * fan_out;
            let shape = g.const_i64(&[fan_out, fan_in]);
            let weight = g.node("Reshape", &[&flat, &shape], vec![]);
            let bias = g.slice("params", offset, offset + fan_out, 0);
            offset += fan_out;
            let trans_b = attr_int("transB", 1);
            let out_name = if i + 1 == n_layers {
                "out".to_string()
            } else {
                g.fresh()
            };
            g.node_to("Gemm", &[&h, &weight, &bias], &out_name, vec![trans_b]);
            h = if i + 1 < n_layers {
                g.node("Relu", &[&out_name], vec![])
            } else {
                out_name
            };
        }
        let width = *sizes.last().expect("sizes") as i64;
        let head_out = self.head.output();
        let out_dim = match &self.head {
            Head::Q | Head::Logits => {
                g.node_to("Identity", &["out"], head_out, vec![]);
                width
            }
            Head::DuelingQ => {
                let v = g.slice("out", 0, 1, 1);
                let a = g.slice("out", 1, width, 1);
                let mean = g.node(
                    "ReduceMean",
                    &[&a],
                    vec![attr_ints("axes", &[1]), attr_int("keepdims", 1)],
                );
                let va = g.node("Add", &[&v, &a], vec![]);
                g.node_to("Sub", &[&va, &mean], head_out, vec![]);
                width - 1
            }
            Head::Tanh { low, high } | Head::SquashedGaussian { low, high } => {
                let d = low.len() as i64;
                let mean = if matches!(self.head, Head::Tanh { .. }) {
                    "out".to_string()
                } else {
                    g.slice("out", 0, d, 1)
                };
                let t = g.node("Tanh", &[&mean], vec![]);
                let half: Vec<f32> = low.iter().zip(high).map(|(l, h)| (h - l) / 2.0).collect();
                let center: Vec<f32> = low.iter().zip(high).map(|(l, h)| (h + l) / 2.0).collect();
                let half = g.const_f32(&half);
                let center = g.const_f32(&center);
                let scaled = g.node("Mul", &[&t, &half], vec![]);
                g.node_to("Add", &[&scaled, &center], head_out, vec![]);
                d
            }
            Head::Gaussian { low, high } => {
                let lo = g.const_f32(low);
                let hi = g.const_f32(high);
                let capped = g.node("Min", &["out", &hi], vec![]);
                g.node_to("Max", &[&capped, &lo], head_out, vec![]);
                low.len() as i64
            }
        };
        let mut outputs = vec![
            value_info("out", &[Dim::Batch, Dim::Fixed(width as usize)]),
            value_info(head_out, &[Dim::Batch, Dim::Fixed(out_dim as usize)]),
        ];
        if let Some(core) = &core {
            let len = core.state_len();
            outputs.push(value_info("state_out", &[Dim::Batch, Dim::Fixed(len)]));
        }

        let mut graph = Msg::new();
        for n in &g.nodes {
            graph.msg(1, n);
        }
        graph.str(2, "rlfleet_policy");
        for t in &g.inits {
            graph.msg(5, t);
        }
        for i in &inputs {
            graph.msg(11, i);
        }
        for o in &outputs {
            graph.msg(12, o);
        }
        let mut opset = Msg::new();
        opset.str(1, "").int(2, OPSET);
        let mut model = Msg::new();
        model
            .int(1, IR_VERSION)
            .str(2, "rlfleet")
            .str(3, env!("CARGO_PKG_VERSION"))
            .msg(7, &graph)
            .msg(8, &opset);
        model.buf
    }
}
