//! `seed` and `seed-a2c` (SEED RL central inference): actors send observations, the
//! inference [`front::Front`] batches them across actors and answers with
//! actions; the run's thread gets what was answered, assembles transitions
//! per (actor, env), records episodes, hands out the next ones and trains.
//! Weights never leave the learner.

mod batcher;
mod core_states;
mod door;
pub mod front;
#[cfg(test)]
mod front_tests;
mod ladder;
pub mod link;
mod request;
mod rows;
mod serve;

use super::core::Core;
use super::input::{Acted, Bypass, Input, Internal};
use super::workflow::Workflow;
use crate::vocab::{ConnId, Reply};
use link::{PolicySnapshot, SeedLink};
use rlfleet_replay::Transition;
use rlfleet_shared::config::AgentKind;
use rlfleet_shared::policy::ActorPolicy;
use rlfleet_shared::wire::flags;
use std::collections::BTreeMap;
use std::sync::{Arc, mpsc};

/// Per-environment state of a `seed` actor (the learner assembles its
/// transitions).
#[derive(Debug, Clone, Default)]
struct EnvTrack {
    episode: Option<u64>,
    /// The observation the last action was chosen for (empty until the
    /// episode's first observation arrives): values, or a uint8 run's
    /// bytes.
    prev_obs: Vec<f32>,
    prev_bytes: Vec<u8>,
    prev_action: Vec<f32>,
    /// The version of the weights that chose `prev_action`.
    prev_version: u64,
    /// Its log-probability under them, from a policy that samples.
    prev_logp: Option<f32>,
    /// With a recurrent core: the state it was chosen from.
    prev_state: Vec<f32>,
    ret: f64,
    len: u32,
}

impl EnvTrack {
    /// The observation an action was just chosen for (as values or as
    /// bytes), that action, and the version of the weights that chose it
    /// with the action's log-probability under them and the state it was
    /// chosen from.
    fn remember(&mut self, obs: &[f32], bytes: &[u8], action: &[f32], acting: Acting<'_>) {
        let (version, logp, state) = acting;
        (self.prev_version, self.prev_logp) = (version, logp);
        self.prev_state.clear();
        self.prev_state.extend_from_slice(state);
        self.prev_obs.clear();
        self.prev_obs.extend_from_slice(obs);
        self.prev_bytes.clear();
        self.prev_bytes.extend_from_slice(bytes);
        self.prev_action.clear();
        self.prev_action.extend_from_slice(action);
    }

    fn remembers(&self) -> bool {
        !self.prev_obs.is_empty() || !self.prev_bytes.is_empty()
    }
}

/// The version of the weights that chose an action, its log-probability
/// under them (from a policy that samples), and the recurrent state it was
/// chosen from (empty without a core).
type Acting<'a> = (u64, Option<f32>, &'a [f32]);

/// The run-thread side of a `seed` run.
#[derive(Debug)]
pub(super) struct Seed {
    link: Arc<SeedLink>,
    /// Every admitted actor's envs.
    tracks: BTreeMap<ConnId, Vec<EnvTrack>>,
}

impl Seed {
    pub fn new(core: &mut Core) -> Seed {
        let w = core.weights_msg();
        let epsilon = core.agent().epsilon(core.env_steps()) as f32;
        Seed {
            link: Arc::new(SeedLink::new(PolicySnapshot {
                version: w.version,
                params: w.data,
                epsilon,
            })),
            tracks: BTreeMap::new(),
        }
    }

    /// Starts tracking the episodes just handed to `conn`'s envs.
    fn track(&mut self, conn: ConnId, starts: &[rlfleet_shared::wire::EpisodeStart]) {
        let Some(envs) = self.tracks.get_mut(&conn) else {
            return;
        };
        for s in starts {
            if let Some(track) = envs.get_mut(s.env as usize) {
                *track = EnvTrack {
                    episode: Some(s.episode),
                    ..EnvTrack::default()
                };
            }
        }
    }

