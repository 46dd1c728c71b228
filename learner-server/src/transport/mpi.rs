//! The MPI transport, learner side (feature `mpi`): one thread owns every
//! MPI call of the lead learner rank. It runs a [`Session`] per actor rank
//! (on the tokio runtime) over an [`MpiWire`], receives framed messages
//! with matched probes, sends replies with non-blocking sends of owned
//! buffers, and — for the `rma` workflows — drains the actors' mailboxes
//! in its RMA window, so deposits arrive without a message. An actor rank
//! that leaves (its `bye`) is a departed connection: the run re-issues its
//! unfinished episodes. The thread returns once every actor rank has left.

use super::session::{End, Session, Wire};
use crate::hub::Hub;
use crate::metrics::Metrics;
use rlfleet_shared::mpi::rsmpi::traits::{Communicator, MatchedReceiveVec, Source};
use rlfleet_shared::mpi::{
    self, BYE_DONE, Geometry, Layout, Outbox, SimpleCommunicator, TAG_BYE, TAG_MESSAGE, Window,
    mailbox::Mailbox,
};
use rlfleet_shared::wire::{self, ErrorCode, FrameError, Message};
use std::collections::BTreeMap;
use std::sync::{Arc, mpsc};
use std::time::Duration;
use tokio::sync::mpsc as tmpsc;
use tokio_util::sync::CancellationToken;

/// What the transport thread needs to serve the actor ranks.
#[derive(Debug, Clone)]
pub struct MpiOptions {
    pub layout: Layout,
    /// The actors' mailboxes in this rank's window (`rma` workflows).
    pub geometry: Geometry,
    pub max_frame_bytes: u32,
}

/// Longest idle pause of the transport thread between polls.
const MAX_PAUSE: Duration = Duration::from_micros(500);

type Incoming = Result<Message, End>;

/// One actor rank as the transport thread sees it.
struct Peer {
    to_session: Option<tmpsc::UnboundedSender<Incoming>>,
    left: CancellationToken,
    mailbox: Option<Mailbox>,
}

