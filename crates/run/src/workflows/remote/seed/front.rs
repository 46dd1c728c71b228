//! [`Front`]: the `seed` inference front. An async task beside the
//! transports (no thread hop per request) that batches `Observations` across
//! actors — up to `inference_max_batch` environments, `inference_max_wait_us`
//! (tokio's timer: millisecond resolution), or at once when every actor is
//! waiting — answers them with epsilon-greedy actions from the run's latest
//! policy, and forwards what it answered to the run's thread, which
//! assembles transitions and trains. So inference never waits behind a
//! gradient step; the run bounds how far it may get ahead of training.
//! Requests reach it through `door.rs`'s `FrontDoor`; `serve.rs` is its
//! loop, the one place that reads the clock (tokio's, so tests run it on
//! a paused clock): every decision here is given `now`.

use super::super::input::{Acted, Input, Internal};
use super::batcher::{Batcher, Pending};
use super::core_states::CoreStates;
use super::ladder::Ladder;
use super::link::SeedLink;
use super::request::check_observations;
use super::rows::{ConnStacks, gather};
use crate::metrics::RunMetrics;
use crate::vocab::{ConnId, Reply};
use crate::workflows::remote::core::refusal;
use rlfleet_shared::config::{DistributedConfig, R2d2Config};
use rlfleet_shared::nets::Rows;
use rlfleet_shared::policy::ActorPolicy;
use rlfleet_shared::wire::{self, ErrorCode, Message, Observations, flags};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;
use tokio::sync::mpsc::Receiver;
use tokio::time::Instant;

/// One `Observations` request, as a session hands it to the front.
#[derive(Debug)]
pub struct Request {
    pub conn: ConnId,
    pub obs: Observations,
    pub received: Instant,
    pub reply: Reply,
}

/// A request with no env to act for (already forwarded to the run),
/// answered once its actor has an episode start.
#[derive(Debug)]
struct Parked {
    conn: ConnId,
    seq: u64,
    n_envs: usize,
    reply: Reply,
}

/// The front of one `seed` run.
pub struct Front {
    pub(super) link: Arc<SeedLink>,
    pub(super) requests: Receiver<Request>,
    /// The run's thread.
    run: mpsc::SyncSender<Input>,
    metrics: Arc<RunMetrics>,
    pub(super) cfg: DistributedConfig,
    obs_dim: usize,
    act_dim: usize,
    /// Observations arrive as uint8 (`Welcome.obs_u8`).
    obs_u8: bool,
    /// The run's `frame_stack`: requests carry single frames, and each
    /// actor env's stack is kept here (a new connection, a new stack).
    stack: usize,
    stacks: ConnStacks,
    policy: ActorPolicy,
    /// Each actor env's recurrent state (a core's; none without one).
    cores: CoreStates,
    /// Each actor env's exploration rate (R2D2's ladder).
    ladder: Ladder,
    pub(super) batcher: Batcher,
    /// Requests with no env to act for, waiting for an episode start.
    parked: Vec<Parked>,
    /// `Acted` messages sent to the run.
    sent: u64,
    /// Since when a ready batch has been held behind training.
    pub(super) held_since: Option<Instant>,
}

impl Front {
    /// `dims`: the observation and action dimensions.
    pub fn new(
        link: Arc<SeedLink>,
        requests: Receiver<Request>,
        run: mpsc::SyncSender<Input>,
        metrics: Arc<RunMetrics>,
        cfg: DistributedConfig,
        (obs_dim, act_dim): (usize, usize),
        policy: ActorPolicy,
    ) -> Front {
        Front {
            link,
            requests,
            run,
            metrics,
            cfg,
            obs_dim,
            act_dim,
            obs_u8: false,
            stack: 1,
            stacks: ConnStacks::default(),
            cores: CoreStates::new(policy.net().state_len()),
            ladder: Ladder::default(),
            policy,
            batcher: Batcher::default(),
            parked: Vec::new(),
            sent: 0,
            held_since: None,
        }
    }

    /// Requests carry single frames, stacked here `k` deep per actor env
    /// (the run's `frame_stack`).
    pub fn frame_stack(mut self, k: usize) -> Front {
        self.stack = k.max(1);
        self
    }

    /// Observations arrive as uint8 (an image env's): they stay bytes here,
    /// stacked as bytes and handed to the network as bytes (a device
    /// network converts them on its device).
    pub fn u8_observations(mut self, yes: bool) -> Front {
        self.obs_u8 = yes;
        self
    }

