//! [`PolicyValue`]: the two networks of the policy-gradient agents (A2C,
//! PPO) — a policy MLP and a value MLP, each over one flat tensor with its
//! own Adam — with their joint gradient step and their checkpoint tensors.

use super::{AgentError, AgentState, named, restore};
use crate::nets::FlatNet;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::nets::{ConvTorso, Core, NetShape};
use rlfleet_shared::policy::QPolicy;
use tch::{Device, Tensor};

#[derive(Debug)]
pub struct PolicyValue {
    pub policy_net: FlatNet,
    pub value_net: FlatNet,
    /// The policy's parameters (for PPO's Gaussian head, followed by the
    /// log stds): what is published.
    pub policy: Tensor,
    pub value: Tensor,
    pub policy_adam: super::Adam,
    pub value_adam: super::Adam,
    /// The policy gradient's norm before clipping, at the latest step.
    pub last_grad_norm: Option<Tensor>,
}

/// One Adam step of `params` down `grad`, clipped to `max_norm`; returns
/// the gradient's norm before clipping.
fn clipped_step(
    params: &mut Tensor,
    mut grad: Tensor,
    adam: &mut super::Adam,
    max_norm: f64,
) -> Tensor {
    let norm = super::Adam::clip_grad_norm(&mut grad, max_norm);
    adam.step(params, &grad);
    norm
}

/// Acting in this process (`single`) for a discrete policy: a plain-Rust
/// copy of the policy that samples from its softmax, refreshed from the
/// networks when they changed.
#[derive(Debug)]
pub struct SoftmaxActor {
    policy: QPolicy,
    fresh: bool,
    picked: Vec<f32>,
}

impl SoftmaxActor {
    /// The networks changed: the copy is refreshed before the next action.
    pub fn stale(&mut self) {
        self.fresh = false;
    }

    /// Zeros the state a recurrent policy acts from (its episode ended).
    pub fn reset_state(&mut self) {
        self.policy.reset_slot(0);
    }

    /// Samples an action for `obs` from `nets`' policy (at `version`).
    pub fn act(&mut self, nets: &PolicyValue, version: u64, obs: &[f32], action: &mut [f32]) {
        if !self.fresh {
            let w = nets.policy_values();
            self.policy
                .load(version, &w)
                .expect("the policy's own shape");
            self.fresh = true;
        }
        self.policy.act(obs, 1, &mut self.picked);
        action[0] = self.picked[0];
    }

    /// The log-probability of the action [`SoftmaxActor::act`] last
    /// picked.
    pub fn last_logp(&self) -> Option<f32> {
        self.policy.logps().first().copied()
    }
}

/// The state's tensors over the policy's parameters, and the value's.
const POLICY_TENSORS: [&str; 3] = ["online", "adam.m", "adam.v"];
const VALUE_TENSORS: [&str; 3] = ["value", "value_adam.m", "value_adam.v"];

impl PolicyValue {
    /// A host copy of the policy's parameters in the shared layout: what
    /// is published.
    pub fn policy_values(&self) -> Vec<f32> {
        self.policy_net.shared_values(&self.policy)
    }

    /// The policy's parameters overwritten with published ones.
    pub fn load_policy(&mut self, shared: &[f32]) {
        self.policy_net.load_shared(&mut self.policy, shared);
    }

    /// A policy over `spec`'s discrete actions (logits) and a value
    /// network, both `torso` then `hidden`, initialised from `seed`; and a
    /// sampling actor (its draws seeded by `actor_seed`).
    pub fn discrete(
        spec: &EnvSpec,
        (torso, core): (Option<ConvTorso>, Option<Core>),
        hidden: &[u32],
        lr: f64,
        (seed, actor_seed): (u64, u64),
        device: Device,
    ) -> (PolicyValue, SoftmaxActor) {
        let n_actions = spec
            .action_space
            .n()
            .expect("a discrete action space (validated)");
        let shape = NetShape::with_torso(torso, spec.obs_dim(), hidden, n_actions).with_core(core);
        let policy_net = FlatNet::from_shape(shape.clone());
        let value_net = FlatNet::from_shape(shape.with_output(1));
        tch::manual_seed(seed as i64);
        let policy = policy_net.init(device);
        let value = value_net.init(device);
        let mut actor = QPolicy::from_shape(shape, actor_seed);
        actor.sample = true;
        let nets = PolicyValue::new(policy_net, value_net, policy, value, lr);
        let actor = SoftmaxActor {
            policy: actor,
            fresh: false,
            picked: Vec::with_capacity(1),
        };
        (nets, actor)
    }

