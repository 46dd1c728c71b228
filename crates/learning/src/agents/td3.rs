//! [`Td3`]: twin delayed deep deterministic policy gradient (Fujimoto et
//! al. 2018), and DDPG (Lillicrap et al. 2016) as its special case of one
//! critic, a policy delay of 1 and no target smoothing. The actor is a tanh
//! MLP in [-1, 1] units (scaled to the env's box when acting); the replay
//! holds actions in those units.

use super::critic::{Critics, descend, polyak};
use super::off_policy::{OffPolicy, Settings, off_policy_agent};
use super::{AgentError, AgentState, named, restore};
use crate::agents::{Act, Learn, Parallel, Persist};
use crate::nets::FlatNet;
use rlfleet_shared::config::Td3Config;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::policy::ContinuousHead;
use tch::{Device, Kind, Tensor};

#[derive(Debug)]
pub struct Td3 {
    cfg: Td3Config,
    actor_net: FlatNet,
    critics: Critics,
    actor: Tensor,
    actor_target: Tensor,
    critic: Tensor,
    critic_target: Tensor,
    actor_adam: super::Adam,
    critic_adam: super::Adam,
    core: OffPolicy,
    /// Critic steps taken.
    train_steps: u64,
    last_loss: Option<Tensor>,
}

impl Td3 {
    /// A TD3 agent; `twin = false` with DDPG's settings makes it DDPG.
    pub fn new(cfg: &Td3Config, twin: bool, spec: &EnvSpec, seed: u64, device: Device) -> Self {
        let core = OffPolicy::new(
            spec,
            Settings {
                hidden: &cfg.hidden,
                head: ContinuousHead::Tanh,
                noise: cfg.exploration_noise,
                buffer_size: cfg.buffer_size,
                batch_size: cfg.batch_size,
                learning_starts: cfg.learning_starts,
                gamma: cfg.gamma,
            },
            seed,
            device,
        );
        let (obs_dim, act_dim) = (spec.obs_dim(), core.act_dim());
        let actor_net = FlatNet::new(obs_dim, &cfg.hidden, act_dim);
        let critics = Critics::new(obs_dim, act_dim, &cfg.hidden, if twin { 2 } else { 1 });
        tch::manual_seed(seed as i64);
        let actor = actor_net.init(device).set_requires_grad(true);
        let critic = critics.init(device).set_requires_grad(true);
        Td3 {
            actor_target: actor.detach().copy(),
            critic_target: critic.detach().copy(),
            actor_adam: super::Adam::new(&actor, cfg.actor_lr),
            critic_adam: super::Adam::new(&critic, cfg.critic_lr),
            core,
            train_steps: 0,
            last_loss: None,
            cfg: cfg.clone(),
            actor_net,
            critics,
            actor,
            critic,
        }
    }

    /// One critic step, and on every `policy_delay`-th one an actor step
    /// and the target updates.
    fn gradient_step(&mut self) {
        let b = self.core.sample();
        let y = tch::no_grad(|| {
            let mut next_a = self.actor_net.forward(&self.actor_target, &b.next).tanh();
            if self.cfg.target_noise > 0.0 {
                let c = self.cfg.target_noise_clip;
                let noise = (next_a.randn_like() * self.cfg.target_noise).clamp(-c, c);
                next_a = (next_a + noise).clamp(-1.0, 1.0);
            }
            &b.rewards + &b.discounts * self.critics.min(&self.critic_target, &b.next, &next_a)
        });
        let critic_loss = self.critics.mse(&self.critic, &b.obs, &b.act, &y);
        descend(&critic_loss, &mut self.critic, &mut self.critic_adam);
        self.train_steps += 1;
        self.last_loss = Some(critic_loss.detach());

        if self
            .train_steps
            .is_multiple_of(u64::from(self.cfg.policy_delay))
        {
            let a = self.actor_net.forward(&self.actor, &b.obs).tanh();
            let actor_loss = -self
                .critics
                .first(&self.critic, &b.obs, &a)
                .mean(Kind::Float);
            descend(&actor_loss, &mut self.actor, &mut self.actor_adam);
            polyak(&mut self.actor_target, &self.actor, self.cfg.tau);
            polyak(&mut self.critic_target, &self.critic, self.cfg.tau);
            self.core.actor_changed();
        }
    }
}

