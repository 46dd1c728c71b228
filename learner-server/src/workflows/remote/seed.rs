//! `seed` (SEED RL central inference): actors send observations, the
//! learner batches them across actors — up to `inference_max_batch`
//! environments or `inference_max_wait_us`, and at once when every actor is
//! waiting — answers with actions, assembles transitions per (actor, env)
//! and trains. Weights never leave the learner.

use super::{EnvTrack, Parked, RemoteRun};
use crate::replay::Transition;
use crate::transport::{ConnId, Reply};
use rlfleet_shared::config::DistributedConfig;
use rlfleet_shared::wire::{self, ErrorCode, Message, Observations, flags};
use std::time::{Duration, Instant};

/// One request waiting for inference.
#[derive(Debug)]
struct Pending {
    conn: ConnId,
    seq: u64,
    received: Instant,
    reply: Reply,
    /// Envs that need an action.
    act: Vec<u32>,
    /// Envs that need a new episode.
    start: Vec<u32>,
}

/// The inference batching policy's state: the requests waiting, oldest
/// first (no clock of its own: callers pass `Instant`s).
#[derive(Debug, Default)]
pub(super) struct Batcher {
    pending: Vec<Pending>,
}

impl Batcher {
    fn oldest(&self) -> Option<Instant> {
        self.pending.first().map(|p| p.received)
    }

    /// Environments waiting for an action.
    fn envs(&self) -> usize {
        self.pending.iter().map(|p| p.act.len()).sum()
    }

    /// Time left before the oldest request must be served.
    pub fn wait_left(&self, cfg: &DistributedConfig) -> Option<Duration> {
        let max = Duration::from_micros(cfg.inference_max_wait_us);
        self.oldest().map(|t| max.saturating_sub(t.elapsed()))
    }

    /// Serve now? Full batch, waited long enough, or nobody else can send.
    pub fn ready(&self, cfg: &DistributedConfig, now: Instant, actors: usize) -> bool {
        let Some(oldest) = self.oldest() else {
            return false;
        };
        self.envs() >= cfg.inference_max_batch as usize
            || now.duration_since(oldest) >= Duration::from_micros(cfg.inference_max_wait_us)
            || self.pending.len() >= actors
    }

    fn push(&mut self, p: Pending) {
        self.pending.push(p);
    }

    fn take(&mut self) -> Vec<Pending> {
        std::mem::take(&mut self.pending)
    }

    pub fn forget(&mut self, conn: ConnId) {
        self.pending.retain(|p| p.conn != conn);
    }

    pub fn take_replies(&mut self) -> Vec<Reply> {
        self.take().into_iter().map(|p| p.reply).collect()
    }
}

