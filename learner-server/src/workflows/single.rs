//! The `single` workflow (JORLDY's single): one environment loop in the
//! learner process that trains inline, while the evaluator thread scores the
//! weights published every `eval.period_steps` env steps.

use super::progress::Progress;
use super::{Evaluator, RunOptions, RunSummary, StopReason, check_limits};
use crate::agents::{self, Agent};
use crate::checkpoint::{BestEval, Checkpoint, RunCounters};
use crate::output::{self, EpisodeRecord, EvalRecord, RunOutput};
use crate::replay::Transition;
use anyhow::Context;
use rlfleet_shared::config::RunConfig;
use rlfleet_shared::env::{self, Action, Env};
use std::collections::VecDeque;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// A `single` run, built and ready (possibly resumed from a checkpoint).
pub struct SingleRun {
    cfg: RunConfig,
    agent: Box<dyn Agent>,
    env: Box<dyn Env>,
    out: RunOutput,
    counters: RunCounters,
    best: Option<BestEval>,
    progress: bool,
}

impl std::fmt::Debug for SingleRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingleRun")
            .field("name", &self.cfg.name)
            .field("counters", &self.counters)
            .finish()
    }
}

/// The seed of training episode `episode` (reproducible across resumes).
fn episode_seed(run_seed: u64, episode: u64) -> u64 {
    run_seed.wrapping_mul(1_000_003).wrapping_add(episode)
}

impl SingleRun {
    pub fn new(cfg: &RunConfig, opts: &RunOptions) -> anyhow::Result<SingleRun> {
        let device = crate::device::select(1);
        let env = env::make(&cfg.env)?;
        let mut agent = agents::build_agent(cfg, env.spec(), device);
        let (mut counters, mut best) = (RunCounters::default(), None);
        if let Some(path) = &opts.resume {
            let ck = Checkpoint::load(path)?;
            ck.check_matches(path, &cfg.env, &cfg.agent.to_string())?;
            agent.load_state(&ck.agent_state).with_context(|| {
                format!(
                    "checkpoint `{}` does not fit this run's agent",
                    path.display()
                )
            })?;
            counters = ck.counters;
            best = ck.best;
            tracing::info!(
                env_steps = counters.env_steps,
                episodes = counters.episodes,
                train_steps = agent.train_steps(),
                "resumed from {}",
                path.display()
            );
        }
        let out = RunOutput::create(cfg, opts.resume.is_some()).with_context(|| {
            format!(
                "cannot write the output directory `{}`",
                cfg.output_dir.display()
            )
        })?;
        Ok(SingleRun {
            cfg: cfg.clone(),
            agent,
            env,
            out,
            counters,
            best,
            progress: opts.progress,
        })
    }

    pub fn counters(&self) -> RunCounters {
        self.counters
    }

    pub fn agent(&self) -> &dyn Agent {
        self.agent.as_ref()
    }

    fn checkpoint(&mut self) -> anyhow::Result<()> {
        let ck = Checkpoint {
            env: self.cfg.env.clone(),
            agent: self.cfg.agent.to_string(),
            counters: self.counters,
            agent_state: self.agent.state(),
            best: self.best.clone(),
        };
        ck.save(&self.out.checkpoint_path())?;
        Ok(())
    }

    fn record_eval(&mut self, r: &super::EvalResult) -> anyhow::Result<()> {
        self.out.eval(&EvalRecord {
            env_steps: r.env_steps,
            policy_version: r.weights.version,
            mean_return: r.mean(),
            min_return: r.min(),
            max_return: r.max(),
            wall_secs: self.counters.wall_secs,
        })?;
        if self.best.as_ref().is_none_or(|b| r.mean() > b.mean_return) {
            self.best = Some(BestEval {
                mean_return: r.mean(),
                env_steps: r.env_steps,
                weights: r.weights.clone(),
            });
        }
        Ok(())
    }

