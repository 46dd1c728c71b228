//! The `rma` family: `rma`, `rma-queue-pop-all` and the multi-learner
//! `ml-rma`, `ml-rma-queue`, `ml-rma-queue-short`. Actors deposit batches
//! one-sidedly into their [`Pools`] on the learner (taken in the transport's
//! task, without the run thread); the run thread pops them when it is ready
//! to train — one per pool per round (`rma`), every pending batch of the
//! next actor through the fetcher thread (`rma-queue-pop-all`), or one per
//! learner as the [`select::Selector`] says (`ml-*`) — and publishes the
//! weights deposits read.

mod deposit;
mod fetch;
mod pools;
mod pop;
mod select;

pub use pools::Pools;

use super::core::Core;
use super::input::{Bypass, Input, Internal, Popped};
use super::workflow::Workflow;
use crate::vocab::DropReason;
use crate::vocab::{ConnId, Reply};
use crate::workflows::StopReason;
use pools::PoolRules;
use pools::{Inner, Recorded};
use rlfleet_shared::config::{DataStructure, Overflow, WorkflowKind};
use rlfleet_shared::wire::Experience;
use select::Selector;
use std::sync::{Arc, mpsc};
use std::time::Instant;

/// An `rma`-family run's side of the pools.
#[derive(Debug)]
pub(super) struct Rma {
    pools: Arc<Pools>,
    workflow: WorkflowKind,
    /// The multi-learner workflows: which learner takes which batch.
    select: Option<Selector>,
    /// `rma-queue-pop-all`'s fetcher thread.
    fetcher: Option<std::thread::JoinHandle<()>>,
    /// The weights version last published to the pools.
    published_version: u64,
}

impl Rma {
    /// `learners` and `actor_ranks`: the job's learner and actor ranks (the
    /// `ml-*` workflows group actors per learner by them).
    pub fn new(core: &mut Core, learners: usize, actor_ranks: usize) -> Rma {
        let cfg = core.cfg();
        let (w, d) = (cfg.workflow, &cfg.distributed);
        // Lossless queues for the workflows that drain them.
        let queues = w.ends_on_sentinels();
        let rules = PoolRules {
            structure: if queues {
                DataStructure::Queue
            } else {
                d.data_structure
            },
            length: d.data_structure_length as usize,
            overflow: if queues { Overflow::Reject } else { d.overflow },
            shapes: core.shapes(),
            seed: cfg.seed,
        };
        let select = Selector::for_workflow(w, d.window_selector, learners, actor_ranks, cfg.seed);
        let pools = Pools::new(
            rules,
            core.shared_ledger(),
            core.accounts().clone(),
            core.metrics().clone(),
        );
        core.set_in_flight(d.in_flight);
        let epsilon = core.actor_epsilon();
        let weights = core.weights_msg();
        let published_version = weights.version;
        pools.publish(weights, epsilon);
        // Resumed: what the checkpoint had accepted is refused again.
        pools.restore_seqs(core.trained_seqs());
        Rma {
            pools: Arc::new(pools),
            workflow: w,
            select,
            fetcher: None,
            published_version,
        }
    }

    /// Trains on batches taken from the pools (each `ml-*` batch goes to
    /// the replay of the learner that took it) and publishes the weights
    /// deposits will read.
    fn train(
        &mut self,
        core: &mut Core,
        batches: Vec<(Option<usize>, ConnId, Arc<Experience>)>,
    ) -> anyhow::Result<()> {
        if batches.is_empty() {
            return Ok(());
        }
        ingest_all(core, batches)?;
        let epsilon = core.actor_epsilon();
        if core.agent().train_steps() != self.published_version {
            let w = core.weights_msg();
            self.published_version = w.version;
            self.pools.publish(w, epsilon);
        } else {
            self.pools.epsilon(epsilon);
        }
        Ok(())
    }

    fn train_popped(&mut self, core: &mut Core, popped: Popped) -> anyhow::Result<()> {
        let batches = popped.into_iter().map(|(c, e)| (None, c, e)).collect();
        self.train(core, batches)
    }