impl RemoteRun {
    fn check_observations(
        &self,
        conn: ConnId,
        o: &Observations,
    ) -> Result<(), (ErrorCode, String)> {
        let n = self.actors[&conn].n_envs as usize;
        let od = self.obs_dim();
        for (what, got, want) in [
            ("obs", o.obs.len(), n * od),
            ("rewards", o.rewards.len(), n),
            ("flags", o.flags.len(), n),
        ] {
            if got != want {
                return Err((
                    ErrorCode::BadShape,
                    format!(
                        "observations: `{what}` has {got} values, expected {want} ({n} envs, obs_dim {od})"
                    ),
                ));
            }
        }
        for i in 0..n {
            if o.flags[i] & flags::IDLE != 0 {
                continue;
            }
            let row = &o.obs[i * od..(i + 1) * od];
            if let Some(j) = row.iter().position(|x| !x.is_finite()) {
                return Err((
                    ErrorCode::NonFinite,
                    format!("observations: env {i} obs[{j}] is {}", row[j]),
                ));
            }
            if !o.rewards[i].is_finite() {
                return Err((
                    ErrorCode::NonFinite,
                    format!("observations: env {i} reward is {}", o.rewards[i]),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn on_observations(
        &mut self,
        conn: ConnId,
        o: Observations,
        received: Instant,
        reply: Reply,
    ) -> anyhow::Result<()> {
        if let Err((code, text)) = self.check_observations(conn, &o) {
            self.protocol_error(reply, code, text);
            return Ok(());
        }
        self.tally.inference_requests += 1;
        self.metrics.inference_requests.inc();
        let od = self.obs_dim();
        let before = self.book.counters.env_steps;
        let (mut act, mut start) = (Vec::new(), Vec::new());
        let mut ended = Vec::new();
        let slot = self.actors.get_mut(&conn).expect("joined");
        for (i, track) in slot.envs.iter_mut().enumerate() {
            let f = o.flags[i];
            let obs = &o.obs[i * od..(i + 1) * od];
            if track.episode.is_none() || f & flags::IDLE != 0 {
                start.push(i as u32);
                continue;
            }
            if f & flags::FRESH != 0 || track.prev_obs.is_empty() {
                track.prev_obs.clear();
                track.prev_obs.extend_from_slice(obs);
                act.push(i as u32);
                continue;
            }
            let terminated = f & flags::TERMINATED != 0;
            self.agent.observe(&Transition {
                obs: &track.prev_obs,
                action: &track.prev_action,
                reward: o.rewards[i],
                next_obs: obs,
                terminated,
            });
            self.book.counters.env_steps += 1;
            track.ret += f64::from(o.rewards[i]);
            track.len += 1;
            if terminated || f & flags::TRUNCATED != 0 {
                ended.push((
                    i as u32,
                    track.episode.take().expect("running"),
                    track.ret,
                    track.len,
                ));
                *track = EnvTrack::default();
                start.push(i as u32);
            } else {
                track.prev_obs.clear();
                track.prev_obs.extend_from_slice(obs);
                act.push(i as u32);
            }
        }
        let n = self.book.counters.env_steps - before;
        self.tally.transitions += n;
        self.metrics.env_steps.inc_by(n);
        self.metrics.transitions_ingested.inc_by(n);
        for (env, episode, ret, len) in ended {
            self.finish_episode(conn, env, episode, ret, len)?;
        }
        if act.is_empty() && !self.ledger.available() && self.ledger.held_by(conn) == 0 {
            // Nothing to play until an episode is re-issued or the run ends.
            let slot = self.actors.get_mut(&conn).expect("joined");
            slot.parked = Some(Parked::Actions { seq: o.seq, reply });
            return Ok(());
        }
        let super::Mode::Seed(b) = &mut self.mode else {
            unreachable!("observations are routed to seed runs only");
        };
        b.push(Pending {
            conn,
            seq: o.seq,
            received,
            reply,
            act,
            start,
        });
        Ok(())
    }

    /// Runs inference for the pending requests when the batching policy
    /// says so, answers them, then trains on the new transitions.
    pub(super) fn maybe_infer(&mut self) -> anyhow::Result<()> {
        let actors = self.actors.len();
        let super::Mode::Seed(b) = &mut self.mode else {
            return Ok(());
        };
        if !b.ready(&self.book.cfg.distributed, Instant::now(), actors) {
            return Ok(());
        }
        let n = b.envs();
        let pending = b.take();
        let (od, ad) = (self.obs_dim(), self.act_dim());
        let mut obs = Vec::with_capacity(n * od);
        for p in &pending {
            let slot = &self.actors[&p.conn];
            for &i in &p.act {
                obs.extend_from_slice(&slot.envs[i as usize].prev_obs);
            }
        }
        let mut actions = vec![0f32; n * ad];
        self.agent
            .act_batch(&obs, n, self.book.counters.env_steps, &mut actions);
        self.metrics.inference_batch_size.observe(n as f64);
        let version = self.agent.train_steps();
        let mut row = 0;
        for p in pending {
            let Some(n_envs) = self.actors.get(&p.conn).map(|s| s.n_envs as usize) else {
                continue;
            };
            let mut out = vec![0f32; n_envs * ad];
            let slot = self.actors.get_mut(&p.conn).expect("checked");
            for &i in &p.act {
                let a = &actions[row * ad..(row + 1) * ad];
                out[i as usize * ad..(i as usize + 1) * ad].copy_from_slice(a);
                let prev = &mut slot.envs[i as usize].prev_action;
                prev.clear();
                prev.extend_from_slice(a);
                row += 1;
            }
            let starts = self.issue(p.conn, &p.start);
            let _ = p.reply.send(Message::Actions(wire::Actions {
                seq: p.seq,
                policy_version: version,
                actions: out,
                starts,
            }));
            self.metrics
                .inference_latency
                .observe(p.received.elapsed().as_secs_f64());
        }
        let before = self.trained_upto;
        self.train_pending();
        self.book.after_steps(before, self.agent.as_ref())?;
        Ok(())
    }
}
