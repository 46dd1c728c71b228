//! `orchestrated` (DistributedReinforcementLearning.jl): actors insert
//! transitions into replay, and a Reverb-style rate limiter keeps gradient
//! steps at `samples_per_insert` — inserts wait in a queue (their actors
//! wait for the reply) while training is behind, and the learner takes
//! gradient steps while the limiter lets it sample.

use super::core::{Core, stop_message};
use super::workflow::Workflow;
use crate::replay::RateLimiter;
use crate::transport::{ConnId, Reply};
use rlfleet_shared::wire::Submission;
use std::collections::VecDeque;
use std::time::Instant;

/// Gradient steps taken in one go before the loop looks at inputs again.
const MAX_STEPS_PER_TURN: u32 = 32;

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
        core.paced = true;
        let cfg = core.cfg();
        let d = &cfg.distributed;
        Orchestrated {
            limiter: RateLimiter::new(d.samples_per_insert, d.min_size_to_sample, d.error_buffer),
            waiting: VecDeque::new(),
            items: cfg.items_per_sample().unwrap_or(1) as f64,
        }
    }

    /// Ingests and answers one insert; tells the limiter.
    fn insert(
        &mut self,
        core: &mut Core,
        conn: ConnId,
        s: Submission,
        reply: Option<Reply>,
    ) -> anyhow::Result<()> {
        let before = core.book.counters.env_steps;
        match reply {
            Some(reply) => core.answer(conn, s, reply)?,
            None => {
                if let Submission::Batch(e) = &s {
                    core.ingest(conn, e, false)?;
                }
            }
        }
        self.limiter.inserted(core.book.counters.env_steps - before);
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
        let before = core.agent.train_steps();
        let started = Instant::now();
        let mut steps = 0;
        while steps < MAX_STEPS_PER_TURN && self.limiter.can_sample(self.items) {
            let items = core.agent.sample_step();
            if items == 0 {
                break;
            }
            self.limiter.sampled(f64::from(items));
            steps += 1;
        }
        core.time.train += started.elapsed();
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
            let _ = reply.send(stop_message(reason));
        }
        Ok(())
    }
}