    /// Writes out the episode ends the deposits recorded.
    fn record_finished(&self, core: &mut Core) -> anyhow::Result<()> {
        record(core, self.pools.take_recorded())
    }

    /// Takes everything left in the pools, each batch with the learner it
    /// goes to (`ml-*`: its actor's group's).
    fn drain_routed(&self, g: &mut Inner) -> Routed {
        let drained = self.pools.drain(g);
        drained
            .into_iter()
            .map(|(conn, e)| {
                let learner = self
                    .select
                    .as_ref()
                    .map(|s| g.pools.get(&conn).map_or(0, |p| s.group_of(p.index)));
                (learner, conn, e)
            })
            .collect()
    }
}

/// Batches, each with the learner that trains it (`ml-*`).
type Routed = Vec<(Option<usize>, ConnId, Arc<Experience>)>;

/// Trains batches taken out of the pools.
fn ingest_all(core: &mut Core, batches: Routed) -> anyhow::Result<()> {
    // An episode re-issued at a deposit is let go of by the agent before
    // any step of its new play reaches it (`rma-queue-pop-all`'s sets are
    // trained without `work` having settled first).
    core.settle_reissued();
    for (learner, conn, e) in batches {
        if let Some(l) = learner {
            core.agent_mut().route_to(l);
        }
        core.ingest(conn, &e, true)?;
    }
    Ok(())
}

/// Writes out episode ends and env faults the deposits recorded; the
/// runs the pools lost will never reach the agent.
fn record(core: &mut Core, recorded: Recorded) -> anyhow::Result<()> {
    let Recorded {
        faults,
        finished,
        lost,
    } = recorded;
    // Before the ends: an episode re-issued at a deposit may have ended
    // since, in its new play.
    core.settle_reissued();
    for (episode, steps) in lost {
        core.steps_lost(episode, steps);
    }
    for (conn, f) in faults {
        // Re-queued at deposit; the steps ingested so far are abandoned.
        core.fault_ingested(conn, f.episode);
        core.count_fault(conn, &f, true);
    }
    for f in finished {
        core.episode_counted(f.conn, f.episode, f.length);
        core.record_episode(f.actor, f.episode, f.ret, f.length)?;
    }
    Ok(())
}

impl Workflow for Rma {
    fn bypass(
        &mut self,
        _core: &Core,
        run: &mpsc::SyncSender<Input>,
        _rt: &tokio::runtime::Handle,
    ) -> Option<Arc<dyn Bypass>> {
        self.pools.set_wake(run.clone());
        if self.workflow == WorkflowKind::RmaQueuePopAll {
            let (pools, run) = (self.pools.clone(), run.clone());
            self.fetcher = Some(
                std::thread::Builder::new()
                    .name("rma fetcher".into())
                    .spawn(move || pools.fetch_loop(run))
                    .expect("spawn the fetcher thread"),
            );
        }
        Some(self.pools.clone())
    }

    fn join(&mut self, core: &mut Core, conn: ConnId, reply: Reply) -> anyhow::Result<()> {
        let welcome = core.welcome(conn, true);
        let slot = &core.actor(conn).expect("admitted");
        let version = slot.sent_version.unwrap_or(0);
        let actor = (slot.actor_id.as_str(), slot.session_id);
        self.pools
            .admit(conn, slot.index, actor, slot.n_envs, version);
        core.reply(reply, welcome);
        Ok(())
    }

    fn left(&mut self, core: &mut Core, conn: ConnId, requeued: usize) -> anyhow::Result<()> {
        self.pools.forget(conn);
        if requeued > 0 {
            core.serve_parked();
            self.pools.serve_parked();
        }
        Ok(())
    }

    fn takes_experience(&self) -> bool {
        false
    }

    fn internal(&mut self, core: &mut Core, ev: Internal) -> anyhow::Result<()> {
        match ev {
            Internal::Wake => self.pools.woken(),
            Internal::Fetched(set) => {
                // The fetcher may take the next set now, while this trains.
                self.pools.fetched_taken();
                self.train_popped(core, set)?;
            }
            Internal::Acted(_) => {}
        }
        Ok(())
    }

