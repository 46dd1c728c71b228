//! The in-process transport: actors as tasks in the learner's process,
//! exchanging messages as values over channels (no sockets, no encoding;
//! messages are moved, not copied, both ways: the weights the learner's
//! replies carry and the steps of the actors' batches are shared). Each actor gets a [`Session`] like a QUIC connection does,
//! so it hands the run the same requests; an actor task that ends (or
//! panics) is seen as a departed connection.

use super::session::{End, Session, Wire};
use crate::registry::Registry;
use actor_client::remote::InprocLink;
use rlfleet_run::metrics::Metrics;
use rlfleet_shared::wire::{Message, weights_of};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Messages each direction of a link holds: more than any actor may have
/// in flight (`distributed.in_flight` <= 32), so neither side ever blocks
/// on a full channel while the other waits for it.
const LINK_CAPACITY: usize = 64;

/// The learner's ends of one in-process actor's channels.
#[derive(Debug)]
struct InprocWire {
    from_actor: mpsc::Receiver<Message>,
    to_actor: mpsc::Sender<Message>,
    metrics: Arc<Metrics>,
}

impl Wire for InprocWire {
    async fn recv(&mut self) -> Result<Option<Message>, End> {
        Ok(self.from_actor.recv().await)
    }

    async fn send(&mut self, msg: Message) -> Result<(), End> {
        if weights_of(&msg).is_some() {
            self.metrics
                .weights_sent
                .with_label_values(&["inproc"])
                .inc();
        }
        self.to_actor.send(msg).await.map_err(|_| End::Lost)
    }

    async fn closed(&self) {
        self.to_actor.closed().await;
    }
}

/// Connects one in-process actor: runs its session as a task on the
/// current runtime and returns the actor's end of the link.
pub fn connect(registry: &Arc<Registry>) -> InprocLink {
    let (to_learner, from_actor) = mpsc::channel(LINK_CAPACITY);
    let (to_actor, from_learner) = mpsc::channel(LINK_CAPACITY);
    let id = registry.new_conn_id();
    let registry = registry.clone();
    tokio::spawn(async move {
        let wire = InprocWire {
            from_actor,
            to_actor,
            metrics: registry.metrics.clone(),
        };
        Session::new(wire, id, registry, None).serve("inproc").await;
    });
    InprocLink {
        to_learner,
        from_learner,
    }
}
