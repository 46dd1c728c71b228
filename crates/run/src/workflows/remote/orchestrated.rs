//! `orchestrated` (DistributedReinforcementLearning.jl): actors insert
//! transitions into replay, and a Reverb-style rate limiter keeps gradient
//! steps at `samples_per_insert` — inserts wait in a queue (their actors
//! wait for the reply) while training is behind, and the learner takes
//! gradient steps while the limiter lets it sample.

use super::core::{Core, stop_message};
use super::workflow::Workflow;
use crate::vocab::{ConnId, Reply};
use rlfleet_replay::RateLimiter;
use rlfleet_shared::wire::Submission;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Instant;

/// Gradient steps taken in one go before the loop looks at inputs again.
const MAX_STEPS_PER_TURN: u32 = 32;

/// The rate limiter's counts in a checkpoint.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct LimiterBooks {
    inserts: u64,
    samples: f64,
}

/// The rate limiter and the inserts it holds back.
#[derive(Debug)]
pub(super) struct Orchestrated {
    limiter: RateLimiter,
    waiting: VecDeque<(ConnId, Submission, Reply)>,
    /// Items one gradient step samples.
    items: f64,
}

impl Orchestrated {
    /// Training of `core` is paced by the limiter from now on.
    pub fn new(core: &mut Core) -> Orchestrated {
        core.pace_training();
        let cfg = core.cfg();
        let d = &cfg.distributed;
        let mut limiter =
            RateLimiter::new(d.samples_per_insert, d.min_size_to_sample, d.error_buffer);
        let saved = core.workflow_books().cloned();
        // Resumed: the samples-per-insert ratio carries on where it was.
        if let Some(b) = saved.and_then(|v| serde_json::from_value::<LimiterBooks>(v).ok()) {
            limiter.restore(b.inserts, b.samples);
        }
        Orchestrated {
            limiter,
            waiting: VecDeque::new(),
            items: cfg.items_per_sample().unwrap_or(1) as f64,
        }
    }

    /// Puts the limiter's counts where the next checkpoint takes them.
    fn keep_books(&self, core: &mut Core) {
        let b = LimiterBooks {
            inserts: self.limiter.inserts(),
            samples: self.limiter.samples(),
        };
        core.keep_workflow_books(serde_json::to_value(b).expect("plain data serialises"));
    }

    /// Ingests and answers one insert; tells the limiter.
    fn insert(
        &mut self,
        core: &mut Core,
        conn: ConnId,
        s: Submission,
        reply: Option<Reply>,
    ) -> anyhow::Result<()> {
        let before = core.env_steps();
        match reply {
            Some(reply) => core.answer(conn, s, reply)?,
            None => {
                if let Submission::Batch(e) = &s {
                    core.ingest(conn, e, false)?;
                }
            }
        }
        self.limiter.inserted(core.env_steps() - before);
        Ok(())
    }
}

impl Workflow for Orchestrated {
    fn experience(
        &mut self,
        core: &mut Core,
        conn: ConnId,
        s: Submission,
        reply: Reply,
        _now: Instant,
    ) -> anyhow::Result<()> {
        if !self.waiting.is_empty() || !self.limiter.can_insert() {
            self.waiting.push_back((conn, s, reply));
            return Ok(());
        }
        self.insert(core, conn, s, Some(reply))
    }

    /// Gradient steps while the rate limiter allows, then the inserts it
    /// now admits.
    fn work(&mut self, core: &mut Core, _now: Instant) -> anyhow::Result<bool> {
        let before = core.agent().train_steps();
        let mut steps = 0;
        while steps < MAX_STEPS_PER_TURN && self.limiter.can_sample(self.items) {
            let items = core.agent_mut().sample_step();
            if items == 0 {
                break;
            }
            self.limiter.sampled(f64::from(items));
            steps += 1;
        }
        core.count_train_steps(before);
        let mut inserted = false;
        while self.limiter.can_insert()
            && let Some((conn, s, reply)) = self.waiting.pop_front()
        {
            self.insert(core, conn, s, Some(reply))?;
            inserted = true;
        }
        Ok(steps > 0 || inserted)
    }

    fn stop(&mut self, core: &mut Core, reason: &str) -> anyhow::Result<()> {
        // Inserts held back by the rate limiter go into replay.
        for (conn, s, reply) in std::mem::take(&mut self.waiting) {
            self.insert(core, conn, s, None)?;
            core.reply(reply, stop_message(reason));
        }
        self.keep_books(core);
        Ok(())
    }

    /// The inserts held back are taken in (and answered) first, so that
    /// every batch the books count received is trained; the limiter counts
    /// them, and holds the next inserts until sampling catches up.
    fn checkpoint(&mut self, core: &mut Core) -> anyhow::Result<bool> {
        if !core.book().checkpoint_due() {
            return Ok(false);
        }
        while let Some((conn, s, reply)) = self.waiting.pop_front() {
            self.insert(core, conn, s, Some(reply))?;
        }
        self.keep_books(core);
        core.checkpoint_if_due()
    }
}
