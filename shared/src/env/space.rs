//! Observation and action spaces (Gymnasium's `Discrete` and `Box`).

/// A space of observations or actions.
#[derive(Debug, Clone, PartialEq)]
pub enum Space {
    /// Integers `0..n`.
    Discrete { n: usize },
    /// A flat box of `f32` with per-dimension bounds (may be infinite).
    Box { low: Vec<f32>, high: Vec<f32> },
}

impl Space {
    /// Number of scalars in one flat element of the space (1 for discrete).
    pub fn flat_dim(&self) -> usize {
        match self {
            Space::Discrete { .. } => 1,
            Space::Box { low, .. } => low.len(),
        }
    }

    /// Number of discrete actions, if discrete.
    pub fn n(&self) -> Option<usize> {
        match self {
            Space::Discrete { n } => Some(*n),
            Space::Box { .. } => None,
        }
    }

    pub fn is_discrete(&self) -> bool {
        matches!(self, Space::Discrete { .. })
    }

    /// A box with the same bound on every dimension.
    pub fn uniform_box(dim: usize, low: f32, high: f32) -> Space {
        Space::Box {
            low: vec![low; dim],
            high: vec![high; dim],
        }
    }

    /// Checks an untrusted continuous action: right length, finite values.
    /// (Values outside the bounds are legal: environments clip, as
    /// Gymnasium's do.)
    pub fn check_continuous(&self, action: &[f32]) -> Result<(), String> {
        match self {
            Space::Discrete { n } => Err(format!(
                "continuous action given to a discrete space of {n} actions"
            )),
            Space::Box { low, .. } => {
                if action.len() != low.len() {
                    return Err(format!(
                        "action has {} values, the space has {} dimensions",
                        action.len(),
                        low.len()
                    ));
                }
                if let Some(i) = action.iter().position(|a| !a.is_finite()) {
                    return Err(format!("action value {i} is {} (not finite)", action[i]));
                }
                Ok(())
            }
        }
    }

    /// Checks an untrusted discrete action index.
    pub fn check_discrete(&self, action: usize) -> Result<(), String> {
        match self {
            Space::Discrete { n } if action < *n => Ok(()),
            Space::Discrete { n } => Err(format!("action {action} is outside 0..{n}")),
            Space::Box { .. } => Err("discrete action given to a continuous space".into()),
        }
    }
}
