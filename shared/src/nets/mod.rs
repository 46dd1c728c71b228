//! Networks on the CPU without libtorch: [`NetShape`] (an optional
//! convolutional torso, then a ReLU MLP) and its flat parameter layout, which
//! matches `rlfleet_learning::nets::FlatNet` (torso layers first, each a
//! `[out, in, k, k]` weight then the bias; then per MLP layer a row-major
//! `[fan_out, fan_in]` weight, then the bias); [`NetCopy`], the forward pass
//! in plain Rust over its own copy of the parameters, so actors act from
//! published weights without libtorch and the learner answers small CPU
//! inference batches without libtorch's per-call overhead; and [`Forward`],
//! what any backend of that forward pass offers.

mod conv;
mod copy;
mod lstm;
mod torso;

pub use copy::NetCopy;
pub use lstm::Core;
pub use torso::{ConvLayer, ConvTorso, Op, TorsoKind};

/// A network: an optional convolutional torso, then MLP layer sizes (input
/// first: the torso's features, or the observation), with an optional
/// recurrent [`Core`] between the last hidden layer and the output layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetShape {
    torso: Option<ConvTorso>,
    sizes: Vec<usize>,
    core: Option<Core>,
}

impl NetShape {
    /// An MLP over `input` values.
    pub fn new(input: usize, hidden: &[u32], output: usize) -> NetShape {
        let mut sizes = vec![input];
        sizes.extend(hidden.iter().map(|&h| h as usize));
        sizes.push(output);
        NetShape {
            torso: None,
            sizes,
            core: None,
        }
    }

    /// The same network with `core` before its output layer.
    pub fn with_core(mut self, core: Option<Core>) -> NetShape {
        self.core = core;
        self
    }

    pub fn core(&self) -> Option<&Core> {
        self.core.as_ref()
    }

    /// Values of one row's recurrent state (0 without a core).
    pub fn state_len(&self) -> usize {
        self.core.as_ref().map_or(0, Core::state_len)
    }

    /// Inputs of the output layer: the core's units, or the last hidden
    /// layer's.
    pub fn head_input(&self) -> usize {
        match &self.core {
            Some(c) => c.size,
            None => self.sizes[self.sizes.len() - 2],
        }
    }

    /// `torso`, when given, then an MLP over its features; without one an
    /// MLP over `obs_dim` values.
    pub fn with_torso(
        torso: Option<ConvTorso>,
        obs_dim: usize,
        hidden: &[u32],
        output: usize,
    ) -> NetShape {
        let input = torso.as_ref().map_or(obs_dim, ConvTorso::output_dim);
        NetShape {
            torso,
            ..NetShape::new(input, hidden, output)
        }
    }

    /// The same network with `output` outputs.
    pub fn with_output(&self, output: usize) -> NetShape {
        let mut shape = self.clone();
        *shape.sizes.last_mut().expect("at least two sizes") = output;
        shape
    }

    pub fn torso(&self) -> Option<&ConvTorso> {
        self.torso.as_ref()
    }

    /// Values of one observation.
    pub fn obs_dim(&self) -> usize {
        self.torso
            .as_ref()
            .map_or(self.sizes[0], ConvTorso::obs_dim)
    }

    /// Total number of parameters.
    pub fn numel(&self) -> usize {
        self.torso.as_ref().map_or(0, ConvTorso::numel) + self.mlp_numel()
    }

    /// Parameters of the MLP part (with the core, when there is one).
    pub fn mlp_numel(&self) -> usize {
        let Some(core) = &self.core else {
            return self.sizes.windows(2).map(|w| w[0] * w[1] + w[1]).sum();
        };
        let n = self.sizes.len();
        let hidden: usize = self.sizes[..n - 1]
            .windows(2)
            .map(|w| w[0] * w[1] + w[1])
            .sum();
        hidden + core.numel(self.sizes[n - 2]) + core.size * self.sizes[n - 1] + self.sizes[n - 1]
    }

