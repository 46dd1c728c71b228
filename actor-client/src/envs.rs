//! [`EnvSlots`]: the environments one actor process runs (the WorkerProxy
//! idea: several envs share one connection and one copy of the weights),
//! each playing the episode the learner assigned it. An env that raises
//! (a Python env) loses its episode, is rebuilt, and the fault is kept for
//! the next message to the learner, which re-issues the episode. With
//! `env_step_timeout_secs`, each env runs behind a [`Timed`]: a call that
//! hangs past the limit is such a fault too.

use rlfleet_shared::env::{Action, Env, EnvFault, EnvSource, EnvSpec, Step, Timed};
use rlfleet_shared::wire::{EnvFaultReport, EpisodeStart, Welcome};
use std::sync::Arc;

/// Builds each of an actor's envs in place of the plain build: from the
/// run's env source and the call time limit (`env_step_timeout_secs`), an
/// env that honours it. The Python client's `run_actor` (a user's factory)
/// and an MPI env group's leader (an env on every rank of its group) make
/// them.
pub type MakeEnv =
    dyn Fn(&EnvSource, Option<std::time::Duration>) -> anyhow::Result<Box<dyn Env>> + Send + Sync;

#[derive(Clone)]
pub struct EnvFactory(pub Arc<MakeEnv>);

impl EnvFactory {
    /// Envs from `make` (the run's source unused), each behind a [`Timed`]
    /// when calls have a time limit.
    pub fn new(make: impl Fn() -> anyhow::Result<Box<dyn Env>> + Send + Sync + 'static) -> Self {
        EnvFactory(Arc::new(move |_, limit| Ok(timed(make()?, limit))))
    }
}

impl std::fmt::Debug for EnvFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnvFactory")
    }
}

/// One environment and its episode.
pub struct Slot {
    pub env: Box<dyn Env>,
    /// The assigned episode; `None` while idle.
    pub episode: Option<u64>,
    pub obs: Vec<f32>,
    pub ret: f64,
    pub len: u32,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("env", &self.env.spec().id)
            .field("episode", &self.episode)
            .field("len", &self.len)
            .finish()
    }
}

/// The actor's environments.
#[derive(Debug)]
pub struct EnvSlots {
    pub slots: Vec<Slot>,
    pub obs_dim: usize,
    pub act_dim: usize,
    pub n_actions: Option<usize>,
    spec: EnvSpec,
    source: EnvSource,
    factory: Option<EnvFactory>,
    /// `env_step_timeout_secs`: each env runs behind a [`Timed`].
    limit: Option<std::time::Duration>,
    /// Faults not yet reported to the learner.
    faults: Vec<EnvFaultReport>,
    /// Faults over the process's life (for the actor's report).
    pub fault_count: u64,
}

impl EnvSlots {
    /// Builds the envs a welcome asks for (with `factory`, if given), after
    /// checking they match the learner's spec.
    pub fn new(w: &Welcome, factory: Option<&EnvFactory>) -> anyhow::Result<EnvSlots> {
        let source = w.env_source();
        let limit = (w.env_step_timeout_secs > 0.0)
            .then(|| std::time::Duration::from_secs_f64(w.env_step_timeout_secs));
        let build = |factory: Option<&EnvFactory>| build(&source, factory, limit);
        let first = build(factory)?;
        let spec = first.spec().clone();
        let shape: Vec<u32> = spec.obs_shape.iter().map(|&d| d as u32).collect();
        anyhow::ensure!(
            spec.obs_dim() == w.obs_dim as usize
                && spec.action_space.flat_dim() == w.action_dim as usize
                && shape == w.obs_shape,
            "the learner's `{}` has observations of shape {:?} ({} values) and action_dim {}; \
             this actor's has {:?} ({}) and {}",
            w.env_id,
            w.obs_shape,
            w.obs_dim,
            w.action_dim,
            shape,
            spec.obs_dim(),
            spec.action_space.flat_dim()
        );
        let mut envs = vec![first];
        for _ in 1..w.n_envs {
            envs.push(build(factory)?);
        }
        let slots = envs
            .into_iter()
            .map(|env| Slot {
                env,
                episode: None,
                obs: vec![0.0; spec.obs_dim()],
                ret: 0.0,
                len: 0,
            })
            .collect();
        Ok(EnvSlots {
            slots,
            obs_dim: spec.obs_dim(),
            act_dim: spec.action_space.flat_dim(),
            n_actions: spec.action_space.n(),
            spec,
            source,
            factory: factory.cloned(),
            limit,
            faults: Vec::new(),
            fault_count: 0,
        })
    }

