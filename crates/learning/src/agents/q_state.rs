//! What a Q-learner (DQN, R2D2) saves and restores: its online and target
//! networks, its optimizer's moments and steps, and its train steps.

use super::{AgentError, AgentState, Optimizer, named, restore};
use tch::Tensor;

/// The state of a Q-learner at `train_steps` (also its version).
pub(crate) fn q_state(
    online: &Tensor,
    target: &Tensor,
    opt: &Optimizer,
    train_steps: u64,
) -> AgentState {
    let mut tensors = vec![named("online", online), named("target", target)];
    tensors.extend(opt.state());
    AgentState {
        tensors,
        train_steps,
        version: train_steps,
        optimizer_steps: opt.steps(),
    }
}

/// Puts back what [`q_state`] saved (every tensor checked before any is
/// written); returns the train steps to resume from.
pub(crate) fn load_q_state(
    s: &AgentState,
    online: &mut Tensor,
    target: &mut Tensor,
    opt: &mut Optimizer,
) -> Result<u64, AgentError> {
    let [m, v] = opt.tensors_mut();
    restore(s, &mut [("online", online), ("target", target), m, v])?;
    *opt.steps_mut() = s.optimizer_steps;
    Ok(s.train_steps)
}
