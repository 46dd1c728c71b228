//! The `[model]` table: the network's torso, shared by every agent that
//! takes one. The agent's own table keeps the MLP widths after the torso
//! (`hidden`) and its heads.

use crate::env::{EnvSpec, ObsDtype};
use crate::nets::{ConvLayer, ConvTorso};
use serde::{Deserialize, Serialize};

/// What comes before the agent's MLP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Torso {
    /// None: the MLP reads the flat observation.
    #[default]
    Mlp,
    /// Convolutions with ReLU (no padding), flattened: DQN-Nature's three
    /// layers by default (32 8x8/4, 64 4x4/2, 64 3x3/1), or as
    /// `channels`, `kernels` and `strides` say.
    NatureCnn,
}

/// How an image observation's axes are laid out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ImageLayout {
    /// `[H, W, C]` when the last axis has at most 4 entries and the first
    /// more than 4; `[C, H, W]` otherwise.
    #[default]
    Auto,
    /// Channels first, as PyTorch and Gymnasium's frame stacking give.
    Chw,
    /// Channels last, as raw Atari and most image libraries give.
    Hwc,
}

/// The network's torso.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    pub torso: Torso,
    /// Output channels of each convolution.
    pub channels: Vec<u32>,
    /// Square kernel size of each convolution.
    pub kernels: Vec<u32>,
    /// Stride of each convolution.
    pub strides: Vec<u32>,
    /// Axis order of image observations (a 2-D observation is one
    /// channel).
    pub layout: ImageLayout,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            torso: Torso::Mlp,
            channels: vec![32, 64, 64],
            kernels: vec![8, 4, 3],
            strides: vec![4, 2, 1],
            layout: ImageLayout::Auto,
        }
    }
}

impl ModelConfig {
    /// The torso for observations of `spec` (`None` for an MLP), or what
    /// is wrong with the table for them.
    pub fn torso_for(&self, spec: &EnvSpec) -> Result<Option<ConvTorso>, String> {
        if self.torso == Torso::Mlp {
            return Ok(None);
        }
        let n = self.channels.len();
        if n == 0 || n > 8 || self.kernels.len() != n || self.strides.len() != n {
            return Err(format!(
                "model.channels, model.kernels and model.strides give one entry per \
                 convolution (1 to 8 of them): got {}, {} and {}",
                n,
                self.kernels.len(),
                self.strides.len()
            ));
        }
        let in_range = |v: &[u32], max: u32| v.iter().all(|&x| (1..=max).contains(&x));
        if !in_range(&self.channels, 4096)
            || !in_range(&self.kernels, 64)
            || !in_range(&self.strides, 64)
        {
            return Err(
                "model.channels must be in 1..=4096, model.kernels and model.strides \
                        in 1..=64"
                    .into(),
            );
        }
        let shape = &spec.obs_shape;
        let (input, channels_last) = match (shape.as_slice(), self.layout) {
            (&[h, w], _) => ([1, h, w], false),
            (&[a, b, c], ImageLayout::Chw) => ([a, b, c], false),
            (&[a, b, c], ImageLayout::Hwc) => ([c, a, b], true),
            (&[a, b, c], ImageLayout::Auto) if c <= 4 && a > 4 => ([c, a, b], true),
            (&[a, b, c], ImageLayout::Auto) => ([a, b, c], false),
            _ => {
                return Err(format!(
                    "model.torso = \"nature-cnn\" needs image observations (2 or 3 axes); \
                     `{}` observes shape {shape:?}",
                    spec.id
                ));
            }
        };
        let torso = ConvTorso {
            input,
            channels_last,
            bytes: spec.obs_dtype == ObsDtype::U8,
            layers: (0..n)
                .map(|i| ConvLayer {
                    out: self.channels[i] as usize,
                    kernel: self.kernels[i] as usize,
                    stride: self.strides[i] as usize,
                })
                .collect(),
        };
        torso
            .check()
            .map_err(|e| format!("model: {e} (`{}` observes {shape:?})", spec.id))?;
        Ok(Some(torso))
    }
}
