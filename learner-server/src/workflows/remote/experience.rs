//! Experience batches: validation, exactly-once ingestion into replay,
//! training, and the replies — at once in `async`/`nb-async`/`random`, when
//! the window closes in `async-window`, at the end of the round in `sync`.
//! (The `rma` pools take theirs in the transport tasks, and the run thread
//! ingests what it pops from them here.)

use super::{Mode, Parked, RemoteRun};
use crate::replay::RateLimiter;
use crate::replay::Transition;
use crate::transport::{ConnId, Reply};
use rlfleet_shared::config::WorkflowKind;
use rlfleet_shared::env::Space;
use rlfleet_shared::wire::{ErrorCode, Experience};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

/// `orchestrated`: the rate limiter between inserts and training, and the
/// inserts it holds back (their actors wait for the reply).
#[derive(Debug)]
pub(super) struct Orchestra {
    limiter: RateLimiter,
    pub waiting: VecDeque<(ConnId, Experience, Reply)>,
    /// Items one gradient step samples.
    items: f64,
}

impl Orchestra {
    pub fn new(limiter: RateLimiter, items_per_sample: f64) -> Orchestra {
        Orchestra {
            limiter,
            waiting: VecDeque::new(),
            items: items_per_sample,
        }
    }
}

/// Gradient steps taken in one go before the loop looks at events again.
const MAX_STEPS_PER_TURN: u32 = 32;

/// The `async-window` batches collected since the window opened.
#[derive(Debug, Default)]
pub(super) struct Window {
    opened: Option<Instant>,
    batches: Vec<(ConnId, Experience, Reply)>,
}

impl Window {
    fn push(&mut self, conn: ConnId, e: Experience, reply: Reply) {
        self.opened.get_or_insert_with(Instant::now);
        self.batches.push((conn, e, reply));
    }

    /// The window is open and `window_ms` have passed.
    pub fn due(&self, window_ms: u64) -> bool {
        self.opened
            .is_some_and(|t| t.elapsed() >= Duration::from_millis(window_ms))
    }

    /// Time until the window closes (at most the idle tick).
    pub fn remaining(&self, window_ms: u64) -> Duration {
        let tick = super::IDLE_TICK;
        self.opened.map_or(tick, |t| {
            Duration::from_millis(window_ms)
                .saturating_sub(t.elapsed())
                .min(tick)
        })
    }

    /// Closes the window: its batches, in arrival order.
    pub fn take(&mut self) -> Vec<(ConnId, Experience, Reply)> {
        self.opened = None;
        std::mem::take(&mut self.batches)
    }
}

/// The state of the current `sync` round.
#[derive(Debug, Default)]
pub(super) struct Round {
    /// Actors this round waits for.
    pub participants: BTreeSet<ConnId>,
    /// Batches in, with the reply each waits for.
    pub submitted: BTreeMap<ConnId, (Experience, Reply)>,
    /// Batches of actors that left after submitting (trained, not answered).
    pub orphans: Vec<Experience>,
    /// Actors admitted at the next boundary.
    pub joiners: Vec<(ConnId, Reply)>,
}

impl Round {
    pub fn in_progress(&self) -> bool {
        !self.participants.is_empty()
    }

    /// The round's untrained batches and every reply it holds (the run
    /// is ending).
    pub fn take_all(&mut self) -> (Vec<Experience>, Vec<Reply>) {
        let mut batches = std::mem::take(&mut self.orphans);
        let mut replies = Vec::new();
        for (e, reply) in std::mem::take(&mut self.submitted).into_values() {
            batches.push(e);
            replies.push(reply);
        }
        replies.extend(
            std::mem::take(&mut self.joiners)
                .into_iter()
                .map(|(_, reply)| reply),
        );
        (batches, replies)
    }
}

