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

    /// Where `self` and `other` first differ, bit for bit, in words
    /// (tensors are matched by name, in any order); `None` when they are
    /// the same.
    pub fn first_difference(&self, other: &AgentState) -> Option<String> {
        let counters = |s: &AgentState| (s.train_steps, s.version, s.optimizer_steps);
        if counters(self) != counters(other) {
            return Some(format!(
                "counters (train steps, version, optimizer steps) {:?} vs {:?}",
                counters(self),
                counters(other)
            ));
        }
        if self.tensors.len() != other.tensors.len() {
            return Some(format!(
                "{} tensors vs {}",
                self.tensors.len(),
                other.tensors.len()
            ));
        }
        for a in &self.tensors {
            let Ok(b) = other.tensor(&a.name) else {
                return Some(format!("`{}` only in the first", a.name));
            };
            if a.data.len() != b.data.len() {
                return Some(format!(
                    "`{}`: {} values vs {}",
                    a.name,
                    a.data.len(),
                    b.data.len()
                ));
            }
            let bits = |x: &f32| x.to_bits();
            if let Some(i) = (0..a.data.len()).find(|&i| bits(&a.data[i]) != bits(&b.data[i])) {
                return Some(format!(
                    "`{}` differs first at {i} of {}: {} vs {}",
                    a.name,
                    a.data.len(),
                    a.data[i],
                    b.data[i]
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(tensors: &[(&str, &[f32])]) -> AgentState {
        AgentState {
            tensors: tensors
                .iter()
                .map(|(name, data)| NamedTensor {
                    name: name.to_string(),
                    shape: vec![data.len()],
                    data: data.to_vec(),
                })
                .collect(),
            train_steps: 3,
            version: 3,
            optimizer_steps: 3,
        }
    }

    /// Tensors match by name in any order; the first value that differs
    /// (bit for bit: -0.0 is not 0.0) is named.
    #[test]
    fn the_first_difference_is_named() {
        let a = state(&[("online", &[1.0, 2.0]), ("adam.m", &[0.0])]);
        let b = state(&[("adam.m", &[0.0]), ("online", &[1.0, 2.0])]);
        assert_eq!(a.first_difference(&b), None);
        let c = state(&[("adam.m", &[-0.0]), ("online", &[1.0, 2.0])]);
        assert_eq!(
            a.first_difference(&c).unwrap(),
            "`adam.m` differs first at 0 of 1: 0 vs -0"
        );
        let d = state(&[("online", &[1.0, 2.0]), ("adam.v", &[0.0])]);
        assert_eq!(
            a.first_difference(&d).unwrap(),
            "`adam.m` only in the first"
        );
        let mut e = b.clone();
        e.version = 4;
        assert!(a.first_difference(&e).unwrap().starts_with("counters"));
    }
}
