//! Experience storage on the learner. The buffers are plain structs with no
//! tensors, no clock and no IO (sans-IO): workflows push transitions, agents
//! sample batches into reusable buffers.

mod uniform;

pub use uniform::{SampledBatch, Transition, UniformReplay};