impl Act for Td3 {
    off_policy_agent!(act);

    /// Actors add Gaussian noise of this std to the tanh action.
    fn epsilon(&self, _env_steps: u64) -> f64 {
        self.cfg.exploration_noise
    }
}

impl Learn for Td3 {
    off_policy_agent!(learn);
}

impl Persist for Td3 {
    off_policy_agent!(persist);

    fn state(&self) -> AgentState {
        AgentState {
            tensors: vec![
                named("online", &self.actor),
                named("actor_target", &self.actor_target),
                named("critic", &self.critic),
                named("critic_target", &self.critic_target),
                named("adam.m", &self.actor_adam.m),
                named("adam.v", &self.actor_adam.v),
                named("critic_adam.m", &self.critic_adam.m),
                named("critic_adam.v", &self.critic_adam.v),
            ],
            train_steps: self.train_steps,
            version: self.train_steps,
            optimizer_steps: self.critic_adam.steps,
        }
    }

    fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError> {
        restore(
            s,
            &mut [
                ("online", &mut self.actor),
                ("actor_target", &mut self.actor_target),
                ("critic", &mut self.critic),
                ("critic_target", &mut self.critic_target),
                ("adam.m", &mut self.actor_adam.m),
                ("adam.v", &mut self.actor_adam.v),
                ("critic_adam.m", &mut self.critic_adam.m),
                ("critic_adam.v", &mut self.critic_adam.v),
            ],
        )?;
        self.critic_adam.steps = s.optimizer_steps;
        // The actor steps once per policy_delay critic steps.
        self.actor_adam.steps = s.train_steps / u64::from(self.cfg.policy_delay);
        self.train_steps = s.train_steps;
        self.core.actor_changed();
        Ok(())
    }
}

impl Parallel for Td3 {}

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_replay::Transition;

    /// Critic steps every call, actor steps every `policy_delay`-th; a
    /// state round trip restores everything; actions stay in the box.
    #[test]
    fn delayed_actor_updates_and_state_round_trip() {
        let spec = rlfleet_shared::env::spec("Pendulum-v1").unwrap();
        let cfg = Td3Config {
            hidden: vec![16, 16],
            batch_size: 8,
            learning_starts: 0,
            ..Td3Config::default()
        };
        let mut td3 = Td3::new(&cfg, true, &spec, 1, Device::Cpu);
        for i in 0..16 {
            let o = [0.1 * i as f32, 0.5, -0.2];
            td3.observe(&Transition {
                obs: &o,
                action: &[1.5],
                reward: -1.0,
                next_obs: &o,
                terminated: false,
                episode: 0,
                step: 0,
                logp: None,
            });
        }
        let actor0 = td3.weights().data;
        assert_eq!(td3.train(16), 1);
        assert_eq!(td3.weights().data, actor0, "actor waits for the delay");
        assert_eq!(td3.train(17), 1);
        assert_ne!(td3.weights().data, actor0);
        assert_eq!(td3.train_steps(), 2);
        assert!(td3.last_loss().unwrap().is_finite());
        let saved = td3.state();
        let mut other = Td3::new(&cfg, true, &spec, 2, Device::Cpu);
        other.load_state(&saved).unwrap();
        assert_eq!(other.state(), saved);
        let mut a = [0.0];
        for _ in 0..50 {
            other.act(&[0.3, -0.1, 2.0], 100, &mut a);
            assert!((-2.0..=2.0).contains(&a[0]), "{a:?}");
        }
    }
}
