//! Networks whose parameters are one flat f32 tensor.
//!
//! A flat layout makes the operations rlfleet does all the time single tensor
//! operations: an optimizer step, gradient clipping, a target-network update,
//! and weights going out as raw flat f32 (what the wire carries).

mod device_forward;
mod flat;
mod host_mlp;
mod layout;
mod lstm;
mod manual;

pub use device_forward::{DeviceForward, place};
pub use flat::FlatNet;
pub use manual::Traced;

#[cfg(test)]
mod tests;