    /// Requests the front answered: transitions into replay, finished
    /// episodes recorded, next episodes handed out, then training.
    fn on_acted(&mut self, core: &mut Core, items: Vec<Acted>) -> anyhow::Result<()> {
        for item in items {
            self.ingest_acted(core, item)?;
        }
        let before = core.trained_upto();
        core.train_pending();
        core.after_steps(before);
        let w = core.weights_msg();
        let epsilon = core.agent().epsilon(core.env_steps()) as f32;
        self.link.publish(w.version, w.data, epsilon);
        self.link.batch_done();
        Ok(())
    }

    fn ingest_acted(&mut self, core: &mut Core, item: Acted) -> anyhow::Result<()> {
        let Acted {
            conn,
            obs: o,
            actions,
            version,
            logp,
            states,
        } = item;
        // A uint8 run's observations reach the agent as bytes.
        let bytes = !o.obs_u8.is_empty();
        core.accounts()
            .tally
            .lock()
            .expect("tally lock")
            .inference_requests += 1;
        let Some(envs) = self.tracks.get_mut(&conn) else {
            // The actor left after the front answered it.
            return Ok(());
        };
        // Envs that raised: their episodes go back to the queue.
        for f in &o.faults {
            if let Some(track) = envs.get_mut(f.env as usize)
                && track.episode == Some(f.episode)
            {
                *track = EnvTrack::default();
                core.env_fault(conn, f);
            }
        }
        let (od, ad) = (core.obs_dim(), core.act_dim());
        let before = core.env_steps();
        let mut ended = Vec::new();
        // Values of one env's recurrent state (0 without a core).
        let sl = states.len() / envs.len().max(1);
        for (i, track) in envs.iter_mut().enumerate() {
            let f = o.flags[i];
            // No episode, or its start is still on its way to the actor.
            if track.episode.is_none() || f & flags::IDLE != 0 {
                continue;
            }
            let row = i * od..(i + 1) * od;
            let (obs, raw) = if bytes {
                (&[][..], &o.obs_u8[row])
            } else {
                (&o.obs[row], &[][..])
            };
            let action = &actions[i * ad..(i + 1) * ad];
            let acting = (version, logp.get(i).copied(), &states[i * sl..(i + 1) * sl]);
            if f & flags::FRESH != 0 || !track.remembers() {
                track.remember(obs, raw, action, acting);
                continue;
            }
            let terminated = f & flags::TERMINATED != 0;
            let step = Transition::<'_, u8> {
                episode: track.episode.expect("playing"),
                step: track.len,
                obs: &[],
                action: &track.prev_action,
                reward: o.rewards[i],
                next_obs: &[],
                terminated,
                logp: track.prev_logp,
            };
            // The front may have acted with weights older than the
            // learner's: reported as the policy lag (the step's `logp` lets
            // IMPALA and PPO correct for it).
            let lag = core
                .agent()
                .train_steps()
                .saturating_sub(track.prev_version);
            core.policy_lag(lag);
            if !track.prev_state.is_empty() {
                let episode = track.episode.expect("playing");
                core.agent_mut().acted_from(episode, &track.prev_state);
            }
            if bytes {
                core.agent_mut()
                    .observe_bytes(&step.with_obs(&track.prev_bytes, raw));
            } else {
                core.agent_mut()
                    .observe(&step.with_obs(&track.prev_obs, obs));
            }
            core.count_env_step();
            core.steps_ingested(conn, track.episode.expect("playing"), 1, true, false);
            track.ret += f64::from(o.rewards[i]);
            track.len += 1;
            if terminated || f & flags::TRUNCATED != 0 {
                let episode = track.episode.take().expect("running");
                ended.push((i as u32, episode, track.ret, track.len));
                *track = EnvTrack::default();
            } else {
                track.remember(obs, raw, action, acting);
            }
        }
        let n = core.env_steps() - before;
        core.accounts()
            .tally
            .lock()
            .expect("tally lock")
            .transitions += n;
        core.metrics().env_steps.inc_by(n);
        core.metrics().transitions_ingested.inc_by(n);
        for (env, episode, ret, len) in ended {
            core.finish_episode(conn, env, episode, ret, len)?;
        }
        self.reissue_idle(core, conn);
        Ok(())
    }

    /// Hands episodes to `conn`'s envs that have none; the front delivers
    /// them with its next answer.
    fn reissue_idle(&mut self, core: &mut Core, conn: ConnId) {
        let Some(envs) = self.tracks.get(&conn) else {
            return;
        };
        let idle: Vec<u32> = (0..envs.len() as u32)
            .filter(|&i| envs[i as usize].episode.is_none())
            .collect();
        if idle.is_empty() || !core.ledger().available() {
            return;
        }
        let starts = core.issue(conn, &idle);
        self.track(conn, &starts);
        self.link.deliver(conn, starts);
    }
}

