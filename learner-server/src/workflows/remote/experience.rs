//! Experience batches (`async` and `sync`): validation, exactly-once
//! ingestion into replay, training, and the replies — at once in `async`,
//! at the end of the round in `sync`.

use super::{Mode, Parked, RemoteRun};
use crate::replay::Transition;
use crate::transport::{ConnId, Reply};
use rlfleet_shared::env::Space;
use rlfleet_shared::wire::{ErrorCode, Experience};
use std::collections::{BTreeMap, BTreeSet};

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

    /// Every reply held by the round (to answer `Stop` at the end).
    pub fn take_replies(&mut self) -> Vec<Reply> {
        let mut r: Vec<Reply> = std::mem::take(&mut self.submitted)
            .into_values()
            .map(|(_, reply)| reply)
            .collect();
        r.extend(
            std::mem::take(&mut self.joiners)
                .into_iter()
                .map(|(_, reply)| reply),
        );
        r
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
        self.tally.received += 1;
        self.metrics.batches_received.inc();
        self.metrics
            .batch_transitions
            .observe(e.transitions.len() as f64);
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
            self.drop_batch("invalid");
            self.protocol_error(reply, code, text);
            return Ok(());
        }
        if let Mode::Sync(round) = &mut self.mode {
            if !round.participants.contains(&conn) || round.submitted.contains_key(&conn) {
                self.drop_batch("invalid");
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
        let (seq, idle) = (e.seq, e.idle_envs.clone());
        let duplicate = !self.ingest(conn, e)?;
        let starts = self.issue(conn, &idle);
        let nothing_to_do = starts.is_empty() && self.ledger.held_by(conn) == 0;
        if nothing_to_do && !duplicate {
            // Wait until an episode is re-issued or the run ends.
            let slot = self.actors.get_mut(&conn).expect("joined");
            slot.parked = Some(Parked { seq, idle, reply });
            return Ok(());
        }
        let ack = self.ack(conn, seq, duplicate, starts);
        let _ = reply.send(ack);
        Ok(())
    }

    /// Puts a valid batch into replay and trains, unless it was trained
    /// before (a resend) or is too stale. Counts its finished episodes.
    /// Returns false for a duplicate.
    fn ingest(&mut self, conn: ConnId, e: Experience) -> anyhow::Result<bool> {
        let key = (e.actor_id.clone(), e.session_id);
        if self.trained_seq.get(&key).is_some_and(|&s| e.seq <= s) {
            self.drop_batch("duplicate");
            return Ok(false);
        }
        self.trained_seq.insert(key, e.seq);
        let version = self.agent.train_steps();
        let lag = version.saturating_sub(e.policy_version);
        let stale = self
            .cfg()
            .distributed
            .max_policy_lag
            .is_some_and(|m| lag > m);
        let before = self.book.counters.env_steps;
        if stale {
            self.drop_batch("stale");
        } else {
            let (od, ad) = (self.obs_dim(), self.act_dim());
            let t = &e.transitions;
            for i in 0..t.len() {
                self.agent.observe(&Transition {
                    obs: &t.obs[i * od..(i + 1) * od],
                    action: &t.actions[i * ad..(i + 1) * ad],
                    reward: t.rewards[i],
                    next_obs: &t.next_obs[i * od..(i + 1) * od],
                    terminated: t.terminated[i] != 0,
                });
            }
            let n = t.len() as u64;
            self.book.counters.env_steps += n;
            self.tally.transitions += n;
            self.tally.trained += 1;
            self.metrics.env_steps.inc_by(n);
            self.metrics.transitions_ingested.inc_by(n);
            self.metrics.batches_trained.inc();
            self.metrics.policy_lag.observe(lag as f64);
            self.train_pending();
        }
        for f in &e.finished {
            self.finish_episode(conn, f.env, f.episode, f.ret, f.length)?;
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
        for e in orphans {
            // Their actor is gone: train the data, count no episodes.
            let mut e = e;
            e.finished.clear();
            self.ingest(u64::MAX, e)?;
        }
        let mut replies = Vec::new();
        for (conn, (e, reply)) in submitted {
            let (seq, idle) = (e.seq, e.idle_envs.clone());
            let duplicate = !self.ingest(conn, e)?;
            replies.push((conn, seq, duplicate, idle, reply));
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
