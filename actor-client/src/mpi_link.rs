//! An actor as an MPI rank (`actor-client mpi`, feature `mpi`): learn the
//! job's layout, take the mailbox geometry the lead learner broadcasts,
//! take part in allocating its RMA window, then play one run over an
//! [`MpiLink`] — framed messages to and from the lead learner, and for the
//! `rma` workflows batches deposited one-sidedly into this rank's mailbox
//! in the learner's window — and say `bye` before leaving. A simulated
//! failure (`--fail-after-batches`) leaves early with its reason in the
//! `bye`, as a crashed actor would look to the run.

use crate::remote::{Link, Player, run_link};
use rlfleet_shared::mpi::rsmpi::traits::{
    Communicator, Destination, MatchedReceiveVec, Root, Source,
};
use rlfleet_shared::mpi::{
    self, BYE_DONE, Backoff, EnvComm, Geometry, Group, Layout, Role, SimpleCommunicator, TAG_BYE,
    TAG_MESSAGE, Window, mailbox::Mailbox,
};
use rlfleet_shared::wire::{self, Message, WeightsRejoin};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How an actor rank polls: a short spin, then pauses up to half a
/// millisecond.
fn backoff() -> Backoff {
    Backoff::new(64, Duration::from_micros(500))
}

/// One poll's wait: the backoff's pause (at most half a millisecond, on
/// this thread: tokio's timer has millisecond resolution), then a yield to
/// the runtime, so that a session waiting here can still be cancelled.
async fn pause(backoff: &mut Backoff) {
    backoff.wait();
    tokio::task::yield_now().await;
}

/// Messages between this actor rank and the lead learner.
#[derive(Debug)]
pub struct MpiLink {
    window: Window<'static>,
    learner: i32,
    mailbox: Option<Mailbox>,
    max_frame_bytes: u32,
    /// Simulated failure: the link is lost at this batch.
    fail_after: Option<u64>,
    batches: u64,
    /// Weights come in a frame of their own before their message.
    rejoin: WeightsRejoin,
}

impl MpiLink {
    fn comm(&self) -> &'static SimpleCommunicator {
        self.window.comm()
    }
}

impl Link for MpiLink {
    async fn send(&mut self, msg: Message) -> Result<(), String> {
        if let Message::Experience(_) = msg {
            if self.fail_after == Some(self.batches) {
                return Err(format!("simulated failure after {} batches", self.batches));
            }
            self.batches += 1;
        }
        let frame = wire::encode(&msg);
        // Batches and requests for work go the same way, so that their
        // replies keep their order.
        if let (Some(mb), Message::Experience(_) | Message::WorkRequest(_)) = (&self.mailbox, &msg)
        {
            let mut backoff = backoff();
            while !mb.deposit(&self.window, &frame)? {
                pause(&mut backoff).await;
            }
            return Ok(());
        }
        self.comm()
            .process_at_rank(self.learner)
            .send_with_tag(&frame[..], TAG_MESSAGE);
        Ok(())
    }

    async fn recv(&mut self) -> Result<Message, String> {
        let mut backoff = backoff();
        loop {
            // (The probe's handle is not `Send`: it never lives across the
            // pause.)
            let bytes = self
                .comm()
                .process_at_rank(self.learner)
                .immediate_matched_probe_with_tag(TAG_MESSAGE)
                .map(|probed| probed.matched_receive_vec::<u8>().0);
            if let Some(bytes) = bytes {
                let msg = mpi::decode_frame(&bytes, self.max_frame_bytes)
                    .and_then(|m| self.rejoin.join(m))
                    .map_err(|e| e.to_string())?;
                match msg {
                    Some(msg) => return Ok(msg),
                    None => continue,
                }
            }
            pause(&mut backoff).await;
        }
    }
}

/// What `actor-client mpi` was asked.
#[derive(Debug, Clone)]
pub struct MpiActor {
    pub player: Player,
    pub fail_after_batches: Option<u64>,
    /// Ranks each env spans (the run's `ranks_per_env`).
    pub ranks_per_env: u32,
}

