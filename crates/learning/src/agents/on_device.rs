//! What agents keep on the host, on the device: a sampled batch, rows of
//! observations (bytes cross as bytes), and which networks read stacks of
//! frames (kept one frame per step).

use crate::device::upload;
use rlfleet_replay::{ObsStore, SampledBatch};
use tch::Device;

/// A sampled batch on `device`: its observations and next observations
/// `[2 * batch, obs_dim]` (uint8 when the replay keeps bytes: they cross
/// to the device as bytes and the network converts them there), and
/// `data` (actions, rewards and discounts at the batch's offsets; the
/// observations too when they are f32).
pub(crate) fn batch_on_device(batch: &SampledBatch, device: Device) -> (tch::Tensor, tch::Tensor) {
    let (b, od) = (batch.batch as i64, batch.obs_dim as i64);
    let data = upload(&batch.data, &[batch.data.len() as i64], device);
    let both = if batch.bytes {
        upload(&batch.obs_bytes, &[2 * b, od], device)
    } else {
        data.narrow(0, 0, 2 * b * od).view([2 * b, od])
    };
    (both, data)
}

/// The rows of `parts`, one after the other, on `device` as `[rows,
/// obs_dim]` f32: a byte store's rows cross as bytes and become values
/// there (an on-policy agent's trajectories).
pub(crate) fn rows_on_device(parts: &[&ObsStore], obs_dim: usize, device: Device) -> tch::Tensor {
    kept_on_device(parts, obs_dim, device).to_kind(tch::Kind::Float)
}

/// [`rows_on_device`] left as kept (bytes stay uint8).
pub(crate) fn kept_on_device(parts: &[&ObsStore], obs_dim: usize, device: Device) -> tch::Tensor {
    // Each part crosses from its own store (no joined host copy first),
    // and the parts meet on the device.
    let od = obs_dim as i64;
    let on: Vec<tch::Tensor> = parts
        .iter()
        .map(|p| match p {
            ObsStore::U8(v) => upload(v, &[v.len() as i64 / od, od], device),
            ObsStore::F32(v) => upload(v, &[v.len() as i64 / od, od], device),
        })
        .collect();
    assert!(
        on.windows(2).all(|w| w[0].kind() == w[1].kind()),
        "rows of bytes and values together"
    );
    if on.is_empty() {
        return tch::Tensor::zeros([0, od], (tch::Kind::Float, device));
    }
    tch::Tensor::cat(&on, 0)
}

/// A network's input that is a channels-first stack of uint8 frames: the
/// values in one frame and the frames in a stack (what replays and
/// rollouts keep one frame per step of).
pub(crate) fn stacked_frames(shape: &rlfleet_shared::nets::NetShape) -> Option<(usize, usize)> {
    let t = shape.torso()?;
    let [c, h, w] = t.input;
    (t.bytes && !t.channels_last && c > 1).then_some((h * w, c))
}