/// Serves every actor rank until all have left. Runs on its own thread;
/// allocates (and at the end frees) the window with the actor ranks.
pub fn serve(hub: Arc<Hub>, opts: MpiOptions, rt: tokio::runtime::Handle) {
    let world = SimpleCommunicator::world();
    let me = opts.layout.rank;
    let window = Window::allocate(&world, opts.geometry.total_bytes());
    let (out_tx, out_rx) = mpsc::channel::<(i32, Vec<u8>)>();
    let mut peers = BTreeMap::new();
    for rank in opts.layout.actors() {
        let (tx, rx) = tmpsc::unbounded_channel();
        let left = CancellationToken::new();
        let wire = MpiWire {
            rank,
            incoming: rx,
            outgoing: out_tx.clone(),
            left: left.clone(),
            metrics: hub.metrics.clone(),
        };
        rt.spawn(session(wire, hub.clone()));
        peers.insert(
            rank,
            Peer {
                to_session: Some(tx),
                left,
                mailbox: opts.geometry.mailbox(me, rank),
            },
        );
    }
    drop(out_tx);
    let mut outbox = Outbox::default();
    let mut pause = Duration::ZERO;
    let mut frames = Vec::new();
    let deliver = |peer: &mut Peer, bytes: &[u8]| {
        hub.metrics
            .bytes_received
            .with_label_values(&["mpi"])
            .inc_by(bytes.len() as u64);
        let m = mpi::decode_frame(bytes, opts.max_frame_bytes).map_err(refusal);
        if let Some(tx) = &peer.to_session {
            let _ = tx.send(m);
        }
    };
    loop {
        let mut busy = false;
        while let Ok((dest, bytes)) = out_rx.try_recv() {
            outbox.send(&world, dest, TAG_MESSAGE, bytes);
            busy = true;
        }
        outbox.progress();
        if opts.geometry.slots > 0 {
            let epoch = window.lock(me, true);
            for peer in peers.values_mut() {
                if let (Some(mb), Some(_)) = (&peer.mailbox, &peer.to_session) {
                    frames.clear();
                    if let Err(e) = mb.drain(&epoch, &mut frames) {
                        mpi::abort(&format!("a mailbox is corrupt: {e}"), 1);
                    }
                    for f in &frames {
                        hub.metrics.rma_deposits.inc();
                        deliver(peer, f);
                        busy = true;
                    }
                }
            }
        }
        while let Some(probed) = world.any_process().immediate_matched_probe() {
            busy = true;
            let (bytes, status) = probed.matched_receive_vec::<u8>();
            let (source, tag) = (status.source_rank(), status.tag());
            let Some(peer) = peers.get_mut(&source) else {
                tracing::warn!(
                    source,
                    tag,
                    "message from MPI rank {source}, which is not an actor: ignored"
                );
                continue;
            };
            if tag == TAG_BYE {
                // Deposits it made before leaving come first.
                if let Some(mb) = &peer.mailbox {
                    frames.clear();
                    let epoch = window.lock(me, true);
                    let _ = mb.drain(&epoch, &mut frames);
                    drop(epoch);
                    for f in &frames {
                        hub.metrics.rma_deposits.inc();
                        deliver(peer, f);
                    }
                }
                let why = String::from_utf8_lossy(&bytes);
                if why != BYE_DONE {
                    tracing::warn!(
                        rank = source,
                        "actor rank {source} left before its run ended ({why}): its unfinished \
                         episodes go back to the run"
                    );
                }
                peer.to_session = None;
                peer.left.cancel();
            } else if peer.to_session.is_some() {
                deliver(peer, &bytes);
            }
        }
        if peers.values().all(|p| p.to_session.is_none()) && outbox.progress() == 0 {
            break;
        }
        if busy {
            pause = Duration::ZERO;
        } else {
            pause = (pause * 2).clamp(Duration::from_micros(10), MAX_PAUSE);
            std::thread::sleep(pause);
        }
    }
    outbox.flush();
    tracing::info!("every actor rank has left");
    drop(window);
}

fn refusal(e: FrameError) -> End {
    match e {
        FrameError::TooLarge { .. } => End::Refused(ErrorCode::FrameTooLarge, e.to_string()),
        _ => End::Refused(ErrorCode::BadFrame, e.to_string()),
    }
}

async fn session(wire: MpiWire, hub: Arc<Hub>) {
    let id = hub.new_conn_id();
    let rank = wire.rank;
    let mut session = Session::new(wire, id, hub.clone(), None);
    match session.run(&format!("mpi rank {rank}")).await {
        End::Refused(code, text) => {
            tracing::warn!(rank, code = code.label(), "refused actor input: {text}");
            hub.metrics
                .protocol_errors
                .with_label_values(&[code.label()])
                .inc();
            let _ = session.wire.send(&code.message(text)).await;
        }
        End::Lost => tracing::info!(rank, "actor rank gone"),
        End::Clean | End::Answered(_) => {}
    }
    hub.actor_disconnected(id);
}

/// One actor rank's messages, relayed by the transport thread.
#[derive(Debug)]
struct MpiWire {
    rank: i32,
    incoming: tmpsc::UnboundedReceiver<Incoming>,
    outgoing: mpsc::Sender<(i32, Vec<u8>)>,
    left: CancellationToken,
    metrics: Arc<Metrics>,
}

impl Wire for MpiWire {
    async fn recv(&mut self) -> Result<Option<Message>, End> {
        match self.incoming.recv().await {
            Some(m) => m.map(Some),
            None => Ok(None),
        }
    }

    async fn send(&mut self, msg: &Message) -> Result<(), End> {
        let frame = wire::encode(msg);
        self.metrics
            .bytes_sent
            .with_label_values(&["mpi"])
            .inc_by(frame.len() as u64);
        self.outgoing
            .send((self.rank, frame))
            .map_err(|_| End::Lost)
    }

    async fn closed(&self) {
        self.left.cancelled().await;
    }
}
