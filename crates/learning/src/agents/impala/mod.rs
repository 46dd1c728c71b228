//! [`Impala`]: IMPALA's actor-critic (Espeholt et al. 2018) over discrete
//! actions — a policy network (logits) and a value network, each over one
//! flat tensor with its own Adam — trained on unrolls with V-trace targets
//! ([`super::vtrace`]). Each step carries the log-probability of its action
//! under the weights that chose it, as the actor (or the `seed` front, or
//! under `single` the agent's own acting) computed it with the state it
//! acted from: the behaviour policy μ is exact, however old the weights
//! and whatever a recurrent core's state was, and V-trace corrects for the
//! lag instead of refusing it. Every `n_steps`
//! held steps (finished and unfinished episodes alike, each episode's steps
//! one unroll) it takes `n_epochs` gradient steps on all of them, V-trace
//! recomputed from the current networks each time.

mod objective;
mod recurrent;

use super::policy_value::{PolicyValue, SoftmaxActor};
use super::rollout::{self, Kept, Rollout};
use super::{AgentError, AgentState, Weights, check_weights};
use crate::agents::{Act, Learn, Parallel, Persist};
use rlfleet_replay::{ObsValue, Transition};
use rlfleet_shared::config::ImpalaConfig;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::nets::{ConvTorso, Core};
use std::collections::{BTreeSet, HashMap};
use tch::{Device, Kind, Tensor};

/// One episode's steps since the last update, with their behaviour
/// log-probabilities.
type Unroll = Rollout;

/// V-trace's importance weights at the latest gradient step.
#[derive(Debug, Clone, Copy, Default)]
struct RhoStats {
    mean: f64,
    /// The fraction clipped at ρ̄.
    clipped: f64,
}

#[derive(Debug)]
pub struct Impala {
    cfg: ImpalaConfig,
    nets: PolicyValue,
    obs_dim: usize,
    /// How its rollouts keep observations (bytes for a uint8 env, one
    /// frame per step of a stack).
    kept: Kept,
    device: Device,
    open: HashMap<u64, Unroll>,
    ready: Vec<Unroll>,
    /// Steps held in `open` and `ready`.
    held: usize,
    /// Steps dropped because nothing said their behaviour
    /// log-probability (an unroll with one such step goes whole).
    uncorrectable: u64,
    train_steps: u64,
    last_loss: Option<Tensor>,
    last_entropy: Option<Tensor>,
    last_rho: Option<RhoStats>,
    /// Acting in this process (`single`).
    actor: SoftmaxActor,
    /// The state the next step observed was acted from, when the actor
    /// said and the step starts its episode's trajectory.
    acted_from: Option<(u64, Vec<f32>)>,
    /// With a recurrent core: each unfinished episode's states (policy's
    /// then value's) where its trained steps ended.
    carry: HashMap<u64, Tensor>,
    /// With a recurrent core: steps backpropagated through at most.
    max_seq_len: u32,
    /// The behaviour log-probs the latest gradient step weighed by.
    #[cfg(test)]
    last_mu: Vec<f32>,
}

impl Impala {
    /// `torso`: convolutional layers in front of both networks' `hidden`
    /// layers (each network has its own).
    pub fn new(
        cfg: &ImpalaConfig,
        spec: &EnvSpec,
        torso: Option<ConvTorso>,
        seed: u64,
        device: Device,
    ) -> Self {
        Impala::with_core(cfg, spec, torso, (None, 1), seed, device)
    }

