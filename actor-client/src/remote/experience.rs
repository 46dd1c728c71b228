//! The experience workflows on the actor (`async`, `sync`, `nb-async`,
//! `async-window`, `rma`, `rma-queue-pop-all`, `random`, `orchestrated`,
//! `ml-*`): act with local weights and send a batch every
//! `batch_step_frequency` steps or at an episode end (`steps_per_round`
//! steps, episode ends included, for `sync`). Up to `in_flight` batches may
//! be unacknowledged while the actor keeps playing ([`Flight`]); replies
//! arrive in order and carry newer weights and episodes. Over QUIC the
//! weights come on a stream of their own; unless the run says otherwise
//! (`Welcome.weights_may_trail`) the actor plays on while they are on their
//! way and loads them when they land. A batch the learner's pool refused
//! (full) is sent again, in order, after a pause.

use super::flight::{Acked, Flight};
use super::{Carry, Link, Player, SessionEnd, answer};
use crate::envs::EnvSlots;
use rlfleet_shared::config::WorkflowKind;
use rlfleet_shared::env::newest;
use rlfleet_shared::policy::ActorPolicy;
use rlfleet_shared::wire::{
    EpisodeResult, Experience, Message, Steps, Submission, WeightsApart, Welcome, WorkRequest,
};
use std::time::Duration;

/// Everything one run's experience loop works with.
struct Play<'a, L> {
    player: &'a Player,
    link: &'a mut L,
    session_id: u64,
    carry: &'a mut Carry,
    envs: EnvSlots,
    policy: ActorPolicy,
    flight: Flight,
    /// Env steps per batch.
    every: usize,
    /// `sync`: a batch runs through episode ends.
    sync: bool,
    /// Observations travel as uint8 (`Welcome.obs_u8`).
    obs_u8: bool,
    /// The run's `frame_stack`: the policy acts on stacks, batches carry
    /// each step's newest frame only.
    stack: usize,
    /// Scratch for one step: the running envs, their observations, the
    /// policy's actions.
    running: Vec<usize>,
    obs: Vec<f32>,
    actions: Vec<f32>,
    /// With a recurrent core: the state each running env that begins a
    /// run acts from (`state_len` values per running env; the others'
    /// unused).
    acted_from: Vec<f32>,
    /// Each env's runs of the batch being played (one env's steps stay
    /// together, each observation once: see [`Steps`]).
    per_env: Vec<Steps>,
    /// `Welcome.weights_may_trail`: act on while announced weights are on
    /// their way.
    may_trail: bool,
    /// The first weights stream announced in this run: weights from
    /// earlier streams belong to another run.
    apart_from: Option<u64>,
}

/// How long an actor whose weights may trail waits for the weights an
/// `Ack` announced before it acts on without them. They are sent ahead of
/// the `Ack`, so on a link that loses nothing they have landed already;
/// one of their datagrams lost costs a round trip, which the actor then
/// spends playing.
const LANDING_GRACE: Duration = Duration::from_millis(5);

pub(super) async fn play_experience<L: Link>(
    player: &Player,
    link: &mut L,
    w: &Welcome,
    session_id: u64,
    carry: &mut Carry,
) -> anyhow::Result<SessionEnd> {
    let mut envs = match EnvSlots::new(w, player.env_factory.as_ref()) {
        Ok(envs) => envs,
        Err(e) => return Ok(SessionEnd::Cannot(format!("{e:#}"))),
    };
    let mut policy = ActorPolicy::for_welcome(w, envs.spec()).map_err(anyhow::Error::msg)?;
    let ort = player.inference.uses_ort(w);
    tracing::info!(
        net = %policy.net().describe(),
        backend = if ort { "onnx-runtime" } else { "plain-rust" },
        "policy network"
    );
    if ort {
        let net = policy.net().clone();
        let forward = crate::ort_net::OrtForward::new(&w.onnx, net)?;
        policy = policy
            .with_forward(Box::new(forward))
            .map_err(anyhow::Error::msg)?;
    }
    if let Some(weights) = &w.weights {
        policy
            .load(weights.version, &weights.data)
            .map_err(anyhow::Error::msg)?;
    }
    policy.set_exploration(w.epsilon);
    envs.start(&w.starts)?;
    let sync = w.workflow == WorkflowKind::Sync;
    let every = if sync {
        w.steps_per_round
    } else {
        w.batch_step_frequency
    } as usize;
    let flight = Flight::new(w.in_flight, envs.slots.len());
    let mut play = Play {
        player,
        link,
        session_id,
        carry,
        envs,
        policy,
        flight,
        every,
        sync,
        obs_u8: w.obs_u8,
        stack: w.frame_stack.max(1) as usize,
        running: Vec::new(),
        obs: Vec::new(),
        actions: Vec::new(),
        acted_from: Vec::new(),
        per_env: Vec::new(),
        may_trail: w.weights_may_trail,
        apart_from: None,
    };
    // Batches the previous session sent but never saw acknowledged.
    let resend = match play.carry.pending.take() {
        Some((run, pending)) if run == w.run_id => pending,
        _ => Vec::new(),
    };
    let result = play.run(resend).await;
    let pending = play.flight.unacknowledged();
    if !pending.is_empty() {
        play.carry.pending = Some((w.run_id.clone(), pending));
    }
    result
}

