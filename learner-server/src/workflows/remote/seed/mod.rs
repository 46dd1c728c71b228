//! `seed` and `seed-a2c` (SEED RL central inference): actors send observations, the
//! inference [`front::Front`] batches them across actors and answers with
//! actions; the run's thread gets what was answered, assembles transitions
//! per (actor, env), records episodes, hands out the next ones and trains.
//! Weights never leave the learner.

pub mod front;
pub mod link;

use super::{EnvTrack, Mode, RemoteRun};
use crate::replay::Transition;
use crate::transport::{Acted, ConnId, Event};
use link::SeedLink;
use rlfleet_shared::policy::ActorPolicy;
use rlfleet_shared::wire::flags;
use std::sync::Arc;
use std::sync::mpsc;

impl RemoteRun {
    /// For a `seed` run: spawns its inference front on `rt` and returns
    /// where observations go; `None` for other workflows.
    pub(super) fn start_front(
        &mut self,
        run: mpsc::Sender<Event>,
        rt: &tokio::runtime::Handle,
    ) -> Option<tokio::sync::mpsc::UnboundedSender<Event>> {
        let Mode::Seed(link) = &self.mode else {
            return None;
        };
        let link = link.clone();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let policy = ActorPolicy::new(
            &self.spec,
            self.cfg().agent,
            self.cfg().policy_hidden(),
            self.cfg().dueling(),
            self.cfg().seed ^ 0x5eed_f407,
        );
        let front = front::Front::new(
            link,
            rx,
            run,
            self.metrics.clone(),
            self.cfg().distributed.clone(),
            self.obs_dim(),
            self.act_dim(),
            policy,
        );
        rt.spawn(front.serve());
        Some(tx)
    }

    pub(super) fn seed_link(&self) -> Option<&Arc<SeedLink>> {
        match &self.mode {
            Mode::Seed(link) => Some(link),
            _ => None,
        }
    }

    /// Requests the front answered: transitions into replay, finished
    /// episodes recorded, next episodes handed out, then training.
    pub(super) fn on_acted(&mut self, items: Vec<Acted>) -> anyhow::Result<()> {
        for item in items {
            self.ingest_acted(item)?;
        }
        let before = self.trained_upto;
        self.train_pending();
        self.book.after_steps(before, self.agent.as_ref())?;
        if let Mode::Seed(link) = &self.mode {
            let agent = self.agent.as_ref();
            let epsilon = agent.epsilon(self.book.counters.env_steps) as f32;
            link.publish(agent.train_steps(), || agent.weights().data, epsilon);
            link.batch_done();
        }
        Ok(())
    }

    fn ingest_acted(&mut self, item: Acted) -> anyhow::Result<()> {
        let Acted {
            conn,
            obs: o,
            actions,
        } = item;
        self.accounts
            .tally
            .lock()
            .expect("tally lock")
            .inference_requests += 1;
        let Some(slot) = self.actors.get_mut(&conn) else {
            // The actor left after the front answered it.
            return Ok(());
        };
        let (od, ad) = (self.spec.obs_dim(), self.spec.action_space.flat_dim());
        let before = self.book.counters.env_steps;
        let mut ended = Vec::new();
        for (i, track) in slot.envs.iter_mut().enumerate() {
            let f = o.flags[i];
            // No episode, or its start is still on its way to the actor.
            if track.episode.is_none() || f & flags::IDLE != 0 {
                continue;
            }
            let obs = &o.obs[i * od..(i + 1) * od];
            let action = &actions[i * ad..(i + 1) * ad];
            if f & flags::FRESH != 0 || track.prev_obs.is_empty() {
                track.remember(obs, action);
                continue;
            }
            let terminated = f & flags::TERMINATED != 0;
            self.agent.observe(&Transition {
                episode: track.episode.expect("playing"),
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
            } else {
                track.remember(obs, action);
            }
        }
        let n = self.book.counters.env_steps - before;
        self.accounts.tally.lock().expect("tally lock").transitions += n;
        self.metrics.env_steps.inc_by(n);
        self.metrics.transitions_ingested.inc_by(n);
        for (env, episode, ret, len) in ended {
            self.finish_episode(conn, env, episode, ret, len)?;
        }
        self.reissue_idle(conn);
        Ok(())
    }

    /// Hands episodes to `conn`'s envs that have none; the front delivers
    /// them with its next answer.
    pub(super) fn reissue_idle(&mut self, conn: ConnId) {
        let Some(slot) = self.actors.get(&conn) else {
            return;
        };
        let idle: Vec<u32> = (0..slot.n_envs)
            .filter(|&i| slot.envs[i as usize].episode.is_none())
            .collect();
        if idle.is_empty() || !self.ledger().available() {
            return;
        }
        let starts = self.issue(conn, &idle);
        if let Some(link) = self.seed_link() {
            link.deliver(conn, starts);
        }
    }
}