    /// Each actor env acts at its own rung of R2D2's exploration ladder
    /// (`None`: every env at the published epsilon).
    pub fn ladder(mut self, rungs: Option<R2d2Config>) -> Front {
        self.ladder = Ladder::new(rungs);
        self
    }

    /// Checks a request and queues it (or parks it, or refuses it).
    pub(super) fn take(&mut self, r: Request) {
        let Request {
            conn,
            mut obs,
            received,
            reply,
        } = r;
        let n_envs = self
            .link
            .conns
            .lock()
            .expect("conns lock")
            .get(&conn)
            .map(|b| b.n_envs as usize);
        let Some(n_envs) = n_envs else {
            self.refuse(
                reply,
                ErrorCode::Unexpected,
                "observations before a welcome into this run".into(),
            );
            return;
        };
        let frame_dim = self.obs_dim / self.stack;
        if let Err((code, text)) = check_observations(&obs, n_envs, frame_dim, self.obs_u8) {
            self.refuse(reply, code, text);
            return;
        }
        if self.stack > 1 {
            let link = &self.link;
            self.stacks
                .stack(conn, &mut obs, (n_envs, self.stack), |c| {
                    link.conns.lock().expect("conns lock").contains_key(c)
                });
        }
        let link = &self.link;
        let (episodes, session) = self.cores.begin(conn, &obs.flags, |c| {
            link.conns.lock().expect("conns lock").contains_key(&c)
        });
        let zeroed = &self.metrics.core_states_zeroed;
        for (cause, n) in [("episode", episodes), ("session", session)] {
            if n > 0 {
                zeroed.with_label_values(&[cause]).inc_by(n);
            }
        }
        self.metrics.inference_requests.inc();
        let done = flags::IDLE | flags::TERMINATED | flags::TRUNCATED;
        let act: Vec<u32> = (0..n_envs as u32)
            .filter(|&i| obs.flags[i as usize] & done == 0)
            .collect();
        if act.is_empty() {
            // Nothing to act for: the run learns of the episode ends now,
            // the actor gets its answer when it has an episode to play.
            self.parked.push(Parked {
                conn,
                seq: obs.seq,
                n_envs,
                reply,
            });
            let forward = Acted {
                conn,
                obs,
                actions: vec![0.0; n_envs * self.act_dim],
                version: self.policy.version(),
                logp: Vec::new(),
                states: Vec::new(),
            };
            self.forward(vec![forward]);
        } else {
            self.batcher.pending.push(Pending {
                conn,
                obs,
                received,
                reply,
                act,
            });
        }
    }

    fn refuse(&self, reply: Reply, code: ErrorCode, text: String) {
        let _ = reply.send(refusal(&self.metrics, code, text));
    }

    fn forward(&mut self, items: Vec<Acted>) {
        self.sent += 1;
        // A closed run is noticed through `link.stop`.
        let _ = self.run.send(Input::Internal(Internal::Acted(items)));
    }

    /// Episode starts waiting for `conn` (`None` once it left).
    fn starts_for(&self, conn: ConnId) -> Option<Vec<wire::EpisodeStart>> {
        let mut conns = self.link.conns.lock().expect("conns lock");
        conns.get_mut(&conn).map(|b| std::mem::take(&mut b.starts))
    }

    /// Answers parked requests whose actor got an episode to play.
    pub(super) fn unpark(&mut self) {
        let parked = std::mem::take(&mut self.parked);
        for p in parked {
            match self.starts_for(p.conn) {
                Some(starts) if !starts.is_empty() => {
                    let _ = p.reply.send(Message::Actions(wire::Actions {
                        seq: p.seq,
                        policy_version: self.policy.version(),
                        actions: vec![0.0; p.n_envs * self.act_dim],
                        starts,
                    }));
                }
                Some(_) if !p.reply.is_closed() => self.parked.push(p),
                // The actor left.
                _ => {}
            }
        }
    }

