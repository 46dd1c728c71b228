//! [`ActorPolicy`]: what an actor (or the learner's SEED inference front)
//! acts with, as the learner's `Welcome` describes it: a [`QPolicy`] for discrete actions (epsilon-greedy Q-values, a
//! dueling head's advantages, or sampled logits) or a [`ContinuousPolicy`]
//! (the agent's head, exploring).

use super::{ContinuousPolicy, QPolicy, continuous_head};
use crate::config::AgentKind;
use crate::env::{EnvSpec, Space};
use crate::nets::{Forward, Net, NetShape, Rows};
use crate::wire::Welcome;

#[derive(Debug)]
pub enum ActorPolicy {
    Discrete(QPolicy),
    Continuous(ContinuousPolicy),
}

impl ActorPolicy {
    /// The policy `w` describes for envs of `spec` (no weights loaded
    /// yet).
    /// Refuses a torso that does not fit its image.
    pub fn for_welcome(w: &Welcome, spec: &EnvSpec) -> Result<ActorPolicy, String> {
        let torso = w.torso.as_ref().map(|t| t.torso()).transpose()?;
        if let Some(t) = &torso
            && t.obs_dim() != spec.obs_dim()
        {
            return Err(format!(
                "the learner's torso reads images of {:?} ({} values); `{}` observes {:?}",
                t.input,
                t.obs_dim(),
                spec.id,
                spec.obs_shape
            ));
        }
        let net = Net {
            torso,
            hidden: &w.hidden,
            core: w.core()?,
        };
        Ok(ActorPolicy::new(spec, w.agent, net, w.dueling, w.seed))
    }

    /// The policy `agent` publishes for `spec` (no weights loaded yet),
    /// over the network `net`.
    pub fn new(
        spec: &EnvSpec,
        agent: AgentKind,
        net: Net<'_>,
        dueling: bool,
        seed: u64,
    ) -> ActorPolicy {
        let obs_dim = spec.obs_dim();
        let Net {
            torso,
            hidden,
            core,
        } = net;
        match &spec.action_space {
            Space::Discrete { n } => {
                let shape = NetShape::with_torso(torso, obs_dim, hidden, *n).with_core(core);
                let mut q = QPolicy::from_shape(shape, seed).dueling(dueling);
                // A policy network's logits (A2C, PPO) are sampled; Q-values
                // are epsilon-greedy.
                q.sample = agent.samples_softmax();
                ActorPolicy::Discrete(q)
            }
            Space::Box { low, high } => ActorPolicy::Continuous(
                ContinuousPolicy::new(obs_dim, hidden, continuous_head(agent), low, high, seed)
                    .with_torso(torso),
            ),
        }
    }

    /// The same policy acting greedily: the best Q-value, logit or
    /// advantage; a continuous head's deterministic action (evaluation).
    pub fn greedy(mut self) -> ActorPolicy {
        match &mut self {
            ActorPolicy::Discrete(q) => {
                q.sample = false;
                q.epsilon = 0.0;
            }
            ActorPolicy::Continuous(c) => c.explore = false,
        }
        self
    }

    /// Values the weights hold.
    pub fn numel(&self) -> usize {
        match self {
            ActorPolicy::Discrete(q) => q.numel(),
            ActorPolicy::Continuous(c) => c.numel(),
        }
    }

    pub fn has_weights(&self) -> bool {
        match self {
            ActorPolicy::Discrete(q) => q.has_weights(),
            ActorPolicy::Continuous(c) => c.has_weights(),
        }
    }

    pub fn net(&self) -> &NetShape {
        match self {
            ActorPolicy::Discrete(q) => q.net(),
            ActorPolicy::Continuous(c) => c.net(),
        }
    }

    /// Runs the network with another backend (ONNX Runtime).
    pub fn with_forward(self, forward: Box<dyn Forward>) -> Result<ActorPolicy, String> {
        Ok(match self {
            ActorPolicy::Discrete(q) => ActorPolicy::Discrete(q.with_forward(forward)?),
            ActorPolicy::Continuous(c) => ActorPolicy::Continuous(c.with_forward(forward)?),
        })
    }

