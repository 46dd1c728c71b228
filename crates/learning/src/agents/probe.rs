//! [`Probe`]: the conformance-test agent. It learns nothing: it writes every
//! transition it is given to `probe.csv` in the run's output directory (with
//! the policy version it had at that moment) and takes one "train step" — a
//! new policy version, published like any other — per `train_every`
//! transitions. Its network has the shape of `dqn.hidden` and all-zero
//! weights, so actors run their usual policy code with it.

use super::{AgentError, AgentState, NamedTensor, Weights, check_weights};
use crate::agents::{Act, Learn, Parallel, Persist};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rlfleet_output::{CsvFile, format};
use rlfleet_replay::Transition;
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::EnvSpec;
use rlfleet_shared::nets::NetShape;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// One row of `probe.csv`: a transition as the probe was given it, with
/// its policy version; `action`, `obs` and `next_obs` are `;`-separated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeLine {
    pub version: u64,
    pub action: String,
    pub reward: f32,
    #[serde(
        serialize_with = "format::flag",
        deserialize_with = "format::read_flag"
    )]
    pub terminated: bool,
    pub obs: String,
    pub next_obs: String,
    /// The episode the transition belongs to.
    pub episode: u64,
    /// Its index within its episode's play.
    pub step: u32,
    /// 1 where a trajectory of an episode starts other than as the first
    /// one from its first step: the agent was told to end what it held of
    /// the episode before (a hole, a piece out of order, a new play), or
    /// it starts mid-way.
    #[serde(
        serialize_with = "format::flag",
        deserialize_with = "format::read_flag"
    )]
    pub cut: bool,
}

#[derive(Debug)]
pub struct Probe {
    params: Vec<f32>,
    n_actions: usize,
    train_every: u64,
    epsilon: f64,
    /// How long each train step takes.
    train_sleep: std::time::Duration,
    observed: u64,
    /// Versions taken on the `train_every` schedule.
    scheduled: u64,
    version: u64,
    rng: Pcg64,
    log: Option<CsvFile<ProbeLine>>,
    /// The step that continues each episode's open trajectory.
    open: HashMap<u64, u32>,
    /// Episodes it was given steps of.
    seen: HashSet<u64>,
}

impl Probe {
    /// A probe writing to `<output_dir>/probe.csv` (appending when the file
    /// exists, so a resumed run keeps its record).
    pub fn new(cfg: &RunConfig, spec: &EnvSpec) -> Self {
        let n_actions = spec.action_space.n().expect("discrete (validated)");
        let net = NetShape::new(spec.obs_dim(), &cfg.dqn.hidden, n_actions);
        let path = cfg.output_dir.join("probe.csv");
        let log = CsvFile::open(&path, false)
            .map_err(|e| tracing::error!("cannot write {}: {e}", path.display()))
            .ok();
        Probe {
            params: vec![0.0; net.numel()],
            n_actions,
            train_every: u64::from(cfg.probe.train_every),
            epsilon: cfg.probe.epsilon,
            train_sleep: std::time::Duration::from_millis(cfg.probe.train_sleep_ms),
            observed: 0,
            scheduled: 0,
            version: 0,
            rng: Pcg64::seed_from_u64(cfg.seed ^ 0x9b0b_e000),
            log,
            open: HashMap::new(),
            seen: HashSet::new(),
        }
    }
}

fn joined(v: &[f32]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(";")
}

impl Act for Probe {
    fn act(&mut self, _obs: &[f32], _env_steps: u64, action: &mut [f32]) {
        let a = if self.rng.random::<f64>() < self.epsilon {
            self.rng.random_range(0..self.n_actions)
        } else {
            0
        };
        action[0] = a as f32;
    }

    fn epsilon(&self, _env_steps: u64) -> f64 {
        self.epsilon
    }
}

impl Learn for Probe {
    fn observe(&mut self, t: &Transition<'_>) {
        self.observed += 1;
        // A step that does not continue the open trajectory is not marked:
        // the conformance suite catches it as a jump.
        let starts = self.open.insert(t.episode, t.step + 1).is_none();
        let first = self.seen.insert(t.episode);
        let cut = starts && (t.step != 0 || !first);
        if let Some(w) = &mut self.log {
            let line = ProbeLine {
                version: self.version,
                action: joined(t.action),
                reward: t.reward,
                terminated: t.terminated,
                obs: joined(t.obs),
                next_obs: joined(t.next_obs),
                episode: t.episode,
                step: t.step,
                cut,
            };
            if let Err(e) = w.write(&line) {
                tracing::error!("probe.csv: {e}");
                self.log = None;
            }
        }
    }

    fn end_episode(&mut self, episode: u64) {
        self.open.remove(&episode);
    }

    fn abandon_episode(&mut self, episode: u64) {
        self.open.remove(&episode);
    }

    fn open_episodes(&self) -> usize {
        self.open.len()
    }

    fn train(&mut self, _env_steps: u64) -> u32 {
        let due = self.observed / self.train_every;
        let steps = due.saturating_sub(self.scheduled);
        self.scheduled = self.scheduled.max(due);
        self.version += steps;
        if steps > 0 {
            std::thread::sleep(self.train_sleep);
        }
        steps as u32
    }

    /// A new version, one item "sampled".
    fn sample_step(&mut self) -> u32 {
        self.version += 1;
        1
    }

    fn last_loss(&self) -> Option<f64> {
        None
    }

    fn train_steps(&self) -> u64 {
        self.version
    }

    fn replay_len(&self) -> usize {
        0
    }
}

impl Persist for Probe {
    fn weights(&self) -> Weights {
        Weights {
            version: self.version,
            data: self.params.clone(),
        }
    }

    fn load_weights(&mut self, w: &Weights) -> Result<(), AgentError> {
        check_weights(&w.data, self.params.len())?;
        self.params.copy_from_slice(&w.data);
        self.version = w.version;
        Ok(())
    }

    fn state(&self) -> AgentState {
        AgentState {
            tensors: vec![NamedTensor {
                name: "online".into(),
                shape: vec![self.params.len()],
                data: self.params.clone(),
            }],
            train_steps: self.version,
            version: self.version,
            optimizer_steps: self.observed,
        }
    }

    fn load_state(&mut self, s: &AgentState) -> Result<(), AgentError> {
        let t = s.tensor("online")?;
        check_weights(&t.data, self.params.len())?;
        self.params.copy_from_slice(&t.data);
        self.version = s.train_steps;
        self.observed = s.optimizer_steps;
        self.scheduled = self.observed / self.train_every;
        Ok(())
    }
}

impl Parallel for Probe {}

impl Drop for Probe {
    fn drop(&mut self) {
        if let Some(w) = &mut self.log
            && let Err(e) = w.flush()
        {
            tracing::error!("probe.csv: {e}");
        }
    }
}