/// Checks a batch against the run's spaces; names the first problem.
pub(super) fn check_experience(
    e: &Experience,
    obs_dim: usize,
    action_space: &Space,
    n_envs: u32,
) -> Result<(), (ErrorCode, String)> {
    let t = &e.transitions;
    let n = t.rewards.len();
    let act_dim = action_space.flat_dim();
    let shape = |what: &str, got: usize, want: usize| {
        (got != want).then(|| {
            (
                ErrorCode::BadShape,
                format!(
                    "experience: `{what}` has {got} values, expected {want} for {n} transitions"
                ),
            )
        })
    };
    let problems = [
        shape("obs", t.obs.len(), n * obs_dim),
        shape("next_obs", t.next_obs.len(), n * obs_dim),
        shape("actions", t.actions.len(), n * act_dim),
        shape("terminated", t.terminated.len(), n),
        shape("episode", t.episode.len(), n),
    ];
    if let Some(p) = problems.into_iter().flatten().next() {
        return Err(p);
    }
    for (what, v) in [
        ("obs", &t.obs),
        ("next_obs", &t.next_obs),
        ("rewards", &t.rewards),
        ("actions", &t.actions),
    ] {
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err((
                ErrorCode::NonFinite,
                format!("experience: `{what}`[{i}] is {}", v[i]),
            ));
        }
    }
    if let Some(n_actions) = action_space.n()
        && let Some(i) = t
            .actions
            .iter()
            .position(|&a| a < 0.0 || a.fract() != 0.0 || a as usize >= n_actions)
    {
        return Err((
            ErrorCode::BadAction,
            format!(
                "experience: action[{i}] = {} is not in Discrete({n_actions})",
                t.actions[i]
            ),
        ));
    }
    let bad_env = e
        .finished
        .iter()
        .map(|f| f.env)
        .chain(e.idle_envs.iter().copied())
        .find(|&env| env >= n_envs);
    if let Some(env) = bad_env {
        return Err((
            ErrorCode::BadShape,
            format!("experience names env {env}, the actor runs {n_envs}"),
        ));
    }
    Ok(())
}

impl RemoteRun {
    pub(super) fn on_experience(
        &mut self,
        conn: ConnId,
        e: Experience,
        reply: Reply,
    ) -> anyhow::Result<()> {
        if !e.transitions.is_empty() {
            self.accounts.received(&e);
        }
        let slot = &self.actors[&conn];
        let check = if e.actor_id != slot.actor_id {
            Err((
                ErrorCode::Unexpected,
                format!(
                    "experience from actor `{}` on the connection of `{}`",
                    e.actor_id, slot.actor_id
                ),
            ))
        } else {
            check_experience(&e, self.obs_dim(), &self.spec.action_space, slot.n_envs)
        };
        if let Err((code, text)) = check {
            if !e.transitions.is_empty() {
                self.accounts
                    .dropped(&e, self.agent.train_steps(), "invalid");
            }
            self.protocol_error(reply, code, text);
            return Ok(());
        }
        match &mut self.mode {
            Mode::Sync(round) => {
                if !round.participants.contains(&conn) || round.submitted.contains_key(&conn) {
                    if !e.transitions.is_empty() {
                        self.accounts
                            .dropped(&e, self.agent.train_steps(), "invalid");
                    }
                    self.protocol_error(
                        reply,
                        ErrorCode::Unexpected,
                        "experience outside this actor's turn in the round".into(),
                    );
                    return Ok(());
                }
                round.submitted.insert(conn, (e, reply));
                return self.maybe_finish_round();
            }
            Mode::Window(w) => {
                w.push(conn, e, reply);
                return Ok(());
            }
            Mode::Orchestrated(o) if !o.waiting.is_empty() || !o.limiter.can_insert() => {
                o.waiting.push_back((conn, e, reply));
                return Ok(());
            }
            _ => {}
        }
        self.answer(conn, e, reply)
    }

    /// `orchestrated`: gradient steps while the rate limiter allows, then
    /// the inserts it now admits. True if it did anything.
    pub(super) fn orchestrate(&mut self) -> anyhow::Result<bool> {
        let before = self.agent.train_steps();
        let started = Instant::now();
        let mut steps = 0;
        while let Mode::Orchestrated(o) = &mut self.mode
            && steps < MAX_STEPS_PER_TURN
            && o.limiter.can_sample(o.items)
        {
            let items = self.agent.sample_step();
            if items == 0 {
                break;
            }
            if let Mode::Orchestrated(o) = &mut self.mode {
                o.limiter.sampled(f64::from(items));
            }
            steps += 1;
        }
        self.time.train += started.elapsed();
        self.count_train_steps(before);
        let mut inserted = false;
        while let Mode::Orchestrated(o) = &mut self.mode
            && o.limiter.can_insert()
            && let Some((conn, e, reply)) = o.waiting.pop_front()
        {
            self.answer(conn, e, reply)?;
            inserted = true;
        }
        Ok(steps > 0 || inserted)
    }

    /// Ingests a batch and answers it: the next episodes and newer
    /// weights, or — when the actor has nothing left to play — later.
    fn answer(&mut self, conn: ConnId, e: Experience, reply: Reply) -> anyhow::Result<()> {
        let (seq, idle) = (e.seq, e.idle_envs.clone());
        let duplicate = !self.ingest(conn, &e, false)?;
        let starts = self.issue(conn, &idle);
        let nothing_to_do = starts.is_empty() && self.ledger().held_by(conn) == 0;
        if nothing_to_do && !duplicate && self.actors.contains_key(&conn) {
            // Wait until an episode is re-issued or the run ends.
            let slot = self.actors.get_mut(&conn).expect("joined");
            slot.parked = Some(Parked { seq, idle, reply });
            return Ok(());
        }
        let ack = self.ack(conn, seq, duplicate, starts);
        let _ = reply.send(ack);
        Ok(())
    }