    /// Both networks from fresh parameters (which get gradients here).
    pub fn new(
        policy_net: FlatNet,
        value_net: FlatNet,
        policy: Tensor,
        value: Tensor,
        lr: f64,
    ) -> PolicyValue {
        let policy = policy.set_requires_grad(true);
        let value = value.set_requires_grad(true);
        PolicyValue {
            policy_adam: super::Adam::new(&policy, lr),
            value_adam: super::Adam::new(&value, lr),
            policy_net,
            value_net,
            policy,
            value,
            last_grad_norm: None,
        }
    }

    /// V(obs), `[n]`.
    pub fn values(&self, obs: &Tensor) -> Tensor {
        self.value_net.forward(&self.value, obs).squeeze_dim(1)
    }

    /// One Adam step of both networks down `loss`, each gradient clipped to
    /// `max_grad_norm`.
    pub fn step(&mut self, loss: &Tensor, max_grad_norm: f64) {
        let [policy_grad, value_grad] = super::gradients(loss, [&self.policy, &self.value]);
        let policy_norm = clipped_step(
            &mut self.policy,
            policy_grad,
            &mut self.policy_adam,
            max_grad_norm,
        );
        let _ = clipped_step(
            &mut self.value,
            value_grad,
            &mut self.value_adam,
            max_grad_norm,
        );
        self.last_grad_norm = Some(policy_norm);
    }

    /// The learning rate, the policy's latest gradient norm and `loss`
    /// (plus `entropy` where the agent keeps it), for TensorBoard.
    pub fn scalars(
        &self,
        loss: Option<&Tensor>,
        entropy: Option<&Tensor>,
    ) -> Vec<(&'static str, f64)> {
        let mut s = vec![("train/learning_rate", self.policy_adam.lr)];
        for (tag, t) in [
            ("train/loss", loss),
            ("train/grad_norm", self.last_grad_norm.as_ref()),
            ("train/entropy", entropy),
        ] {
            s.extend(t.map(|t| (tag, t.double_value(&[]))));
        }
        s
    }

    /// The networks and optimizer moments, for a checkpoint.
    pub fn state(&self, train_steps: u64) -> AgentState {
        let mut s = AgentState {
            tensors: vec![
                named("online", &self.policy),
                named("value", &self.value),
                named("adam.m", &self.policy_adam.m),
                named("adam.v", &self.policy_adam.v),
                named("value_adam.m", &self.value_adam.m),
                named("value_adam.v", &self.value_adam.v),
            ],
            train_steps,
            version: train_steps,
            optimizer_steps: self.policy_adam.steps,
        };
        self.policy_net.state_to_shared(&mut s, &POLICY_TENSORS);
        self.value_net.state_to_shared(&mut s, &VALUE_TENSORS);
        s
    }

    pub fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError> {
        let s = self.policy_net.state_to_own(s, &POLICY_TENSORS);
        let s = self.value_net.state_to_own(&s, &VALUE_TENSORS);
        restore(
            &s,
            &mut [
                ("online", &mut self.policy),
                ("value", &mut self.value),
                ("adam.m", &mut self.policy_adam.m),
                ("adam.v", &mut self.policy_adam.v),
                ("value_adam.m", &mut self.value_adam.m),
                ("value_adam.v", &mut self.value_adam.v),
            ],
        )?;
        self.policy_adam.steps = s.optimizer_steps;
        self.value_adam.steps = s.optimizer_steps;
        Ok(())
    }
}