    /// [`Impala::new`] with a recurrent `core` after both networks' hidden
    /// layers, trained through windows of at most `max_seq_len` steps.
    pub fn with_core(
        cfg: &ImpalaConfig,
        spec: &EnvSpec,
        torso: Option<ConvTorso>,
        (core, max_seq_len): (Option<Core>, u32),
        seed: u64,
        device: Device,
    ) -> Self {
        let (nets, actor) = PolicyValue::discrete(
            spec,
            (torso, core),
            &cfg.hidden,
            cfg.lr,
            (seed, seed ^ 0x1a1a),
            device,
        );
        let kept = Kept::of(
            spec.obs_dtype.is_bytes(),
            spec.obs_dim(),
            nets.policy_net.shape(),
        );
        Impala {
            nets,
            cfg: cfg.clone(),
            obs_dim: spec.obs_dim(),
            kept,
            device,
            open: HashMap::new(),
            ready: Vec::new(),
            held: 0,
            uncorrectable: 0,
            train_steps: 0,
            last_loss: None,
            last_entropy: None,
            last_rho: None,
            actor,
            acted_from: None,
            carry: HashMap::new(),
            max_seq_len: max_seq_len.max(1),
            #[cfg(test)]
            last_mu: Vec::new(),
        }
    }

    /// Steps dropped so far because nothing said their behaviour
    /// log-probability.
    pub fn uncorrectable(&self) -> u64 {
        self.uncorrectable
    }

    fn observe_step<T: ObsValue>(&mut self, t: &Transition<'_, T>) {
        rollout::keep(&mut self.open, self.kept, &mut self.acted_from, t);
        self.held += 1;
    }

    /// Log probabilities of `actions` (`[n, 1]`, int64) at `obs` under the
    /// policy `params`, `[n]`, and the policy's entropy there.
    fn log_prob_entropy(
        &self,
        params: &Tensor,
        obs: &Tensor,
        actions: &Tensor,
    ) -> (Tensor, Tensor) {
        let logp_all = self
            .nets
            .policy_net
            .forward(params, obs)
            .log_softmax(1, Kind::Float);
        let logp = logp_all.gather(1, actions, false).squeeze_dim(1);
        let entropy = -(logp_all.exp() * &logp_all).sum_dim_intlist(1, false, Kind::Float);
        (logp, entropy)
    }

    /// Every held step's action (`[n, 1]`, int64, on the device), in the
    /// unrolls' order.
    fn actions(&self, unrolls: &[Unroll]) -> Tensor {
        let actions: Vec<i64> = unrolls
            .iter()
            .flat_map(|u| u.actions.iter().map(|&a| a as i64))
            .collect();
        Tensor::from_slice(&actions)
            .to_device(self.device)
            .unsqueeze(1)
    }

    /// Trains on every held unroll; returns the gradient steps taken.
    fn update(&mut self) -> u32 {
        let mut unrolls = std::mem::take(&mut self.ready);
        let finished: BTreeSet<u64> = unrolls.iter().map(|u| u.episode).collect();
        unrolls.extend(self.open.drain().map(|(_, u)| u));
        self.held = 0;
        // Steps whose behaviour policy nobody said cannot be corrected.
        let (kept, lost): (Vec<Unroll>, Vec<Unroll>) =
            unrolls.into_iter().partition(Rollout::behaviour_known);
        self.uncorrectable += lost.iter().map(|u| u.len() as u64).sum::<u64>();
        for u in &lost {
            self.carry.remove(&u.episode);
        }
        let unrolls = kept;
        let n: usize = unrolls.iter().map(|u| u.len()).sum();
        if n == 0 {
            return 0;
        }
        if self.nets.policy_net.shape().core().is_some() {
            return self.update_recurrent(&unrolls, &finished);
        }
        let (obs, lasts) = rollout::on_device(&unrolls, self.obs_dim, self.device);
        let actions = self.actions(&unrolls);
        let mu = rollout::behaviour(&unrolls);
        for _ in 0..self.cfg.n_epochs {
            self.gradient_step(&unrolls, &obs, &lasts, &actions, &mu);
        }
        self.actor.stale();
        self.cfg.n_epochs
    }