    /// The spec of the envs (as built here, checked against the learner's).
    pub fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    /// Starts the assigned episodes (reset with their seeds). An env that
    /// raises in `reset` is rebuilt and its episode reported as a fault.
    pub fn start(&mut self, starts: &[EpisodeStart]) -> anyhow::Result<()> {
        let n = self.slots.len();
        for s in starts {
            let slot = self.slots.get_mut(s.env as usize).ok_or_else(|| {
                anyhow::anyhow!(
                    "the learner started episode {} on env {}, this actor runs {}",
                    s.episode,
                    s.env,
                    n
                )
            })?;
            slot.episode = Some(s.episode);
            slot.ret = 0.0;
            slot.len = 0;
            if let Err(fault) = slot.env.try_reset(Some(s.seed), &mut slot.obs) {
                self.fault(s.env as usize, fault)?;
            }
        }
        Ok(())
    }

    pub fn idle(&self) -> Vec<u32> {
        (0..self.slots.len() as u32)
            .filter(|&i| self.slots[i as usize].episode.is_none())
            .collect()
    }

    /// Steps env `i` with `action`; the observation lands in its `obs`.
    /// `None`: the env raised; its episode is abandoned and the env rebuilt
    /// (the fault waits in [`EnvSlots::take_faults`]).
    pub fn step(&mut self, i: usize, action: &[f32]) -> anyhow::Result<Option<Step>> {
        let slot = &mut self.slots[i];
        let a = if self.n_actions.is_some() {
            Action::Discrete(action[0] as usize)
        } else {
            Action::Continuous(action)
        };
        match slot.env.try_step(a, &mut slot.obs) {
            Ok(step) => {
                slot.ret += step.reward;
                slot.len += 1;
                Ok(Some(step))
            }
            Err(fault) => {
                self.fault(i, fault)?;
                Ok(None)
            }
        }
    }

    /// Faults since the last call, for the next message to the learner.
    pub fn take_faults(&mut self) -> Vec<EnvFaultReport> {
        std::mem::take(&mut self.faults)
    }

    /// Env `i` raised: record the fault, idle the slot, rebuild the env.
    fn fault(&mut self, i: usize, fault: EnvFault) -> anyhow::Result<()> {
        let slot = &mut self.slots[i];
        let episode = slot.episode.take().expect("a running env raised");
        tracing::warn!(
            env = i,
            episode,
            "`{}` raised {fault}; the env is rebuilt and the episode goes back to the learner",
            self.source.id
        );
        self.faults.push(EnvFaultReport {
            episode,
            env: i as u32,
            error: fault.0,
        });
        self.fault_count += 1;
        slot.env = build(&self.source, self.factory.as_ref(), self.limit)?;
        Ok(())
    }
}

/// One env: from the factory if there is one, else the run's source
/// behind a [`Timed`] when calls have a time limit.
fn build(
    source: &EnvSource,
    factory: Option<&EnvFactory>,
    limit: Option<std::time::Duration>,
) -> anyhow::Result<Box<dyn Env>> {
    match factory {
        Some(f) => (f.0)(source, limit),
        None => Ok(timed(source.make()?, limit)),
    }
}

/// `env` behind a [`Timed`] when calls have a time limit.
pub fn timed(env: Box<dyn Env>, limit: Option<std::time::Duration>) -> Box<dyn Env> {
    match limit {
        Some(limit) => Box::new(Timed::new(env, limit)),
        None => env,
    }
}
