//! The MPI transport, learner side (feature `mpi`): one thread owns every
//! MPI call of the lead learner rank. It runs a [`Session`] per actor rank
//! (on the tokio runtime) over an [`MpiWire`], receives framed messages
//! with matched probes, sends replies with non-blocking sends of owned
//! buffers, and — for the `rma` workflows — drains the actors' mailboxes
//! in its RMA window, so deposits arrive without a message. An actor rank
//! that leaves (its `bye`) is a departed connection: the run re-issues its
//! unfinished episodes. The thread returns once every actor rank has left.

use super::session::{End, Session, Wire};
use crate::registry::Registry;
use rlfleet_run::metrics::Metrics;
use rlfleet_shared::mpi::rsmpi::traits::{Communicator, MatchedReceiveVec, Source};
use rlfleet_shared::mpi::{
    self, BYE_DONE, Backoff, Epoch, Geometry, Layout, Outbox, SimpleCommunicator, TAG_BYE,
    TAG_MESSAGE, Window, mailbox::Mailbox,
};
use rlfleet_shared::wire::{self, ErrorCode, FrameError, Message, WeightsFrames};
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
pub fn serve(registry: Arc<Registry>, opts: MpiOptions, rt: tokio::runtime::Handle) {
    let world = SimpleCommunicator::world();
    let me = opts.layout.rank;
    let window = Window::allocate(&world, opts.geometry.total_bytes());
    let (out_tx, out_rx) = mpsc::channel::<(i32, Arc<Vec<u8>>)>();
    let mut peers = BTreeMap::new();
    for rank in opts.layout.actors() {
        let (tx, rx) = tmpsc::unbounded_channel();
        let left = CancellationToken::new();
        let wire = MpiWire {
            rank,
            incoming: rx,
            outgoing: out_tx.clone(),
            left: left.clone(),
            metrics: registry.metrics.clone(),
            weights: registry.weights_frames.clone(),
        };
        let session = Session::new(wire, registry.new_conn_id(), registry.clone(), None);
        rt.spawn(async move { session.serve(&format!("mpi rank {rank}")).await });
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
    let mut backoff = Backoff::new(0, MAX_PAUSE);
    let relay = Relay {
        metrics: registry.metrics.clone(),
        max_frame_bytes: opts.max_frame_bytes,
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
            for peer in peers.values() {
                busy |= relay.drain(peer, &epoch);
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
                if peer.mailbox.is_some() {
                    relay.drain(peer, &window.lock(me, true));
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
            } else {
                relay.deliver(peer, &bytes);
            }
        }
        if peers.values().all(|p| p.to_session.is_none()) && outbox.progress() == 0 {
            break;
        }
        if busy {
            backoff.reset();
        } else {
            backoff.wait();
        }
    }
    outbox.flush();
    tracing::info!("every actor rank has left");
    drop(window);
}

/// Hands what arrives to the actor ranks' sessions.
struct Relay {
    metrics: Arc<Metrics>,
    max_frame_bytes: u32,
}

impl Relay {
    /// Decodes one frame for `peer`'s session (a bad one ends it with
    /// the refusal), unless the rank has left.
    fn deliver(&self, peer: &Peer, bytes: &[u8]) {
        let Some(tx) = &peer.to_session else { return };
        self.metrics
            .bytes_received
            .with_label_values(&["mpi"])
            .inc_by(bytes.len() as u64);
        let _ = tx.send(mpi::decode_frame(bytes, self.max_frame_bytes).map_err(refusal));
    }

    /// Delivers what `peer` deposited in its mailbox (within an epoch on
    /// this rank's window); true when there was something.
    fn drain(&self, peer: &Peer, epoch: &Epoch) -> bool {
        let (Some(mb), Some(_)) = (&peer.mailbox, &peer.to_session) else {
            return false;
        };
        let mut frames = Vec::new();
        if let Err(e) = mb.drain(epoch, &mut frames) {
            mpi::abort(&format!("a mailbox is corrupt: {e}"), 1);
        }
        for f in &frames {
            self.metrics.rma_deposits.inc();
            self.deliver(peer, f);
        }
        !frames.is_empty()
    }
}

fn refusal(e: FrameError) -> End {
    match e {
        FrameError::TooLarge { .. } => End::Refused(ErrorCode::FrameTooLarge, e.to_string()),
        _ => End::Refused(ErrorCode::BadFrame, e.to_string()),
    }
}

/// One actor rank's messages, relayed by the transport thread.
#[derive(Debug)]
struct MpiWire {
    rank: i32,
    incoming: tmpsc::UnboundedReceiver<Incoming>,
    outgoing: mpsc::Sender<(i32, Arc<Vec<u8>>)>,
    left: CancellationToken,
    metrics: Arc<Metrics>,
    /// Weights frames shared by every session.
    weights: Arc<WeightsFrames>,
}

impl Wire for MpiWire {
    async fn recv(&mut self) -> Result<Option<Message>, End> {
        match self.incoming.recv().await {
            Some(m) => m.map(Some),
            None => Ok(None),
        }
    }

    /// An `Ack` or `Welcome` with weights goes as the shared weights frame
    /// and then the message without them (MPI keeps the two in order).
    async fn send(&mut self, mut msg: Message) -> Result<(), End> {
        let weights = super::weights_frame(&self.weights, &self.metrics, "mpi", &mut msg);
        let frame = Arc::new(wire::encode(&msg));
        for frame in weights.into_iter().chain([frame]) {
            self.metrics
                .bytes_sent
                .with_label_values(&["mpi"])
                .inc_by(frame.len() as u64);
            self.outgoing
                .send((self.rank, frame))
                .map_err(|_| End::Lost)?;
        }
        Ok(())
    }

    /// Once the rank said goodbye and the session has read what it sent
    /// before (its last deposits, relayed just ahead of the goodbye):
    /// until then the session reads on, so none of them goes unanswered
    /// and uncounted.
    async fn closed(&self) {
        self.left.cancelled().await;
        while !self.incoming.is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}