    /// One gradient step on all of `unrolls` (their rows in `obs`, their
    /// next observations after the last step in `lasts`), V-trace targets
    /// from the current networks against the behaviour log-probs `mu`.
    fn gradient_step(
        &mut self,
        unrolls: &[Unroll],
        obs: &Tensor,
        lasts: &Tensor,
        actions: &Tensor,
        mu: &[f32],
    ) {
        let (logp, entropy) = self.log_prob_entropy(&self.nets.policy, obs, actions);
        let values = self.nets.values(obs);
        let boot = tch::no_grad(|| self.nets.values(lasts));
        self.vtrace_step(unrolls, (logp, entropy, values), &boot, mu);
    }
}

impl Act for Impala {
    fn act(&mut self, obs: &[f32], _env_steps: u64, action: &mut [f32]) {
        self.actor.act(&self.nets, self.train_steps, obs, action);
    }

    fn last_logp(&self) -> Option<f32> {
        self.actor.last_logp()
    }
}

impl Learn for Impala {
    fn acted_from(&mut self, episode: u64, state: &[f32]) {
        // Only a trajectory's first step starts from it.
        if !self.open.contains_key(&episode) {
            self.acted_from = Some((episode, state.to_vec()));
        }
    }

    fn observe(&mut self, t: &Transition<'_>) {
        self.observe_step(t);
    }

    fn observe_bytes(&mut self, t: &Transition<'_, u8>) {
        self.observe_step(t);
    }

    fn end_episode(&mut self, episode: u64) {
        match self.open.remove(&episode) {
            // Its state is taken when the segment is trained on.
            Some(u) => self.ready.push(u),
            None => drop(self.carry.remove(&episode)),
        }
        self.actor.reset_state();
    }

    fn open_episodes(&self) -> usize {
        rollout::open_count(&self.open, &self.carry)
    }

    fn abandon_episode(&mut self, episode: u64) {
        if let Some(u) = self.open.remove(&episode) {
            self.held -= u.len();
        }
        self.carry.remove(&episode);
        self.actor.reset_state();
    }

    fn train(&mut self, _env_steps: u64) -> u32 {
        if self.held < self.cfg.n_steps as usize {
            return 0;
        }
        self.update()
    }

    fn last_loss(&self) -> Option<f64> {
        self.last_loss.as_ref().map(|l| l.double_value(&[]))
    }

    /// The networks' scalars, and V-trace's importance weights: their mean
    /// and the fraction clipped at ρ̄.
    fn scalars(&self, _env_steps: u64) -> Vec<(&'static str, f64)> {
        let mut s = self
            .nets
            .scalars(self.last_loss.as_ref(), self.last_entropy.as_ref());
        if let Some(r) = self.last_rho {
            s.push(("vtrace/rho_mean", r.mean));
            s.push(("vtrace/rho_clipped_fraction", r.clipped));
        }
        s.push(("vtrace/uncorrectable_steps", self.uncorrectable as f64));
        s
    }

    fn train_steps(&self) -> u64 {
        self.train_steps
    }

    /// Steps held for the next update.
    fn replay_len(&self) -> usize {
        self.held
    }

    fn replay_bytes(&self) -> usize {
        self.open
            .values()
            .chain(&self.ready)
            .map(Rollout::bytes)
            .sum()
    }
}

impl Persist for Impala {
    fn weights(&self) -> Weights {
        Weights {
            version: self.train_steps,
            data: self.nets.policy_values(),
        }
    }

    fn load_weights(&mut self, w: &Weights) -> Result<(), AgentError> {
        check_weights(&w.data, self.nets.policy_net.numel() as usize)?;
        self.nets.load_policy(&w.data);
        self.actor.stale();
        Ok(())
    }

    fn state(&self) -> AgentState {
        self.nets.state(self.train_steps)
    }

    fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError> {
        self.nets.load_state(s)?;
        self.train_steps = s.train_steps;
        self.actor.stale();
        Ok(())
    }
}

impl Parallel for Impala {}

#[cfg(test)]
mod tests;
