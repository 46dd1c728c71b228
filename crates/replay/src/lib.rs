//! Experience storage on the learner. The buffers are plain structs with no
//! tensors, no clock and no IO (sans-IO): workflows push transitions, agents
//! sample batches into reusable buffers; a rate limiter paces the two.

mod chains;
mod n_step;
mod obs_store;
mod prioritized;
mod rate_limiter;
mod sequence_frames;
mod sequences;
mod stacked_rows;
mod uniform;

pub use chains::FrameChains;
pub use n_step::NStep;
pub use obs_store::{ObsStore, ObsValue};
pub use prioritized::{Prioritized, SumTree};
pub use rate_limiter::RateLimiter;
pub use rlfleet_checkpoint::{Blob, BlobType, ImageError, ReplayImage};
pub use sequence_frames::{FrameRows, SequenceFrames};
pub use sequences::{SeqObs, Sequence, SequenceReplay};
pub use stacked_rows::StackedRows;
pub use uniform::{SampledBatch, Transition, UniformReplay};