    /// Serves the waiting requests if a batch is ready at `now` and
    /// training is not too far behind.
    pub(super) fn maybe_serve(&mut self, now: Instant) {
        self.batcher.pending.retain(|p| !p.reply.is_closed());
        let actors = self.link.actors.load(Ordering::Acquire);
        if !self
            .batcher
            .ready(&self.cfg, now, self.parked.len(), actors)
        {
            // Nothing ready (a held batch's actors left): no hold either,
            // so the loop arms the next request's deadline again.
            self.end_hold(now);
            return;
        }
        // Batches answered but not yet ingested and trained on by the run:
        // how far acting may run ahead of training.
        let ahead = u64::from(self.cfg.max_batches_ahead);
        if self.sent - self.link.batches_done.load(Ordering::Acquire) >= ahead {
            // Training is behind; `batch_done` wakes us.
            self.link.front_waits.store(true, Ordering::Release);
            if self.sent - self.link.batches_done.load(Ordering::Acquire) >= ahead {
                self.held_since.get_or_insert(now);
                return;
            }
        }
        self.end_hold(now);
        let snapshot = self.link.policy.lock().expect("policy lock").clone();
        if (snapshot.version != self.policy.version() || !self.policy.has_weights())
            && let Err(e) = self.policy.load(snapshot.version, &snapshot.params)
        {
            tracing::error!("seed front: {e}");
        }
        self.policy.set_exploration(snapshot.epsilon);
        let pending = std::mem::take(&mut self.batcher.pending);
        let (od, ad) = (self.obs_dim, self.act_dim);
        let n: usize = pending.iter().map(|p| p.act.len()).sum();
        let mut chosen = Vec::with_capacity(n * ad);
        let rows = || {
            pending
                .iter()
                .flat_map(|p| p.act.iter().map(move |&i| (p.conn, i)))
        };
        let mut states = self.cores.gather(rows());
        // What each env acts from, for the agent (states advance below).
        let before = states.clone();
        let sl = self.cores.len();
        let eps = self.ladder.epsilons(rows());
        let (bytes, values);
        let obs = if self.obs_u8 {
            bytes = gather(&pending, |p| &p.obs.obs_u8, od);
            Rows::Bytes(&bytes)
        } else {
            values = gather(&pending, |p| &p.obs.obs, od);
            Rows::Values(&values)
        };
        self.policy
            .act_states_eps(obs, n, &mut states, &eps, &mut chosen);
        self.cores.scatter(rows(), &states);
        self.metrics.inference_batch_size.observe(n as f64);
        let mut items = Vec::with_capacity(pending.len());
        // The behaviour policy's log-probabilities, for the agent.
        let chosen_logp = self.policy.logps();
        let mut row = 0;
        let mut waits = Duration::ZERO;
        let answered = pending.len();
        for p in pending {
            let n_envs = p.obs.flags.len();
            let mut actions = vec![0f32; n_envs * ad];
            let mut logp = vec![0f32; if chosen_logp.is_empty() { 0 } else { n_envs }];
            let mut acted_from = vec![0f32; n_envs * sl];
            for &i in &p.act {
                let i = i as usize;
                actions[i * ad..(i + 1) * ad].copy_from_slice(&chosen[row * ad..(row + 1) * ad]);
                if let Some(l) = logp.get_mut(i) {
                    *l = chosen_logp[row];
                }
                acted_from[i * sl..(i + 1) * sl].copy_from_slice(&before[row * sl..(row + 1) * sl]);
                row += 1;
            }
            let starts = self.starts_for(p.conn).unwrap_or_default();
            let _ = p.reply.send(Message::Actions(wire::Actions {
                seq: p.obs.seq,
                policy_version: self.policy.version(),
                actions: actions.clone(),
                starts,
            }));
            let waited = now.saturating_duration_since(p.received);
            waits += waited;
            self.metrics.inference_latency.observe(waited.as_secs_f64());
            items.push(Acted {
                conn: p.conn,
                obs: p.obs,
                actions,
                version: self.policy.version(),
                logp,
                states: acted_from,
            });
        }
        // Counted before the run hears of the batch: its books, read when
        // the run ends, hold every batch it ingested.
        self.link.tally.served(n, answered, waits);
        self.forward(items);
    }

    /// A ready batch is no longer held: the time it was goes to the tally.
    fn end_hold(&mut self, now: Instant) {
        if let Some(since) = self.held_since.take() {
            let held = now.saturating_duration_since(since);
            self.link.tally.stalled(held);
            self.metrics.seed_front_stall.inc_by(held.as_secs_f64());
        }
    }

    /// The run ended: `Stop` for everything waiting and everything queued.
    pub(super) fn stop_all(mut self) {
        let reason = self.link.stop_reason.lock().expect("reason lock").clone();
        let stop = || {
            Message::Stop(wire::Stop {
                reason: reason.clone(),
                shutdown: false,
            })
        };
        let waiting = self.batcher.pending.drain(..).map(|p| p.reply);
        for reply in waiting.chain(self.parked.drain(..).map(|p| p.reply)) {
            let _ = reply.send(stop());
        }
        self.requests.close();
        while let Ok(r) = self.requests.try_recv() {
            let _ = r.reply.send(stop());
        }
    }
}