    fn work(&mut self, core: &mut Core, _now: Instant) -> anyhow::Result<bool> {
        self.record_finished(core)?;
        if self.workflow == WorkflowKind::RmaQueuePopAll {
            // Its fetcher hands sets over as `Internal::Fetched`.
            return Ok(false);
        }
        let batches: Vec<_> = match &mut self.select {
            Some(select) => self
                .pools
                .pop_for_learners(select)
                .into_iter()
                .map(|(l, c, e)| (Some(l), c, e))
                .collect(),
            None => self
                .pools
                .pop_round()
                .into_iter()
                .map(|(c, e)| (None, c, e))
                .collect(),
        };
        let busy = !batches.is_empty();
        self.train(core, batches)?;
        Ok(busy)
    }

    /// `rma-queue-pop-all` and `ml-rma-queue` end on their actors'
    /// sentinels and empty pools once every episode has finished;
    /// `ml-rma-queue-short` ends when one learner's actor group is
    /// exhausted.
    fn poll_stop(&mut self, _core: &Core, book: Option<StopReason>) -> Option<StopReason> {
        if self.workflow == WorkflowKind::MlRmaQueueShort
            && let Some(select) = &self.select
            && let Some(learner) = self.pools.exhausted_group(select)
        {
            return Some(StopReason::GroupExhausted { learner });
        }
        if book == Some(StopReason::MaxEpisodes)
            && self.workflow.ends_on_sentinels()
            && !self.pools.all_ended()
        {
            return None;
        }
        book
    }

    fn stop(&mut self, core: &mut Core, reason: &str) -> anyhow::Result<()> {
        self.pools.close(reason);
        // A set it took before the close is in the channel once it has
        // ended (trained by `late`).
        if let Some(f) = self.fetcher.take() {
            let _ = f.join();
        }
        self.record_finished(core)?;
        let (left, accepted) = {
            let mut g = self.pools.inner.lock().expect("pools lock");
            (self.drain_routed(&mut g), Pools::accepted_seqs(&g))
        };
        // The final checkpoint keeps the dedup keys (a run stopped for a
        // restart is resumed from it).
        core.set_trained_seqs(accepted);
        if self.workflow == WorkflowKind::MlRmaQueueShort {
            // Its run ends without the rest of the queues.
            let version = core.agent().train_steps();
            for (_, _, e) in left {
                core.accounts().dropped(&e, version, DropReason::RunEnded);
            }
            return Ok(());
        }
        ingest_all(core, left)
    }

    /// Under the pools' lock, so that no deposit lands in between: the
    /// episode ends recorded at deposit are written out and everything
    /// pooled is trained (so that every batch the books count received is
    /// trained or dropped), the dedup keys taken from the pools; then the
    /// checkpoint. While a set `rma-queue-pop-all`'s fetcher took is on
    /// its way to the run thread, the checkpoint waits for it (the
    /// fetcher takes no other meanwhile).
    fn checkpoint(&mut self, core: &mut Core) -> anyhow::Result<bool> {
        if !core.book().checkpoint_due() {
            return Ok(false);
        }
        let pools = self.pools.clone();
        let mut g = pools.inner.lock().expect("pools lock");
        if *pools.fetched_waiting.lock().expect("fetch lock") {
            g.hold_fetch = true;
            return Ok(false);
        }
        g.hold_fetch = false;
        record(core, g.take_recorded())?;
        let left = self.drain_routed(&mut g);
        if !left.is_empty() {
            ingest_all(core, left)?;
            let w = core.weights_msg();
            self.published_version = w.version;
            g.weights = Some(w);
            g.epsilon = core.actor_epsilon();
        }
        core.set_trained_seqs(Pools::accepted_seqs(&g));
        core.checkpoint_if_due()
    }

    fn late(&mut self, core: &mut Core, ev: Internal) -> anyhow::Result<()> {
        if let Internal::Fetched(set) = ev {
            // Taken out of the pools before they closed: trained like the
            // rest of what they held.
            self.train_popped(core, set)?;
        }
        Ok(())
    }
}