impl<L: Link> Play<'_, L> {
    async fn send(&mut self, s: Submission) -> Result<(), SessionEnd> {
        // The flight keeps the batch until it is acknowledged; the copy
        // shares its steps.
        self.flight.sent(s.clone());
        self.link
            .send(s.into_message())
            .await
            .map_err(SessionEnd::Lost)
    }

    fn any_running(&self) -> bool {
        self.envs.slots.iter().any(|s| s.episode.is_some())
    }

    /// Sends the batches of `resend` again (under their original keys;
    /// requests for work are moot in a new session), then plays and sends
    /// until the learner stops the run or the link goes.
    async fn run(&mut self, resend: Vec<Submission>) -> anyhow::Result<SessionEnd> {
        for s in resend {
            let Submission::Batch(mut e) = s else {
                continue;
            };
            e.idle_envs.clear();
            self.carry.report.batches_resent += 1;
            if let Err(end) = self.send(Submission::Batch(e)).await {
                return Ok(end);
            }
        }
        let mut pause = Duration::from_millis(1);
        loop {
            // Take replies while the window is full, while there is
            // nothing to play and replies are due, and before sending
            // refused batches again.
            while self.flight.must_take_reply(self.any_running()) {
                let m = match answer(self.link.recv().await)? {
                    Ok(m) => m,
                    Err(end) => return Ok(end),
                };
                if let Some(apart) = self.on_reply(m)? {
                    let grace = self.may_trail.then_some(LANDING_GRACE);
                    if let Err(why) = self.link.await_weights(apart, grace).await {
                        return Ok(SessionEnd::Lost(why));
                    }
                }
            }
            if self.flight.resend_due() {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
                for e in self.flight.take_refused() {
                    if let Err(end) = self.send(e).await {
                        return Ok(end);
                    }
                }
                continue;
            }
            pause = Duration::from_millis(1);
            // Weights that landed apart, once before each batch (not after
            // each of several replies taken in a row).
            self.load_landed()?;
            let (batch, finished) = self.play_batch()?;
            let faults = self.envs.take_faults();
            let idle = self.flight.report_idle(self.envs.idle());
            if batch.is_empty() && idle.is_empty() && faults.is_empty() && self.flight.awaiting() {
                // Nothing to report: wait for the replies due.
                continue;
            }
            let report = &mut self.carry.report;
            self.carry.seq += 1;
            report.env_steps += batch.len() as u64;
            report.episodes += finished.len() as u64;
            if !batch.is_empty() {
                report.batches_sent += 1;
            }
            let (actor_id, session_id, seq) = (
                self.player.actor_id.clone(),
                self.session_id,
                self.carry.seq,
            );
            let last = !self.any_running();
            let s = if batch.is_empty() {
                Submission::Ask(WorkRequest {
                    actor_id,
                    session_id,
                    seq,
                    faults,
                    idle_envs: idle,
                    last,
                })
            } else {
                Submission::Batch(Experience {
                    actor_id,
                    session_id,
                    seq,
                    policy_version: self.policy.version(),
                    last,
                    steps: batch.into(),
                    finished,
                    faults,
                    idle_envs: idle,
                })
            };
            if let Err(end) = self.send(s).await {
                return Ok(end);
            }
        }
    }

    /// Steps every running env with the local policy for one batch (up to
    /// an episode end, except in `sync`), each env's steps as runs: the
    /// observation its first action was chosen for, then each step's
    /// outcome. An env that raises loses its episode's steps in this
    /// batch.
    fn play_batch(&mut self) -> anyhow::Result<(Steps, Vec<EpisodeResult>)> {
        let envs = &mut self.envs;
        let (od, ad, n) = (envs.obs_dim, envs.act_dim, envs.slots.len());
        let (running, obs, actions) = (&mut self.running, &mut self.obs, &mut self.actions);
        let stack = self.stack;
        // On a link that loses datagrams a batch is not cut at an episode
        // end: the other envs play on to theirs (each exchange costs probe
        // timeouts there).
        let to_the_ends = !self.sync && self.link.losing();
        let per_env = &mut self.per_env;
        per_env.resize_with(n, Steps::default);
        let mut finished = Vec::new();
        for _ in 0..self.every {
            running.clear();
            running.extend((0..n).filter(|&i| envs.slots[i].episode.is_some()));
            if running.is_empty() {
                break;
            }
            obs.clear();
            for &i in running.iter() {
                obs.extend_from_slice(&envs.slots[i].obs);
                if envs.slots[i].len == 0 {
                    // A new episode: a recurrent core starts from zeros.
                    self.policy.reset_slot(i);
                }
            }
            // What each env that begins a run here acts from, sent with
            // the run.
            let state_len = self.policy.net().state_len();
            self.acted_from.resize(running.len() * state_len, 0.0);
            for (k, &i) in running.iter().enumerate() {
                let episode = envs.slots[i].episode.expect("running");
                if state_len > 0 && !per_env[i].continues(episode) {
                    let to = &mut self.acted_from[k * state_len..(k + 1) * state_len];
                    self.policy.state_into(i, to);
                }
            }
            self.policy.act_slots(obs, running, actions);
            let mut ended = false;
            for (k, &i) in running.iter().enumerate() {
                let a = &actions[k * ad..(k + 1) * ad];
                let episode = envs.slots[i].episode.expect("running");
                let first = envs.slots[i].len;
                let Some(step) = envs.step(i, a)? else {
                    // The episode goes back to the learner: its steps here
                    // with it (its earlier runs of this batch ended others).
                    if per_env[i].continues(episode) {
                        per_env[i].drop_last_run(od / stack, ad);
                    }
                    ended = true;
                    continue;
                };
                let slot = &mut envs.slots[i];
                let env = &mut per_env[i];
                if !env.continues(episode) {
                    let seen = newest(&obs[k * od..(k + 1) * od], stack);
                    env.begin(i as u32, episode, first, seen, self.obs_u8);
                    if state_len > 0 {
                        env.run_state(&self.acted_from[k * state_len..(k + 1) * state_len]);
                    }
                }
                env.step(a, step.reward as f32, newest(&slot.obs, stack), self.obs_u8);
                if let Some(&logp) = self.policy.logps().get(k) {
                    env.step_logp(logp);
                }
                if step.done() {
                    env.end(step.terminated);
                    finished.push(EpisodeResult {
                        episode: slot.episode.take().expect("running"),
                        env: i as u32,
                        ret: slot.ret,
                        length: slot.len,
                    });
                    ended = true;
                }
            }
            if ended && !self.sync && !to_the_ends {
                break;
            }
        }
        let mut batch = Steps::default();
        for env in per_env.iter_mut() {
            batch.append(env);
        }
        Ok((batch, finished))
    }

    /// Applies the reply to the oldest batch in flight: newer weights,
    /// the exploration rate, the next episodes. Returns the weights it
    /// announces as sent apart.
    fn on_reply(&mut self, m: Message) -> anyhow::Result<Option<WeightsApart>> {
        let Message::Ack(ack) = m else {
            anyhow::bail!("expected ack, got {}", m.kind());
        };
        if let Acked::Refused { batch } = self.flight.ack(&ack)? {
            if batch {
                self.carry.report.batches_refused += 1;
            }
            return Ok(None);
        }
        if let Some(weights) = &ack.weights {
            anyhow::ensure!(
                weights.version >= self.policy.version(),
                "the learner sent weights version {} after version {}",
                weights.version,
                self.policy.version()
            );
            self.policy
                .load(weights.version, &weights.data)
                .map_err(anyhow::Error::msg)?;
        }
        if let Some(apart) = ack.weights_apart {
            self.apart_from.get_or_insert(apart.stream);
        }
        self.policy.set_exploration(ack.epsilon);
        self.envs.start(&ack.starts)?;
        Ok(ack.weights_apart)
    }

    /// Loads the newest weights of this run that landed apart from their
    /// `Ack`, if newer than the policy's.
    fn load_landed(&mut self) -> anyhow::Result<()> {
        let Some(from) = self.apart_from else {
            return Ok(());
        };
        if let Some(w) = self.link.weights_landed(from, self.policy.version()) {
            self.policy
                .load(w.version, &w.data)
                .map_err(anyhow::Error::msg)?;
        }
        Ok(())
    }
}
