//! rlfleet's checkpoint file: an agent's state, the run's counters, the
//! best evaluated weights, the run's books and optionally the replay's
//! contents, in one safetensors file written atomically. Plain data and
//! the format only (no libtorch): the learner converts its tensors to and
//! from these types, and the `checkpoint` fuzz target builds on this crate
//! alone.
//!
//! - [`state`]: [`Weights`], [`AgentState`] and its [`NamedTensor`]s.
//! - [`replay_image`]: [`ReplayImage`], a replay's arrays and counters.
//! - [`format`]: [`Checkpoint`], its save and load, [`write_atomically`].

pub mod format;
pub mod replay_image;
pub mod state;

pub use format::{BestEval, Checkpoint, CheckpointError, RunCounters, write_atomically};
pub use replay_image::{Blob, BlobType, ImageError, ReplayImage};
pub use state::{AgentState, MissingTensor, NamedTensor, Weights};
