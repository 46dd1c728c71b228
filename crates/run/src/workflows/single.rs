//! The `single` workflow (JORLDY's single): one environment loop in the
//! learner process that trains inline, while the evaluator thread scores the
//! weights published every `eval.period_steps` env steps. The loop is the
//! book's driver: it reads the clock and has the desk do what the book
//! asks.

use super::book::RunBook;
use super::desk::Desk;
use super::seeds::episode_seed;
use super::{RunOptions, RunSummary, StopReason};
use rlfleet_checkpoint::RunCounters;
use rlfleet_learning::agents::{self, Agent};
use rlfleet_replay::Transition;
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::{Action, Env, EnvFault};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// A `single` run, built and ready (possibly resumed from a checkpoint).
pub struct SingleRun {
    agent: Box<dyn Agent>,
    env: Box<dyn Env>,
    book: RunBook,
    desk: Desk,
}

impl std::fmt::Debug for SingleRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingleRun")
            .field("name", &self.book.cfg.name)
            .field("counters", &self.book.counters)
            .finish()
    }
}

impl SingleRun {
    pub fn new(cfg: &RunConfig, opts: &RunOptions) -> anyhow::Result<SingleRun> {
        let device = rlfleet_learning::device::select(1);
        let env = cfg.env_source().make()?;
        let mut agent = agents::build_agent(cfg, env.spec(), device);
        let (book, desk) = Desk::open(cfg, opts, agent.as_mut())?;
        Ok(SingleRun {
            agent,
            env,
            book,
            desk,
        })
    }

    pub fn counters(&self) -> RunCounters {
        self.book.counters
    }

    pub fn agent(&self) -> &dyn Agent {
        self.agent.as_ref()
    }

    /// Runs to the stop condition; writes the checkpoint, plot and summary.
    pub fn run(mut self, cancel: &CancellationToken) -> anyhow::Result<RunSummary> {
        let spec = self.env.spec().clone();
        let mut obs = vec![0f32; spec.obs_dim()];
        let mut next_obs = obs.clone();
        let mut action = vec![0f32; spec.action_space.flat_dim()];
        let (mut ep_return, mut ep_len) = (0.0, 0u32);
        self.start_episode(&mut obs)?;

        let reason = loop {
            if cancel.is_cancelled() {
                break StopReason::Cancelled;
            }
            self.desk.step(&mut self.book)?;
            if let Some(r) = self.book.poll(Instant::now()) {
                break r;
            }
            let steps = self.book.counters.env_steps;
            self.agent.act(&obs, steps, &mut action);
            let a = if spec.action_space.is_discrete() {
                Action::Discrete(action[0] as usize)
            } else {
                Action::Continuous(&action)
            };
            let step = match self.env.try_step(a, &mut next_obs) {
                Ok(step) => step,
                Err(fault) => {
                    // The episode is abandoned (the steps already observed
                    // stay in training) and played again from its seed on a
                    // rebuilt env.
                    self.agent.end_episode(self.book.counters.episodes);
                    self.env_fault(&fault)?;
                    (ep_return, ep_len) = (0.0, 0);
                    self.start_episode(&mut obs)?;
                    continue;
                }
            };
            self.agent.observe(&Transition {
                episode: self.book.counters.episodes,
                step: ep_len,
                obs: &obs,
                action: &action,
                reward: step.reward as f32,
                next_obs: &next_obs,
                terminated: step.terminated,
                logp: self.agent.last_logp(),
            });
            self.book.counters.env_steps += 1;
            ep_return += step.reward;
            ep_len += 1;
            if step.done() {
                self.agent.end_episode(self.book.counters.episodes);
            }
            self.agent.train(self.book.counters.env_steps);
            std::mem::swap(&mut obs, &mut next_obs);

            if step.done() {
                let episode = self.book.counters.episodes;
                let version = self.agent.train_steps();
                self.book.episode(episode, 0, ep_return, ep_len, version);
                self.book.flush();
                (ep_return, ep_len) = (0.0, 0);
                self.start_episode(&mut obs)?;
            }
            self.book
                .after_steps(steps, self.agent.as_ref(), Instant::now());
        };
        self.desk
            .finish(&mut self.book, reason, self.agent.as_ref(), None)
    }

    /// Resets the env for the next episode id, from its seed; an env that
    /// raises is rebuilt and tried again, up to a few times.
    fn start_episode(&mut self, obs: &mut [f32]) -> anyhow::Result<()> {
        let seed = episode_seed(self.book.cfg.seed, self.book.counters.episodes);
        for _ in 0..RESET_ATTEMPTS {
            match self.env.try_reset(Some(seed), obs) {
                Ok(()) => return Ok(()),
                Err(fault) => self.env_fault(&fault)?,
            }
        }
        anyhow::bail!(
            "`{}` raised in reset {RESET_ATTEMPTS} times in a row for episode {}",
            self.book.cfg.env,
            self.book.counters.episodes
        )
    }

    /// Logs and counts an env's exception and rebuilds the env.
    fn env_fault(&mut self, fault: &EnvFault) -> anyhow::Result<()> {
        tracing::error!(
            env = %self.book.cfg.env,
            episode = self.book.counters.episodes,
            "the env raised {fault}; the episode is played again on a rebuilt env"
        );
        self.book.env_errors += 1;
        self.env = self.book.cfg.env_source().make()?;
        Ok(())
    }
}

/// Consecutive failed resets after which a `single` run gives up.
const RESET_ATTEMPTS: u32 = 3;