impl Workflow for Seed {
    fn bypass(
        &mut self,
        core: &Core,
        run: &mpsc::SyncSender<Input>,
        rt: &tokio::runtime::Handle,
    ) -> Option<Arc<dyn Bypass>> {
        let (tx, rx) = tokio::sync::mpsc::channel(core.max_actors().max(1));
        let cfg = core.cfg();
        let policy = ActorPolicy::new(
            core.spec(),
            cfg.agent,
            cfg.policy_net(core.spec()),
            cfg.dueling(),
            cfg.seed ^ 0x5eed_f407,
        );
        // Large networks answer in one libtorch forward pass per batch on
        // the learner's device; small MLPs from the plain-Rust copy.
        let policy =
            rlfleet_learning::nets::place(policy, cfg.distributed.seed_inference, "seed inference");
        let front = front::Front::new(
            self.link.clone(),
            rx,
            run.clone(),
            core.metrics().clone(),
            cfg.distributed.clone(),
            (core.obs_dim(), core.act_dim()),
            policy,
        )
        .u8_observations(core.shapes().obs_u8)
        .frame_stack(cfg.frame_stack as usize)
        .ladder((cfg.agent == AgentKind::R2d2).then(|| cfg.r2d2.clone()));
        rt.spawn(front.serve());
        Some(Arc::new(door::FrontDoor(tx)))
    }

    fn join(&mut self, core: &mut Core, conn: ConnId, reply: Reply) -> anyhow::Result<()> {
        let n_envs = core.actor(conn).expect("admitted").n_envs;
        self.tracks
            .insert(conn, vec![EnvTrack::default(); n_envs as usize]);
        let all: Vec<u32> = (0..n_envs).collect();
        let starts = core.issue(conn, &all);
        self.track(conn, &starts);
        let welcome = core.welcome_with(conn, false, starts);
        self.link.admit(conn, n_envs);
        core.reply(reply, welcome);
        Ok(())
    }

    fn left(&mut self, core: &mut Core, conn: ConnId, requeued: usize) -> anyhow::Result<()> {
        self.link.forget(conn);
        self.tracks.remove(&conn);
        if requeued > 0 {
            let conns: Vec<ConnId> = self.tracks.keys().copied().collect();
            for c in conns {
                self.reissue_idle(core, c);
            }
        }
        Ok(())
    }

    fn takes_experience(&self) -> bool {
        false
    }

    fn internal(&mut self, core: &mut Core, ev: Internal) -> anyhow::Result<()> {
        if let Internal::Acted(items) = ev {
            self.on_acted(core, items)?;
        }
        Ok(())
    }

    fn stop(&mut self, core: &mut Core, reason: &str) -> anyhow::Result<()> {
        self.link.end(reason);
        core.record_front(self.link.tally.figures());
        Ok(())
    }
}