    /// `async-window`: trains on every batch the window collected, then
    /// answers them all with the newest weights.
    pub(super) fn flush_window(&mut self) -> anyhow::Result<()> {
        let Mode::Window(w) = &mut self.mode else {
            return Ok(());
        };
        for (conn, e, reply) in w.take() {
            self.answer(conn, e, reply)?;
        }
        Ok(())
    }

    /// Puts a valid batch into replay and trains, unless it was trained
    /// before (a resend) or is too stale; counts its finished episodes.
    /// Batches popped from the `rma` pools (`from_pool`) were deduplicated
    /// and had their episodes counted at deposit. Returns false for a
    /// duplicate.
    pub(super) fn ingest(
        &mut self,
        conn: ConnId,
        e: &Experience,
        from_pool: bool,
    ) -> anyhow::Result<bool> {
        let version = self.agent.train_steps();
        let before = self.book.counters.env_steps;
        if !e.transitions.is_empty() {
            if !from_pool {
                let key = (e.actor_id.clone(), e.session_id);
                if self.trained_seq.get(&key).is_some_and(|&s| e.seq <= s) {
                    self.accounts.dropped(e, version, "duplicate");
                    return Ok(false);
                }
                self.trained_seq.insert(key, e.seq);
            }
            let lag = version.saturating_sub(e.policy_version);
            let stale = self
                .cfg()
                .distributed
                .max_policy_lag
                .is_some_and(|m| lag > m);
            if stale {
                self.accounts.dropped(e, version, "stale");
            } else {
                let started = Instant::now();
                let learns = self.cfg().workflow != WorkflowKind::Random;
                let (od, ad) = (self.obs_dim(), self.act_dim());
                let t = &e.transitions;
                if learns {
                    for i in 0..t.len() {
                        self.agent.observe(&Transition {
                            episode: t.episode[i],
                            obs: &t.obs[i * od..(i + 1) * od],
                            action: &t.actions[i * ad..(i + 1) * ad],
                            reward: t.rewards[i],
                            next_obs: &t.next_obs[i * od..(i + 1) * od],
                            terminated: t.terminated[i] != 0,
                        });
                    }
                }
                self.time.train += started.elapsed();
                self.book.counters.env_steps += t.len() as u64;
                self.accounts.trained(e, version);
                if !learns {
                    self.trained_upto = self.book.counters.env_steps;
                }
            }
        }
        if !from_pool {
            // Before training: an on-policy agent trains on the episodes
            // that end here.
            for f in &e.finished {
                self.finish_episode(conn, f.env, f.episode, f.ret, f.length)?;
            }
        }
        if let Mode::Orchestrated(o) = &mut self.mode {
            // The rate limiter paces training, not the agent's schedule.
            o.limiter.inserted(self.book.counters.env_steps - before);
            self.trained_upto = self.book.counters.env_steps;
        } else {
            self.train_pending();
        }
        self.book.after_steps(before, self.agent.as_ref())?;
        Ok(true)
    }

    /// Ends the `sync` round once every live participant has submitted:
    /// trains on all batches, answers everyone with the new weights and
    /// admits the actors that joined meanwhile.
    pub(super) fn maybe_finish_round(&mut self) -> anyhow::Result<()> {
        let Mode::Sync(round) = &mut self.mode else {
            return Ok(());
        };
        let complete = round
            .participants
            .iter()
            .all(|c| round.submitted.contains_key(c));
        if !complete
            || (round.submitted.is_empty() && round.orphans.is_empty() && round.joiners.is_empty())
        {
            return Ok(());
        }
        let submitted = std::mem::take(&mut round.submitted);
        let orphans = std::mem::take(&mut round.orphans);
        let joiners = std::mem::take(&mut round.joiners);
        for mut e in orphans {
            // Their actor is gone: train the data, count no episodes.
            e.finished.clear();
            self.ingest(u64::MAX, &e, false)?;
        }
        let mut replies = Vec::new();
        for (conn, (e, reply)) in submitted {
            let duplicate = !self.ingest(conn, &e, false)?;
            replies.push((conn, e.seq, duplicate, e.idle_envs, reply));
        }
        for (conn, seq, duplicate, idle, reply) in replies {
            let starts = self.issue(conn, &idle);
            let ack = self.ack(conn, seq, duplicate, starts);
            let _ = reply.send(ack);
        }
        for (conn, reply) in joiners {
            if self.actors.contains_key(&conn) {
                let welcome = self.welcome(conn);
                let _ = reply.send(welcome);
                if let Mode::Sync(round) = &mut self.mode {
                    round.participants.insert(conn);
                }
            }
        }
        Ok(())
    }
}
