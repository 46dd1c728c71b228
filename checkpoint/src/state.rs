//! An agent's state as plain data: [`Weights`] (what goes on the wire and
//! to the evaluator) and [`AgentState`] (named tensors and counters, what
//! a checkpoint keeps of an agent).

/// A weights publication: a version that only grows, and the parameters as
/// raw flat f32 (what goes on the wire).
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    pub version: u64,
    pub data: Vec<f32>,
}

/// A named f32 tensor of an agent's state, for checkpoints.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Everything needed to resume an agent: tensors (networks, optimizer
/// moments) and counters.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentState {
    pub tensors: Vec<NamedTensor>,
    pub train_steps: u64,
    pub version: u64,
    pub optimizer_steps: u64,
}

/// An [`AgentState`] lacks a tensor its agent needs.
#[derive(Debug, thiserror::Error)]
#[error("agent state has no tensor `{0}`")]
pub struct MissingTensor(pub String);

impl AgentState {
    pub fn tensor(&self, name: &str) -> Result<&NamedTensor, MissingTensor> {
        self.tensors
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| MissingTensor(name.into()))
    }
}
