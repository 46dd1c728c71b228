//! [`Sac`]: soft actor-critic (Haarnoja et al. 2018, with the learned
//! temperature of the "algorithms and applications" version). The actor
//! gives the mean and log std of a Gaussian squashed by tanh into [-1, 1]
//! (scaled to the env's box when acting); twin critics with Polyak targets;
//! the temperature's log is trained towards a target entropy.

use super::critic::{Critics, descend, polyak};
use super::off_policy::{OffPolicy, Settings, off_policy_agent};
use super::{AgentError, AgentState, named, restore};
use crate::agents::{Act, Learn, Parallel, Persist};
use crate::nets::FlatNet;
use rlfleet_shared::config::SacConfig;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::policy::{ContinuousHead, LOG_STD_MAX, LOG_STD_MIN};
use tch::{Device, Kind, Tensor};

#[derive(Debug)]
pub struct Sac {
    cfg: SacConfig,
    actor_net: FlatNet,
    critics: Critics,
    actor: Tensor,
    critic: Tensor,
    critic_target: Tensor,
    /// log of the temperature, `[1]`.
    log_alpha: Tensor,
    target_entropy: f64,
    actor_adam: super::Adam,
    critic_adam: super::Adam,
    alpha_adam: super::Adam,
    core: OffPolicy,
    train_steps: u64,
    last_loss: Option<Tensor>,
}

impl Sac {
    pub fn new(cfg: &SacConfig, spec: &EnvSpec, seed: u64, device: Device) -> Self {
        let core = OffPolicy::new(
            spec,
            Settings {
                hidden: &cfg.hidden,
                head: ContinuousHead::SquashedGaussian,
                noise: 0.0,
                buffer_size: cfg.buffer_size,
                batch_size: cfg.batch_size,
                learning_starts: cfg.learning_starts,
                gamma: cfg.gamma,
            },
            seed,
            device,
        );
        let (obs_dim, act_dim) = (spec.obs_dim(), core.act_dim());
        let actor_net = FlatNet::new(obs_dim, &cfg.hidden, 2 * act_dim);
        let critics = Critics::new(obs_dim, act_dim, &cfg.hidden, 2);
        tch::manual_seed(seed as i64);
        let actor = actor_net.init(device).set_requires_grad(true);
        let critic = critics.init(device).set_requires_grad(true);
        let log_alpha = Tensor::from_slice(&[cfg.alpha_init.ln() as f32])
            .to_device(device)
            .set_requires_grad(true);
        Sac {
            critic_target: critic.detach().copy(),
            actor_adam: super::Adam::new(&actor, cfg.actor_lr),
            critic_adam: super::Adam::new(&critic, cfg.critic_lr),
            alpha_adam: super::Adam::new(&log_alpha, cfg.alpha_lr),
            target_entropy: cfg.target_entropy.unwrap_or(-(act_dim as f64)),
            core,
            train_steps: 0,
            last_loss: None,
            cfg: cfg.clone(),
            actor_net,
            critics,
            actor,
            critic,
            log_alpha,
        }
    }

    /// The current temperature.
    pub fn alpha(&self) -> f64 {
        self.log_alpha.exp().double_value(&[0])
    }

    /// A reparameterised sample of the policy at `obs`: the action in
    /// [-1, 1] and its log probability (with tanh's change of variables).
    fn sample(&self, params: &Tensor, obs: &Tensor) -> (Tensor, Tensor) {
        let d = self.core.act_dim() as i64;
        let out = self.actor_net.forward(params, obs);
        let mean = out.narrow(1, 0, d);
        let log_std = out
            .narrow(1, d, d)
            .clamp(f64::from(LOG_STD_MIN), f64::from(LOG_STD_MAX));
        let std = log_std.exp();
        let eps = mean.randn_like();
        let u = &mean + &std * &eps;
        let a = u.tanh();
        let half_log_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
        let logp =
            (eps.square() * -0.5 - &log_std - half_log_2pi).sum_dim_intlist(1, false, Kind::Float)
                - (-a.square() + 1.0 + 1e-6)
                    .log()
                    .sum_dim_intlist(1, false, Kind::Float);
        (a, logp)
    }

    fn gradient_step(&mut self) {
        let b = self.core.sample();
        let alpha = self.log_alpha.detach().exp();
        let y = tch::no_grad(|| {
            let (next_a, next_logp) = self.sample(&self.actor, &b.next);
            let q_next = self.critics.min(&self.critic_target, &b.next, &next_a);
            &b.rewards + &b.discounts * (q_next - &alpha * next_logp)
        });
        let critic_loss = self.critics.mse(&self.critic, &b.obs, &b.act, &y);
        descend(&critic_loss, &mut self.critic, &mut self.critic_adam);

        let (a, logp) = self.sample(&self.actor, &b.obs);
        let q = self.critics.min(&self.critic, &b.obs, &a);
        let actor_loss = (&alpha * &logp - q).mean(Kind::Float);
        descend(&actor_loss, &mut self.actor, &mut self.actor_adam);

        if self.cfg.autotune {
            let alpha_loss =
                -(&self.log_alpha * (logp.detach() + self.target_entropy)).mean(Kind::Float);
            descend(&alpha_loss, &mut self.log_alpha, &mut self.alpha_adam);
        }
        polyak(&mut self.critic_target, &self.critic, self.cfg.tau);
        self.core.actor_changed();
        self.train_steps += 1;
        self.last_loss = Some(critic_loss.detach());
    }
}

