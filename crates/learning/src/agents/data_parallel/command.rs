//! The lead learner's commands to its helpers, one MPI message each, as
//! rkyv archives checked on receipt (a damaged or foreign message is an
//! error, never a misread).

use crate::agents::{AgentState, NamedTensor};
use rkyv::rancor;
use rkyv::{Archive, Deserialize, Serialize};
use rlfleet_replay::Transition;

/// One command from the lead learner to a helper.
#[derive(Debug, Clone, PartialEq, Archive, Serialize, Deserialize)]
pub(super) enum Command {
    /// Transitions and episode ends for the helper's replay, in order.
    Observe(Vec<Item>),
    /// Take this many gradient steps (each averaged over the learners).
    Train(u32),
    /// Load this state (the lead's, before the first step).
    State(StateMsg),
    /// Send the weights back and stop.
    Finish,
}

/// Within [`Command::Observe`]: one transition (a uint8 env's as bytes),
/// or one episode's end or abandonment.
#[derive(Debug, Clone, PartialEq, Archive, Serialize, Deserialize)]
pub(super) enum Item {
    Transition(Step<f32>),
    Bytes(Step<u8>),
    End(u64),
    Abandon(u64),
}

/// A transition as it travels: observations as values or as bytes.
#[derive(Debug, Clone, PartialEq, Archive, Serialize, Deserialize)]
pub(super) struct Step<T> {
    episode: u64,
    step: u32,
    obs: Vec<T>,
    action: Vec<f32>,
    reward: f32,
    next_obs: Vec<T>,
    terminated: bool,
    logp: Option<f32>,
}

impl<T: Copy> Step<T> {
    pub fn of(t: &Transition<'_, T>) -> Step<T> {
        Step {
            episode: t.episode,
            step: t.step,
            obs: t.obs.to_vec(),
            action: t.action.to_vec(),
            reward: t.reward,
            next_obs: t.next_obs.to_vec(),
            terminated: t.terminated,
            logp: t.logp,
        }
    }

    pub fn transition(&self) -> Transition<'_, T> {
        Transition {
            episode: self.episode,
            step: self.step,
            obs: &self.obs,
            action: &self.action,
            reward: self.reward,
            next_obs: &self.next_obs,
            terminated: self.terminated,
            logp: self.logp,
        }
    }
}

/// An [`AgentState`] on the wire (sizes as u64 whatever the platform).
#[derive(Debug, Clone, PartialEq, Archive, Serialize, Deserialize)]
pub(super) struct StateMsg {
    pub tensors: Vec<(String, Vec<u64>, Vec<f32>)>,
    pub train_steps: u64,
    pub version: u64,
    pub optimizer_steps: u64,
}

impl From<&AgentState> for StateMsg {
    fn from(s: &AgentState) -> StateMsg {
        StateMsg {
            tensors: s
                .tensors
                .iter()
                .map(|t| {
                    let shape = t.shape.iter().map(|&d| d as u64).collect();
                    (t.name.clone(), shape, t.data.clone())
                })
                .collect(),
            train_steps: s.train_steps,
            version: s.version,
            optimizer_steps: s.optimizer_steps,
        }
    }
}

impl From<StateMsg> for AgentState {
    fn from(s: StateMsg) -> AgentState {
        AgentState {
            tensors: s
                .tensors
                .into_iter()
                .map(|(name, shape, data)| NamedTensor {
                    name,
                    shape: shape.into_iter().map(|d| d as usize).collect(),
                    data,
                })
                .collect(),
            train_steps: s.train_steps,
            version: s.version,
            optimizer_steps: s.optimizer_steps,
        }
    }
}

impl Command {
    pub fn encode(&self) -> Vec<u8> {
        rkyv::to_bytes::<rancor::Error>(self)
            .expect("commands always archive")
            .into_vec()
    }

    /// Checks and decodes a received command.
    pub fn decode(bytes: &[u8]) -> Result<Command, rancor::Error> {
        let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
        aligned.extend_from_slice(bytes);
        rkyv::from_bytes::<Command, rancor::Error>(&aligned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_round_trips_bit_for_bit() {
        let s = AgentState {
            tensors: vec![
                NamedTensor {
                    name: "params".into(),
                    shape: vec![2, 3],
                    data: vec![1.0, -2.5, 3.25, f32::MIN_POSITIVE, 0.0, -0.0],
                },
                NamedTensor {
                    name: "adam.m".into(),
                    shape: vec![],
                    data: vec![],
                },
            ],
            train_steps: 7,
            version: 9,
            optimizer_steps: 11,
        };
        let state = Command::State(StateMsg::from(&s));
        let back = Command::decode(&state.encode()).expect("decodes");
        let Command::State(msg) = back else {
            panic!("not a state: {back:?}")
        };
        let back = AgentState::from(msg);
        assert_eq!(back, s);
        let bits = |t: &AgentState| -> Vec<u32> {
            t.tensors[0].data.iter().map(|x| x.to_bits()).collect()
        };
        assert_eq!(bits(&back), bits(&s), "-0.0 stays -0.0");
        let observe = Command::Observe(vec![
            Item::Transition(Step::of(&Transition {
                episode: 3,
                step: 0,
                obs: &[0.5, -1.0],
                action: &[1.0],
                reward: 2.5,
                next_obs: &[0.25, f32::NAN],
                terminated: true,
                logp: Some(-0.5),
            })),
            Item::Bytes(Step::of(&Transition {
                episode: 4,
                step: 9,
                obs: &[0u8, 255],
                action: &[2.0],
                reward: -1.0,
                next_obs: &[7, 9],
                terminated: false,
                logp: None,
            })),
            Item::End(3),
            Item::Abandon(4),
        ]);
        let back = Command::decode(&observe.encode()).expect("decodes");
        assert_eq!(format!("{back:?}"), format!("{observe:?}"));
        for c in [Command::Train(5), Command::Finish] {
            assert_eq!(Command::decode(&c.encode()).expect("decodes"), c);
        }
    }

    #[test]
    fn a_damaged_command_is_an_error() {
        // The root is at the end; its first byte is the variant's tag.
        let mut bytes = Command::Train(5).encode();
        let root = bytes.len() - size_of::<ArchivedCommand>();
        bytes[root] = 0xff;
        assert!(Command::decode(&bytes).is_err());
        assert!(Command::decode(&[1, 2, 3]).is_err());
    }
}