/// Runs this rank as an actor of the job and prints how its run went
/// (the report, or why it failed after telling the learner). `Err` only
/// when the rank could not join the job at all.
pub fn run(args: MpiActor, cancel: CancellationToken) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let universe = mpi::init().map_err(anyhow::Error::msg)?;
    // The window borrows the world for as long as it lives: the rest of
    // the process.
    let world: &'static SimpleCommunicator = Box::leak(Box::new(universe.world()));
    let k = args.ranks_per_env;
    let mut layout =
        Layout::exchange(world, Role::Actor, args.player.envs, k).map_err(anyhow::Error::msg)?;
    let Some(learner) = layout.lead_learner() else {
        mpi::abort(
            &format!(
                "no learner rank in this job: `{}`",
                rlfleet_shared::config::MPI_LAUNCH
            ),
            2,
        );
    };
    let mut words = vec![0u64; 1 + 2 * layout.ranks.len()];
    world
        .process_at_rank(learner)
        .broadcast_into(&mut words[..]);
    let geometry = Geometry::from_words(&words);
    // The learner checked every rank's `--ranks-per-env` before its
    // broadcast: every actor rank forms the same groups.
    layout.form_groups(k).map_err(anyhow::Error::msg)?;
    // (Collective: the learners make their group from the same split.)
    let actors = mpi::split_by_role(world, Role::Actor);
    let group = group_comm(&actors, &layout, k);
    drop(actors);
    let window = Window::allocate(world, 0);
    if layout.ranks[layout.rank as usize].0 == Role::EnvRank {
        let group = group.expect("an env rank is in a group");
        let line = match crate::env_group::follow::serve(&group.0) {
            Ok(f) => format!(
                "env rank {}: {} env builds, {} steps, {} raised, {} abandoned\n",
                layout.rank, f.builds, f.steps, f.raised, f.abandoned
            ),
            Err(e) => format!("error: env rank {}: {e}\n", layout.rank),
        };
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        drop(group);
        drop(window);
        drop(universe);
        return Ok(());
    }
    let mut player = args.player;
    let lead = group.map(|g| {
        let (index, ranks) = layout
            .group_of(layout.rank)
            .expect("a leader is in a group");
        crate::env_group::lead::GroupLead::new(g, index, ranks.to_vec())
    });
    player.env_factory = Some(match &lead {
        Some(lead) => lead.factory(),
        None => solo_factory(),
    });
    if player.actor_id.len() > mpi::mailbox::MAX_ACTOR_ID {
        let end = (0..=mpi::mailbox::MAX_ACTOR_ID)
            .rev()
            .find(|&i| player.actor_id.is_char_boundary(i))
            .unwrap_or(0);
        player.actor_id.truncate(end);
    }
    let mut link = MpiLink {
        window,
        learner,
        mailbox: geometry.mailbox(learner, layout.rank),
        max_frame_bytes: wire::DEFAULT_MAX_FRAME_BYTES,
        fail_after: args.fail_after_batches,
        batches: 0,
        rejoin: WeightsRejoin::default(),
    };
    let result = runtime.block_on(run_link(&player, &mut link, cancel));
    // (The run's envs are gone: the other ranks of the group may leave.)
    if let Some(lead) = lead {
        lead.stop();
    }
    // (Its env factory holds the group's communicator: freed before MPI is.)
    drop(player);
    // Said before MPI_Finalize: mpirun need not forward what a rank writes
    // after it. A failure exits 0 all the same: the learner is told why (the
    // `bye`) and re-issues the rank's episodes, while a non-zero exit would
    // make mpirun abort the whole job, the learner included.
    let why = match &result {
        Ok(report) => {
            // One write, so lines of ranks sharing a terminal do not mix.
            let line = format!("{report}\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            BYE_DONE.to_string()
        }
        Err(e) => {
            eprintln!("error: {e:#} (this actor rank left the run; the learner carries on)");
            format!("{e:#}")
        }
    };
    world
        .process_at_rank(learner)
        .send_with_tag(why.as_bytes(), TAG_BYE);
    // Collective: waits until the learner has seen every actor leave.
    drop(link);
    drop(universe);
    Ok(())
}

/// This rank's env group's communicator (rank 0 its leader), when envs
/// span several ranks. Collective over the actor ranks.
fn group_comm(actors: &SimpleCommunicator, layout: &Layout, k: u32) -> Option<Group> {
    use rlfleet_shared::mpi::rsmpi::topology::{Color, Communicator as _};
    if k <= 1 {
        return None;
    }
    let (index, _) = layout.group_of(layout.rank)?;
    let comm = actors.split_by_color_with_key(Color::with_value(index as i32), layout.rank);
    comm.map(Group)
}

/// Envs built as without a factory, but each given a communicator of its
/// own rank alone (`MPI_COMM_SELF`): an env written for a group (a
/// `comm` keyword, `HeatRod-v0`) runs unchanged with `ranks_per_env = 1`.
fn solo_factory() -> crate::envs::EnvFactory {
    crate::envs::EnvFactory(std::sync::Arc::new(|source, limit| {
        let (own, _) = EnvComm::new(SimpleCommunicator::self_comm().duplicate());
        let env = source.make_in(Some(Box::new(own)))?;
        Ok(crate::envs::timed(env, limit))
    }))
}