    pub fn load(&mut self, version: u64, data: &[f32]) -> Result<(), String> {
        match self {
            ActorPolicy::Discrete(q) => q.load(version, data),
            ActorPolicy::Continuous(c) => c.load(version, data),
        }
    }

    pub fn version(&self) -> u64 {
        match self {
            ActorPolicy::Discrete(q) => q.version,
            ActorPolicy::Continuous(c) => c.version,
        }
    }

    /// The exploration the learner asks for: a Q-policy's epsilon, a tanh
    /// head's noise std (half-range units); sampled heads ignore it.
    pub fn set_exploration(&mut self, e: f32) {
        match self {
            ActorPolicy::Discrete(q) => q.epsilon = e,
            ActorPolicy::Continuous(c) => c.noise = e,
        }
    }

    /// Actions for `n` observations (`actions` gets `n` rows), exploring
    /// unless the policy was made [`ActorPolicy::greedy`].
    pub fn act(&mut self, obs: &[f32], n: usize, actions: &mut Vec<f32>) {
        self.act_rows(Rows::Values(obs), n, actions);
    }

    /// [`ActorPolicy::act_rows`] for the env slots `slots`, whose recurrent
    /// states (a core's) it reads and advances. Only discrete policies
    /// have a core (validated).
    pub fn act_slots(&mut self, obs: &[f32], slots: &[usize], actions: &mut Vec<f32>) {
        match self {
            ActorPolicy::Discrete(q) => q.act_slots(Rows::Values(obs), slots, actions),
            ActorPolicy::Continuous(_) => self.act(obs, slots.len(), actions),
        }
    }

    /// [`ActorPolicy::act_rows`] with the rows' recurrent states held by
    /// the caller (`n * state_len` values; empty without a core).
    pub fn act_states(
        &mut self,
        obs: Rows<'_>,
        n: usize,
        states: &mut [f32],
        actions: &mut Vec<f32>,
    ) {
        self.act_states_eps(obs, n, states, &[], actions);
    }

    /// [`ActorPolicy::act_states`] with each row's own exploration rate
    /// (a Q-policy's epsilon; empty: the policy's own for every row).
    pub fn act_states_eps(
        &mut self,
        obs: Rows<'_>,
        n: usize,
        states: &mut [f32],
        epsilons: &[f32],
        actions: &mut Vec<f32>,
    ) {
        match self {
            ActorPolicy::Discrete(q) => q.act_states_eps(obs, n, states, epsilons, actions),
            ActorPolicy::Continuous(_) => self.act_rows(obs, n, actions),
        }
    }

    /// The log-probability (a density for a continuous head) of each
    /// action of the last call under the weights that picked it, one per
    /// row, from the sampled heads of A2C, PPO and IMPALA (their learners
    /// weigh each step by it); empty for the others, and when greedy.
    pub fn logps(&self) -> &[f32] {
        match self {
            ActorPolicy::Discrete(q) => q.logps(),
            ActorPolicy::Continuous(c) => c.logps(),
        }
    }

    /// Env slot `slot`'s recurrent state into `out` (`state_len` values:
    /// what it acts from next; a policy without a core has none).
    pub fn state_into(&self, slot: usize, out: &mut [f32]) {
        if let ActorPolicy::Discrete(q) = self {
            q.state_into(slot, out);
        }
    }

    /// Zeros env slot `slot`'s recurrent state (a new episode there).
    pub fn reset_slot(&mut self, slot: usize) {
        if let ActorPolicy::Discrete(q) = self {
            q.reset_slot(slot);
        }
    }

    /// [`ActorPolicy::act`] for rows held either way (a uint8 env's bytes
    /// reach a device network as bytes).
    pub fn act_rows(&mut self, obs: Rows<'_>, n: usize, actions: &mut Vec<f32>) {
        match self {
            ActorPolicy::Discrete(q) => q.act_rows(obs, n, actions),
            ActorPolicy::Continuous(c) => {
                let explore = c.explore;
                c.act_rows(obs, n, explore, actions)
            }
        }
    }
}