    /// Runs to the stop condition; writes the checkpoint, plot and summary.
    pub fn run(mut self, cancel: &CancellationToken) -> anyhow::Result<RunSummary> {
        let spec = self.env.spec().clone();
        let stop = self.cfg.stop.clone();
        let evaluator = Evaluator::spawn(
            &self.cfg.env,
            agents::build_policy(&self.cfg, &spec),
            self.cfg.eval.episodes,
            self.cfg.seed,
        );
        let progress = Progress::new(self.progress, stop.max_env_steps, self.counters.env_steps);
        let session_start = Instant::now();
        let (start_steps, start_wall) = (self.counters.env_steps, self.counters.wall_secs);
        let mut obs = vec![0f32; spec.obs_dim()];
        let mut next_obs = obs.clone();
        let mut action = vec![0f32; spec.action_space.flat_dim()];
        let mut recent: VecDeque<f64> = VecDeque::with_capacity(20);
        let mut last_eval = self.best.as_ref().map(|b| b.mean_return);
        let (mut ep_return, mut ep_len) = (0.0, 0u32);
        self.env.reset(
            Some(episode_seed(self.cfg.seed, self.counters.episodes)),
            &mut obs,
        );

        let reason = loop {
            if cancel.is_cancelled() {
                break StopReason::Cancelled;
            }
            self.counters.wall_secs = start_wall + session_start.elapsed().as_secs_f64();
            if let Some(r) = check_limits(&stop, &self.counters) {
                break r;
            }
            // Evaluations that finished since the last step.
            let mut reached = None;
            while let Some(r) = evaluator.try_result() {
                self.record_eval(&r)?;
                last_eval = Some(r.mean());
                if stop.target_eval_return.is_some_and(|t| r.mean() >= t) {
                    reached = Some(StopReason::TargetReached {
                        mean_return: r.mean(),
                        env_steps: r.env_steps,
                    });
                }
            }
            if let Some(r) = reached {
                break r;
            }

            self.agent.act(&obs, self.counters.env_steps, &mut action);
            let a = if spec.action_space.is_discrete() {
                Action::Discrete(action[0] as usize)
            } else {
                Action::Continuous(&action)
            };
            let step = self.env.step(a, &mut next_obs);
            self.agent.observe(&Transition {
                obs: &obs,
                action: &action,
                reward: step.reward as f32,
                next_obs: &next_obs,
                terminated: step.terminated,
            });
            self.counters.env_steps += 1;
            ep_return += step.reward;
            ep_len += 1;
            self.agent.train(self.counters.env_steps);
            std::mem::swap(&mut obs, &mut next_obs);

            if step.done() {
                self.out.episode(&EpisodeRecord {
                    episode: self.counters.episodes,
                    actor: 0,
                    ret: ep_return,
                    length: ep_len,
                    wall_secs: self.counters.wall_secs,
                    policy_version: self.agent.train_steps(),
                    env_steps: self.counters.env_steps,
                })?;
                self.out.flush()?;
                if recent.len() == 20 {
                    recent.pop_front();
                }
                recent.push_back(ep_return);
                self.counters.episodes += 1;
                (ep_return, ep_len) = (0.0, 0);
                self.env.reset(
                    Some(episode_seed(self.cfg.seed, self.counters.episodes)),
                    &mut obs,
                );
            }
            if self
                .counters
                .env_steps
                .is_multiple_of(self.cfg.eval.period_steps)
            {
                evaluator.publish(self.agent.weights(), self.counters.env_steps);
            }
            let period = self.cfg.checkpoint.period_steps;
            if period > 0 && self.counters.env_steps.is_multiple_of(period) {
                self.checkpoint()?;
            }
            if self.counters.env_steps.is_multiple_of(500) {
                let secs = session_start.elapsed().as_secs_f64().max(1e-9);
                let rate = (self.counters.env_steps - start_steps) as f64 / secs;
                let mean =
                    (!recent.is_empty()).then(|| recent.iter().sum::<f64>() / recent.len() as f64);
                progress.update(
                    self.counters.env_steps,
                    self.counters.episodes,
                    rate,
                    mean,
                    last_eval,
                );
            }
        };
        progress.finish();

        // Score the final weights unless the target was just reached.
        let last = (!matches!(reason, StopReason::TargetReached { .. }))
            .then(|| (self.agent.weights(), self.counters.env_steps));
        let final_version = last.as_ref().map(|(w, _)| w.version);
        let mut final_eval = None;
        for r in evaluator.finish(last) {
            self.record_eval(&r)?;
            if Some(r.weights.version) == final_version {
                final_eval = Some(r.mean());
            }
        }
        if let StopReason::TargetReached { mean_return, .. } = reason {
            final_eval = Some(mean_return);
        }
        self.counters.wall_secs = start_wall + session_start.elapsed().as_secs_f64();
        self.out.flush()?;
        self.checkpoint()?;
        let secs = session_start.elapsed().as_secs_f64().max(1e-9);
        let summary = RunSummary {
            reason,
            counters: self.counters,
            train_steps: self.agent.train_steps(),
            best_eval: self.best.as_ref().map(|b| (b.mean_return, b.env_steps)),
            final_eval,
            env_steps_per_sec: (self.counters.env_steps - start_steps) as f64 / secs,
            output_dir: self.out.dir().to_path_buf(),
        };
        let dir = self.out.dir().to_path_buf();
        std::fs::write(dir.join("summary.toml"), summary.to_toml())?;
        let episodes = output::read_episodes(&dir.join("episodes.csv"))?;
        let evals = output::read_evals(&dir.join("evals.csv"))?;
        let title = format!(
            "{} — {} {} on {}",
            self.cfg.name, self.cfg.workflow, self.cfg.agent, self.cfg.env
        );
        if let Err(e) = output::plot_learning_curve(
            &dir.join("learning_curve.png"),
            &title,
            &episodes,
            &evals,
            stop.target_eval_return,
        ) {
            tracing::warn!("cannot draw the learning curve: {e}");
        }
        Ok(summary)
    }
}
