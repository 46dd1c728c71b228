//! The learner side of the workflows in which actors feed the learner over
//! a transport: `async`, `nb-async`, `async-window`, `sync`, `rma`,
//! `rma-queue-pop-all`, `random`, `seed`, `seed-a2c`, `orchestrated` and
//! the multi-learner `ml-*` (on the lead learner rank).
//!
//! [`RemoteRun`] is the driver: one thread owns it and runs its loop over
//! [`Input`]s, with the clock (told to the core before each call), the
//! stop rules, the status and the [`Desk`] that performs what the book
//! asks. What every workflow shares is the [`core::Core`] (agent, books,
//! ledger, actors);
//! what one family adds is a [`Workflow`], one file each (`immediate.rs`,
//! `window.rs`, `sync.rs`, `orchestrated.rs`, `seed/`, `rma/`). Transports
//! see a run only as its [`Intake`](crate::vocab::Intake).

mod accounts;
mod checks;
mod core;
mod families;
mod frames;
mod immediate;
mod input;
#[cfg(test)]
mod integrity_tests;
mod ledger;
mod orchestrated;
mod rma;
mod seed;
mod sync;
#[cfg(test)]
mod tests;
mod window;
mod workflow;

pub use self::core::LearnerTime;
pub use accounts::{BATCH_LOG_HEADER, BatchLine};
pub use ledger::{EpisodeLedger, Finish};

use self::core::{Core, stop_message};
use super::desk::Desk;
use super::{RunOptions, RunSummary, StopReason};
use crate::metrics::RunMetrics;
use crate::vocab::DropReason as Drop;
use crate::vocab::{Reply, RunInbox, RunShared, RunState};
use input::{Inbox, Input};
use rlfleet_learning::agents;
use rlfleet_shared::config::{RunConfig, WorkflowKind};
use rlfleet_shared::wire::{ErrorCode, Message, Submission};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use workflow::Workflow;

/// Most inputs handled between two looks at the stop rules.
const MAX_DRAIN: usize = 64;

/// Inputs the run thread's channel holds beyond two per actor (a join or
/// request, and a leave) and `seed`'s answered batches (at most
/// `[distributed] max_batches_ahead` + 1): what the workflow's other
/// helpers may have queued — one `rma` wake-up, the fetcher's set.
const HELPER_INPUTS: usize = 16;

/// How often the status snapshot is refreshed.
const STATUS_PERIOD: Duration = Duration::from_millis(100);

/// A distributed run, ready to take inputs.
pub struct RemoteRun {
    core: Core,
    desk: Desk,
    workflow: Box<dyn Workflow>,
    /// Where the run's inbox delivers (kept until [`RemoteRun::inbox`]).
    sender: mpsc::SyncSender<Input>,
    events: Receiver<Input>,
    last_status: Instant,
    /// What of `core.time` the metrics have.
    time_published: LearnerTime,
}

impl std::fmt::Debug for RemoteRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteRun")
            .field("core", &self.core)
            .finish()
    }
}

impl RemoteRun {
    pub fn new(
        id: &str,
        cfg: &RunConfig,
        opts: &RunOptions,
        metrics: Arc<RunMetrics>,
        shared: Arc<RunShared>,
        max_actors: usize,
    ) -> anyhow::Result<RemoteRun> {
        if !cfg.workflow.is_distributed() {
            anyhow::bail!(
                "workflow `{}` does not run with remote actors",
                cfg.workflow
            );
        }
        let spec = cfg.env_source().spec()?;
        let mut agent = agents::build_agent(cfg, &spec, rlfleet_learning::device::select(1));
        let (mut learners, mut actor_ranks) = (1, 0);
        if let Some(l) = &opts.learners {
            (learners, actor_ranks) = (l.count, l.actor_ranks);
            agent = l.take_agent(agent);
        }
        let (book, desk) = Desk::open(cfg, opts, agent.as_mut())?;
        let mut core = Core::new(id, agent, book, spec, metrics, shared, max_actors)?;
        core.seat(opts.device.clone());
        core.resume(desk.record().map(|r| r.journal()).transpose()?)?;
        if core.book().resumed_from.is_some() {
            // The API's curve holds what the files hold.
            let rows = rlfleet_output::read_episodes(&cfg.output_dir.join("episodes.csv"))
                .unwrap_or_default();
            *core.shared().episodes.lock().expect("episodes lock") = rows
                .into_iter()
                .map(crate::vocab::EpisodeView::from)
                .collect();
        }
        match cfg.workflow {
            WorkflowKind::NbAsync | WorkflowKind::AsyncWindow | WorkflowKind::Orchestrated => {
                core.set_in_flight(cfg.distributed.in_flight);
            }
            WorkflowKind::Random => {
                let epsilon = immediate::fixed_policy(cfg, core.agent_mut())?;
                core.fix_epsilon(epsilon);
            }
            _ => {}
        }
        let workflow = families::build(&mut core, learners, actor_ranks);
        // Bounded by construction: a session has one input queued at most
        // besides its leave, there are at most `max_actors` sessions, and
        // the `seed` front holds back once it is `max_batches_ahead`
        // batches ahead, so a send never blocks.
        let ahead = cfg.distributed.max_batches_ahead as usize + 1;
        let (sender, events) = mpsc::sync_channel(2 * max_actors + ahead + HELPER_INPUTS);
        Ok(RemoteRun {
            core,
            desk,
            workflow,
            sender,
            events,
            last_status: Instant::now(),
            time_published: LearnerTime::default(),
        })
    }

