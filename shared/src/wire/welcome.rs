//! What a [`Welcome`] means to an actor: its env, its action kind, and
//! the torso description ([`TorsoMsg`]) made from and into a
//! [`ConvTorso`](crate::nets::ConvTorso).

use super::messages::{TorsoMsg, Welcome};

impl Welcome {
    /// Actions are discrete indices.
    pub fn discrete_actions(&self) -> bool {
        self.action_n > 0
    }

    /// The env this welcome asks the actor to run, with its Python options.
    pub fn env_source(&self) -> crate::env::EnvSource {
        crate::env::EnvSource {
            id: self.env_id.clone(),
            kwargs_json: self.env_kwargs.clone(),
            wrappers: self.env_wrappers.clone(),
            python_path: self.python_path.clone(),
            frame_stack: self.frame_stack,
        }
    }

    /// The recurrent core, refused when its sizes are out of range.
    pub fn core(&self) -> Result<Option<crate::nets::Core>, String> {
        match self.core {
            [0, 0] => Ok(None),
            [size @ 1..=4096, layers @ 1..=4] => Ok(Some(crate::nets::Core {
                size: size as usize,
                layers: layers as usize,
            })),
            [size, layers] => Err(format!(
                "the learner's recurrent core has {size} units and {layers} layers \
                 (1..=4096 and 1..=4 are run)"
            )),
        }
    }
}

/// A [`Welcome`]'s `core` for `core`.
pub fn core_msg(core: Option<crate::nets::Core>) -> [u32; 2] {
    core.map_or([0, 0], |c| [c.size as u32, c.layers as u32])
}

impl TorsoMsg {
    pub fn new(t: &crate::nets::ConvTorso) -> TorsoMsg {
        TorsoMsg {
            input: t.input.map(|d| d as u32),
            channels_last: t.channels_last,
            impala: t.kind == crate::nets::TorsoKind::Impala,
            scaled: t.bytes,
            layers: t
                .layers
                .iter()
                .map(|l| [l.out, l.kernel, l.stride].map(|d| d as u32))
                .collect(),
        }
    }

    /// The torso, refused by name when its layers do not fit its image.
    pub fn torso(&self) -> Result<crate::nets::ConvTorso, String> {
        let t = crate::nets::ConvTorso {
            input: self.input.map(|d| d as usize),
            channels_last: self.channels_last,
            bytes: self.scaled,
            kind: if self.impala {
                crate::nets::TorsoKind::Impala
            } else {
                crate::nets::TorsoKind::Plain
            },
            layers: self
                .layers
                .iter()
                .map(|&[out, kernel, stride]| crate::nets::ConvLayer {
                    out: out as usize,
                    kernel: kernel as usize,
                    stride: stride as usize,
                })
                .collect(),
        };
        t.check()?;
        Ok(t)
    }
}
