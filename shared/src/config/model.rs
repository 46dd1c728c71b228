//! The `[model]` table: the network's torso, shared by every agent that
//! takes one. The agent's own table keeps the MLP widths after the torso
//! (`hidden`) and its heads.

use crate::env::{EnvSpec, ObsDtype};
use crate::nets::{ConvLayer, ConvTorso, Core, TorsoKind};
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
    /// IMPALA's residual stacks (3x3 convolution, 3x3/2 max-pooling, two
    /// residual blocks), `channels` per stack (16, 32, 32 by default).
    ImpalaCnn,
}

/// What comes between the hidden layers and the output layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CoreKind {
    /// None: the network sees the current observation only.
    #[default]
    None,
    /// An LSTM (`core_size` units, `core_layers` layers) whose state each
    /// env keeps through its episode, zeroed at the episode's start.
    Lstm,
}

/// How an image observation's axes are laid out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ImageLayout {
    /// `[H, W, C]` when the last axis is smaller than both others, `[C,
    /// H, W]` when the first is; refused by name when neither is (a `(10,
    /// 10, 10)` observation), so a guess never reads rows as channels.
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
    /// Output channels of each convolution (`nature-cnn`) or stack
    /// (`impala-cnn`); unset: the torso's own.
    pub channels: Option<Vec<u32>>,
    /// Square kernel size of each convolution (`nature-cnn` only).
    pub kernels: Option<Vec<u32>>,
    /// Stride of each convolution (`nature-cnn` only).
    pub strides: Option<Vec<u32>>,
    /// Axis order of image observations (a 2-D observation is one
    /// channel).
    pub layout: ImageLayout,
    /// The recurrent core before the output layer.
    pub core: CoreKind,
    /// Units of each core layer.
    pub core_size: u32,
    /// Stacked core layers.
    pub core_layers: u32,
    /// Steps a recurrent core is trained through at most (truncated
    /// backpropagation through time: longer segments are cut into pieces
    /// that start from the state the whole pass reached there).
    pub max_seq_len: u32,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            torso: Torso::Mlp,
            channels: None,
            kernels: None,
            strides: None,
            layout: ImageLayout::Auto,
            core: CoreKind::None,
            core_size: 64,
            core_layers: 1,
            max_seq_len: 32,
        }
    }
}

impl ModelConfig {
    /// The recurrent core the table asks for.
    pub fn core(&self) -> Option<Core> {
        (self.core == CoreKind::Lstm).then_some(Core {
            size: self.core_size as usize,
            layers: self.core_layers as usize,
        })
    }

    /// The torso for observations of `spec` (`None` for an MLP), or what
    /// is wrong with the table for them.
    pub fn torso_for(&self, spec: &EnvSpec) -> Result<Option<ConvTorso>, String> {
        let name = match self.torso {
            Torso::Mlp => return Ok(None),
            Torso::NatureCnn => "nature-cnn",
            Torso::ImpalaCnn => "impala-cnn",
        };
        let (kind, channels, kernels, strides) = match self.torso {
            Torso::ImpalaCnn => {
                if self.kernels.is_some() || self.strides.is_some() {
                    return Err(
                        "model.kernels and model.strides are for torso \"nature-cnn\"; \
                                \"impala-cnn\" takes model.channels only (3x3 kernels)"
                            .into(),
                    );
                }
                let channels = self.channels.clone().unwrap_or_else(|| vec![16, 32, 32]);
                let n = channels.len();
                (TorsoKind::Impala, channels, vec![3; n], vec![1; n])
            }
            _ => (
                TorsoKind::Plain,
                self.channels.clone().unwrap_or_else(|| vec![32, 64, 64]),
                self.kernels.clone().unwrap_or_else(|| vec![8, 4, 3]),
                self.strides.clone().unwrap_or_else(|| vec![4, 2, 1]),
            ),
        };
        let n = channels.len();
        if n == 0 || n > 8 || kernels.len() != n || strides.len() != n {
            return Err(format!(
                "model.channels, model.kernels and model.strides give one entry per \
                 convolution (1 to 8 of them): got {}, {} and {}",
                n,
                kernels.len(),
                strides.len()
            ));
        }
        let in_range = |v: &[u32], max: u32| v.iter().all(|&x| (1..=max).contains(&x));
        if !in_range(&channels, 4096) || !in_range(&kernels, 64) || !in_range(&strides, 64) {
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
            // Channels are the axis smaller than both others; when no axis
            // is, the layout is the user's to say.
            (&[a, b, c], ImageLayout::Auto) if c < a.min(b) => ([c, a, b], true),
            (&[a, b, c], ImageLayout::Auto) if a < b.min(c) => ([a, b, c], false),
            (&[_, _, _], ImageLayout::Auto) => {
                return Err(format!(
                    "model.layout = \"auto\" cannot tell the channels of `{}`'s {shape:?} \
                     observations (no axis is smaller than the other two): set \
                     [model] layout = \"chw\" (channels first) or \"hwc\" (channels last)",
                    spec.id
                ));
            }
            _ => {
                return Err(format!(
                    "model.torso = \"{name}\" needs image observations (2 or 3 axes); \
                     `{}` observes shape {shape:?}",
                    spec.id
                ));
            }
        };
        let torso = ConvTorso {
            input,
            channels_last,
            bytes: spec.obs_dtype == ObsDtype::U8,
            kind,
            layers: (0..n)
                .map(|i| ConvLayer {
                    out: channels[i] as usize,
                    kernel: kernels[i] as usize,
                    stride: strides[i] as usize,
                })
                .collect(),
        };
        torso
            .check()
            .map_err(|e| format!("model: {e} (`{}` observes {shape:?})", spec.id))?;
        Ok(Some(torso))
    }
}