    /// Where transports deliver this run's messages; starts the workflow's
    /// helpers (`seed`'s inference front on `rt`, `rma-queue-pop-all`'s
    /// fetcher).
    pub fn inbox(&mut self, rt: &tokio::runtime::Handle) -> RunInbox {
        Arc::new(Inbox {
            bypass: self.workflow.bypass(&self.core, &self.sender, rt),
            run: self.sender.clone(),
            accounts: self.core.accounts().clone(),
        })
    }

    /// Runs until a stop rule fires, `cancel` fires or every inbox is gone.
    pub fn run(self, cancel: &CancellationToken) -> anyhow::Result<RunSummary> {
        let RemoteRun {
            mut core,
            mut desk,
            mut workflow,
            sender,
            events,
            mut last_status,
            mut time_published,
        } = self;
        // The inboxes and helpers hold the other senders.
        drop(sender);
        // systemd's watchdog is pinged from this loop while the run lasts:
        // a stuck run thread stops the pings. The hold goes however the
        // loop ends (an error included).
        let watchdog = core.shared().watchdog.hold();
        let reason = loop {
            if cancel.is_cancelled() {
                break StopReason::Cancelled;
            }
            desk.step(core.book_mut())?;
            if let Some(why) = core.broken() {
                anyhow::bail!("{why}");
            }
            let book = core.book_mut().poll(Instant::now());
            if let Some(r) = workflow.poll_stop(&core, book) {
                break r;
            }
            // The learner's time: busy in the workflow's calls (ingest,
            // training, answers), waiting between them. Measured here, so
            // that no workflow reads the clock.
            let started = Instant::now();
            core.tell_time(started);
            let busy = workflow.work(&mut core, started)?;
            deliver(&mut core);
            let now = Instant::now();
            core.charge_time(now - started, Duration::ZERO);
            let timeout = if busy {
                Duration::ZERO
            } else {
                workflow.idle_timeout(now)
            };
            let got = events.recv_timeout(timeout);
            if !busy {
                core.charge_time(Duration::ZERO, now.elapsed());
            }
            match got {
                Ok(input) => {
                    let started = Instant::now();
                    core.tell_time(started);
                    handle(&mut core, workflow.as_mut(), input)?;
                    // Take what else is queued (bounded, so that stop
                    // rules and status still run under a steady stream).
                    // A checkpoint that fell due is not put off either.
                    for _ in 0..MAX_DRAIN {
                        if core.book().checkpoint_due() {
                            break;
                        }
                        let Ok(input) = events.try_recv() else { break };
                        core.tell_time(Instant::now());
                        handle(&mut core, workflow.as_mut(), input)?;
                    }
                    core.charge_time(started.elapsed(), Duration::ZERO);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break StopReason::Cancelled,
            }
            // What the run thread stalls for a checkpoint (the `rma` pools
            // and `orchestrated`'s queue handed over, the state copied
            // out); the writer thread does the rest.
            let started = Instant::now();
            core.tell_time(started);
            if workflow.checkpoint(&mut core)? {
                core.metrics()
                    .checkpoint_snapshot
                    .observe(started.elapsed().as_secs_f64());
            }
            deliver(&mut core);
            desk.perform(core.book_mut())?;
            core.charge_time(started.elapsed(), Duration::ZERO);
            if last_status.elapsed() > STATUS_PERIOD {
                last_status = Instant::now();
                core.publish_status(RunState::Running, None, &mut time_published);
                let health = desk.checkpoint_health();
                core.show_checkpoints(&health);
                let c = &core.book().counters;
                let mut status = format!(
                    "run {}: {} env steps, {} episodes",
                    core.id(),
                    c.env_steps,
                    c.episodes
                );
                if let (Some(since), Some(e)) = (health.failing_since, &health.error) {
                    status += &format!(
                        "; checkpoints failing for {:.0} s: {e}",
                        since.elapsed().as_secs_f64()
                    );
                }
                watchdog.ping(Some(&status));
            }
        };
        drop(watchdog);
        let text = reason.to_string();
        core.stop_parked(&text);
        workflow.stop(&mut core, &text)?;
        deliver(&mut core);
        // Inputs that arrived after the end: requests answered `Stop`, and
        // batches among them counted as received and dropped.
        while let Ok(input) = events.try_recv() {
            late(&mut core, workflow.as_mut(), input, &text)?;
        }
        // From here on the inbox sees the run as gone (and counts late
        // batches itself).
        drop(events);
        core.publish_status(RunState::Stopping, Some(text), &mut time_published);
        core.show_checkpoints(&desk.checkpoint_health());
        core.tell_time(Instant::now());
        let books = core.close()?;
        let (book, agent) = core.book_with_agent();
        let summary = desk.finish(book, reason, agent, Some(books))?;
        core.settle(&summary);
        Ok(summary)
    }
}

/// Sends the answers the core queued.
fn deliver(core: &mut Core) {
    for (reply, msg) in core.take_replies() {
        // An actor that left takes no answer.
        let _ = reply.send(msg);
    }
}

/// One input, on the run thread, and the answers it gave.
fn handle(core: &mut Core, workflow: &mut dyn Workflow, input: Input) -> anyhow::Result<()> {
    let handled = take(core, workflow, input);
    deliver(core);
    handled
}

/// [`handle`], before the answers go.
fn take(core: &mut Core, workflow: &mut dyn Workflow, input: Input) -> anyhow::Result<()> {
    match input {
        Input::Join { conn, hello, reply } => {
            core.admit(conn, hello);
            workflow.join(core, conn, reply)
        }
        Input::Left { conn, departed } => {
            let left = match core.release(conn) {
                Some(requeued) => workflow.left(core, conn, requeued),
                None => Ok(()),
            };
            let _ = departed.send(());
            left
        }
        Input::Internal(ev) => workflow.internal(core, ev),
        Input::Request { conn, msg, reply } => {
            if core.actor(conn).is_none() {
                let text = format!("{} before a welcome into run {}", msg.kind(), core.id());
                let _ = reply.send(ErrorCode::Unexpected.message(text));
                return Ok(());
            }
            let s = match Submission::from_message(msg) {
                Ok(s) if workflow.takes_experience() => s,
                Ok(s) => return refuse_misplaced(core, s.kind(), reply),
                Err(other) => return refuse_misplaced(core, other.kind(), reply),
            };
            if let Err((code, text)) = core.accept(conn, &s) {
                core.refuse(reply, code, text);
                return Ok(());
            }
            for f in s.faults() {
                core.env_fault(conn, f);
            }
            workflow.experience(core, conn, s, reply, core.now())
        }
    }
}

/// A message the workflow has no place for.
fn refuse_misplaced(core: &mut Core, kind: &str, reply: Reply) -> anyhow::Result<()> {
    let workflow = core.cfg().workflow;
    let text = format!("`{kind}` messages have no place in workflow `{workflow}`");
    core.refuse(reply, ErrorCode::Unexpected, text);
    Ok(())
}

/// An input that came after the run ended.
fn late(
    core: &mut Core,
    workflow: &mut dyn Workflow,
    input: Input,
    reason: &str,
) -> anyhow::Result<()> {
    match input {
        Input::Internal(ev) => {
            workflow.late(core, ev)?;
            deliver(core);
        }
        Input::Request { msg, reply, .. } => {
            if let Message::Experience(e) = &msg {
                core.accounts().received(e);
                core.accounts()
                    .dropped(e, core.agent().train_steps(), Drop::RunEnded);
            }
            let _ = reply.send(stop_message(reason));
        }
        // Unanswered: the session hears the run ended.
        Input::Join { .. } | Input::Left { .. } => {}
    }
    Ok(())
}