    /// MLP layer sizes, input first, output last.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// Refuses flat parameters of the wrong count, naming both.
    pub fn check_params(&self, got: usize) -> Result<(), String> {
        if got != self.numel() {
            return Err(format!(
                "weights have {got} values, the network has {}",
                self.numel()
            ));
        }
        Ok(())
    }

    /// Refuses a backend built for another network than `self`.
    pub fn check_backend(&self, backend: &NetShape) -> Result<(), String> {
        if backend != self {
            return Err(format!(
                "the backend runs {}, the policy has {}",
                backend.describe(),
                self.describe()
            ));
        }
        Ok(())
    }

    /// The layers in a line, for errors and logs.
    pub fn describe(&self) -> String {
        let mut mlp = format!("MLP {:?}", self.sizes);
        if let Some(core) = &self.core {
            mlp = format!("{mlp} with an {} before its output", core.describe());
        }
        match &self.torso {
            None => mlp,
            Some(t) => format!("{} then {mlp}", t.describe()),
        }
    }

    pub fn output_dim(&self) -> usize {
        *self.sizes.last().expect("at least two sizes")
    }
}

/// What a policy's network is made of, before its head: a torso, hidden
/// layers, a recurrent core.
#[derive(Debug, Clone)]
pub struct Net<'a> {
    pub torso: Option<ConvTorso>,
    pub hidden: &'a [u32],
    pub core: Option<Core>,
}

/// Observation rows as a network takes them.
#[derive(Debug, Clone, Copy)]
pub enum Rows<'a> {
    Values(&'a [f32]),
    /// A uint8 env's bytes: the network converts them to their values
    /// 0..=255 (a device network on its device).
    Bytes(&'a [u8]),
}

impl<'a> Rows<'a> {
    /// Values (or bytes) held.
    pub fn len(&self) -> usize {
        match self {
            Rows::Values(v) => v.len(),
            Rows::Bytes(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values `at..at + len`, held the same way.
    pub fn slice(self, at: usize, len: usize) -> Rows<'a> {
        match self {
            Rows::Values(v) => Rows::Values(&v[at..at + len]),
            Rows::Bytes(b) => Rows::Bytes(&b[at..at + len]),
        }
    }

    /// The rows as values (bytes widened to 0..=255).
    pub fn values(self) -> std::borrow::Cow<'a, [f32]> {
        match self {
            Rows::Values(v) => std::borrow::Cow::Borrowed(v),
            Rows::Bytes(b) => b.iter().map(|&x| f32::from(x)).collect(),
        }
    }
}

/// Something that runs a [`NetShape`]'s forward pass from flat parameters in
/// the learner's layout: [`NetCopy`] in plain Rust, or an ONNX Runtime
/// session on the actor (`actor-client`'s `ort` backend).
pub trait Forward: Send + std::fmt::Debug {
    /// The layer sizes it runs.
    fn net(&self) -> &NetShape;
    /// Takes new parameters; refuses a wrong count.
    fn load(&mut self, params: &[f32]) -> Result<(), String>;
    fn loaded(&self) -> bool;
    /// Outputs for `batch` rows of `x` (`batch * output_dim` values).
    /// Panics for a network with a recurrent core (its state is
    /// [`Forward::forward_state`]'s).
    fn forward(&mut self, x: &[f32], batch: usize) -> &[f32];
    /// Outputs for `batch` rows with a recurrent core, reading and writing
    /// each row's `state` (`batch * state_len` values). Only backends that
    /// run a core take one: the others refuse such a network when built.
    fn forward_state(&mut self, x: Rows<'_>, batch: usize, state: &mut [f32]) -> &[f32] {
        assert!(state.is_empty(), "this backend runs no recurrent core");
        self.forward_rows(x, batch)
    }
    /// [`Forward::forward`] for rows held either way: bytes are widened
    /// here unless the backend takes them as they are.
    fn forward_rows(&mut self, x: Rows<'_>, batch: usize) -> &[f32] {
        self.forward(&x.values(), batch)
    }
}

/// Index of the largest value (the first one on ties, like `argmax`).
pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}
