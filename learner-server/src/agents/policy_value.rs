//! [`PolicyValue`]: the two networks of the policy-gradient agents (A2C,
//! PPO) — a policy MLP and a value MLP, each over one flat tensor with its
//! own Adam — with their joint gradient step and their checkpoint tensors.

use super::{AgentError, AgentState, named, restore};
use crate::nets::FlatNet;
use tch::Tensor;

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

/// One Adam step of `params` down its gradient, clipped to `max_norm`;
/// returns the gradient's norm before clipping.
fn clipped_step(params: &mut Tensor, adam: &mut super::Adam, max_norm: f64) -> Tensor {
    let mut grad = params.grad();
    let norm = super::Adam::clip_grad_norm(&mut grad, max_norm);
    adam.step(params, &grad);
    norm
}

impl PolicyValue {
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
        self.policy.zero_grad();
        self.value.zero_grad();
        loss.backward();
        let policy_norm = clipped_step(&mut self.policy, &mut self.policy_adam, max_grad_norm);
        let _ = clipped_step(&mut self.value, &mut self.value_adam, max_grad_norm);
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
        AgentState {
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
        }
    }

    pub fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError> {
        restore(
            s,
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
