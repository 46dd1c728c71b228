//! The steps of an actor's life in a run, as the [`Core`] takes them:
//! admitted (a slot, its session), welcomed (the assignment, the network,
//! its episodes, the weights), acknowledged (newer weights only when its
//! own are older: one copy per version shared by every message), released
//! (its unfinished episodes go to others).

use super::{ActorSlot, Core, stop_message};
use crate::vocab::ConnId;
use crate::vocab::Reply;
use rlfleet_learning::agents::Weights;
use rlfleet_shared::config::WorkflowKind;
use rlfleet_shared::wire::{self, EpisodeStart, Hello, Message, WeightsMsg};

impl Core {
    /// Enters an actor into the run's table (envs clamped to the run's
    /// maximum).
    pub fn admit(&mut self, conn: ConnId, hello: Hello) {
        let n_envs = hello
            .env_capacity
            .clamp(1, self.cfg().distributed.max_envs_per_actor);
        let index = self.next_index;
        self.next_index += 1;
        tracing::info!(
            run = %self.id,
            actor = %hello.actor_id,
            session = hello.session_id,
            n_envs,
            index,
            "actor joined"
        );
        self.sessions.insert(conn, hello.session_id);
        self.actors.insert(
            conn,
            ActorSlot {
                index,
                actor_id: hello.actor_id,
                session_id: hello.session_id,
                n_envs,
                sent_version: None,
                parked: None,
            },
        );
    }

    /// Takes `conn` out of the table; its unfinished episodes go back to
    /// the ledger. `None` if it was not in the run; else how many went back.
    pub fn release(&mut self, conn: ConnId) -> Option<usize> {
        let slot = self.actors.remove(&conn)?;
        let requeued = self.ledger().release(conn);
        if let Some(frames) = &mut self.frames {
            frames.forget(conn);
        }
        // Its unfinished episodes will be played again from their start.
        let mut abandoned = 0;
        self.episode_steps.retain(|&(c, _), n| {
            let keep = c != conn || *n < 0;
            if !keep {
                abandoned += *n as u64;
            }
            keep
        });
        self.abandon(abandoned);
        tracing::info!(
            run = %self.id,
            actor = %slot.actor_id,
            requeued,
            "actor left; its unfinished episodes go to others"
        );
        Some(requeued)
    }

    /// The assignment for a newly admitted actor, with an episode for each
    /// of its envs that can get one (and the weights, `with_weights`).
    pub fn welcome(&mut self, conn: ConnId, with_weights: bool) -> Message {
        let all: Vec<u32> = (0..self.actors[&conn].n_envs).collect();
        let starts = self.issue(conn, &all);
        self.welcome_with(conn, with_weights, starts)
    }

    /// [`Core::welcome`] with the episode starts already issued.
    pub fn welcome_with(
        &mut self,
        conn: ConnId,
        with_weights: bool,
        starts: Vec<EpisodeStart>,
    ) -> Message {
        let weights = with_weights.then(|| self.weights_msg());
        let epsilon = self.epsilon_of(conn);
        let slot = self.actors.get_mut(&conn).expect("joined");
        slot.sent_version = weights.as_ref().map(|w| w.version);
        let (index, n_envs) = (slot.index, slot.n_envs);
        let cfg = &self.book.cfg;
        let source = cfg.env_source();
        Message::Welcome(wire::Welcome {
            run_id: self.id.clone(),
            workflow: cfg.workflow,
            env_id: cfg.env.clone(),
            env_kwargs: source.kwargs_json,
            env_wrappers: source.wrappers,
            python_path: source.python_path,
            obs_dim: self.spec.obs_dim() as u32,
            obs_shape: self.spec.obs_shape.iter().map(|&d| d as u32).collect(),
            obs_u8: self.spec.obs_dtype.is_bytes(),
            frame_stack: cfg.frame_stack.max(1),
            action_dim: self.spec.action_space.flat_dim() as u32,
            action_n: self.spec.action_space.n().unwrap_or(0) as u32,
            agent: cfg.agent,
            hidden: cfg.policy_hidden().to_vec(),
            dueling: cfg.dueling(),
            torso: cfg.torso(&self.spec).as_ref().map(wire::TorsoMsg::new),
            core: wire::core_msg(cfg.model.core()),
            onnx: self.onnx.clone(),
            n_envs,
            seed: cfg.seed ^ (u64::from(index) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            batch_step_frequency: cfg.distributed.batch_step_frequency,
            steps_per_round: cfg.distributed.steps_per_round,
            env_step_timeout_secs: cfg.distributed.env_step_timeout_secs,
            in_flight: self.in_flight,
            epsilon,
            weights,
            weights_may_trail: cfg.workflow != WorkflowKind::Sync
                && cfg.distributed.max_policy_lag.is_none(),
            starts,
        })
    }

    /// The latest weights: copied out of the agent once per version, the
    /// copy shared by every message that carries them.
    pub fn weights_msg(&mut self) -> WeightsMsg {
        let version = self.agent.train_steps();
        if self.weights.as_ref().is_none_or(|w| w.version != version) {
            let Weights { version, data } = self.agent.weights();
            self.weights = Some(WeightsMsg {
                version,
                data: data.into(),
            });
        }
        self.weights.clone().expect("just set")
    }

    /// An `Ack`, with the weights when the actor's are older.
    pub fn ack(
        &mut self,
        conn: ConnId,
        seq: u64,
        duplicate: bool,
        starts: Vec<EpisodeStart>,
    ) -> Message {
        let version = self.agent.train_steps();
        let stale = self
            .actors
            .get(&conn)
            .is_some_and(|s| s.sent_version != Some(version));
        let weights = stale.then(|| self.weights_msg());
        if let (Some(w), Some(slot)) = (&weights, self.actors.get_mut(&conn)) {
            slot.sent_version = Some(w.version);
        }
        Message::Ack(wire::Ack {
            seq,
            duplicate,
            weights,
            weights_apart: None,
            epsilon: self.epsilon_of(conn),
            starts,
            full: false,
        })
    }

    /// Replies `Stop` to every request held back.
    pub fn stop_parked(&mut self, reason: &str) {
        let held: Vec<Reply> = self
            .actors
            .values_mut()
            .filter_map(|slot| slot.parked.take().map(|p| p.reply))
            .collect();
        for reply in held {
            self.reply(reply, stop_message(reason));
        }
    }
}