impl Act for Sac {
    off_policy_agent!(act);
}

impl Learn for Sac {
    off_policy_agent!(learn);
}

impl Persist for Sac {
    off_policy_agent!(persist);

    fn state(&self) -> AgentState {
        AgentState {
            tensors: vec![
                named("online", &self.actor),
                named("critic", &self.critic),
                named("critic_target", &self.critic_target),
                named("log_alpha", &self.log_alpha),
                named("adam.m", &self.actor_adam.m),
                named("adam.v", &self.actor_adam.v),
                named("critic_adam.m", &self.critic_adam.m),
                named("critic_adam.v", &self.critic_adam.v),
                named("alpha_adam.m", &self.alpha_adam.m),
                named("alpha_adam.v", &self.alpha_adam.v),
            ],
            train_steps: self.train_steps,
            version: self.train_steps,
            optimizer_steps: self.actor_adam.steps,
        }
    }

    fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError> {
        restore(
            s,
            &mut [
                ("online", &mut self.actor),
                ("critic", &mut self.critic),
                ("critic_target", &mut self.critic_target),
                ("log_alpha", &mut self.log_alpha),
                ("adam.m", &mut self.actor_adam.m),
                ("adam.v", &mut self.actor_adam.v),
                ("critic_adam.m", &mut self.critic_adam.m),
                ("critic_adam.v", &mut self.critic_adam.v),
                ("alpha_adam.m", &mut self.alpha_adam.m),
                ("alpha_adam.v", &mut self.alpha_adam.v),
            ],
        )?;
        self.actor_adam.steps = s.optimizer_steps;
        self.critic_adam.steps = s.optimizer_steps;
        self.alpha_adam.steps = if self.cfg.autotune {
            s.optimizer_steps
        } else {
            0
        };
        self.train_steps = s.train_steps;
        self.core.actor_changed();
        Ok(())
    }
}

impl Parallel for Sac {}

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_replay::Transition;

    /// Every step trains the critics, the actor and the temperature; the
    /// log probability of the squashed sample matches a by-hand density;
    /// a state round trip restores everything.
    #[test]
    fn trains_all_parts_and_round_trips() {
        let spec = rlfleet_shared::env::spec("Pendulum-v1").unwrap();
        let cfg = SacConfig {
            hidden: vec![16, 16],
            batch_size: 8,
            learning_starts: 0,
            ..SacConfig::default()
        };
        let mut sac = Sac::new(&cfg, &spec, 1, Device::Cpu);
        for i in 0..16 {
            let o = [0.1 * i as f32, 0.5, -0.2];
            sac.observe(&Transition {
                obs: &o,
                action: &[-1.0],
                reward: -2.0,
                next_obs: &o,
                terminated: false,
                episode: 0,
                step: 0,
                logp: None,
            });
        }
        let (actor0, alpha0) = (sac.weights().data, sac.alpha());
        assert_eq!(sac.train(16), 1);
        assert_ne!(sac.weights().data, actor0);
        assert_ne!(sac.alpha(), alpha0);

        // With zero actor weights: mean 0, log std 0, so u = eps and
        // log p = log N(u; 0, 1) - log(1 - tanh(u)^2).
        let zero = Tensor::zeros([sac.actor_net.numel()], (Kind::Float, Device::Cpu));
        let obs = Tensor::zeros([4, 3], (Kind::Float, Device::Cpu));
        let (a, logp) = sac.sample(&zero, &obs);
        let a: Vec<f32> = Vec::try_from(a.view([-1])).unwrap();
        let logp: Vec<f32> = Vec::try_from(logp).unwrap();
        for (a, lp) in a.iter().zip(&logp) {
            let u = a.atanh();
            let want =
                -0.5 * u * u - 0.5 * (2.0 * std::f32::consts::PI).ln() - (1.0 - a * a + 1e-6).ln();
            assert!((want - lp).abs() < 1e-3, "{want} vs {lp}");
        }

        let saved = sac.state();
        let mut other = Sac::new(&cfg, &spec, 2, Device::Cpu);
        other.load_state(&saved).unwrap();
        assert_eq!(other.state(), saved);
        assert_eq!(other.alpha(), sac.alpha());
    }
}
