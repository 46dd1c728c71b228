//! [`FrontDoor`]: how observations reach the inference front — the run's
//! bypass for them, which stamps each request's arrival (for the
//! inference latency metric) and queues it for the front.

use super::front::Request;
use crate::vocab::{Answer, ConnId};
use crate::workflows::remote::input::Bypass;
use rlfleet_shared::wire::Message;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Where observations go: the front's queue.
#[derive(Debug)]
pub(super) struct FrontDoor(pub tokio::sync::mpsc::Sender<Request>);

impl Bypass for FrontDoor {
    fn serves(&self, msg: &Message) -> bool {
        matches!(msg, Message::Observations(_))
    }

    fn take(&self, conn: ConnId, msg: Message) -> Answer {
        let Message::Observations(obs) = msg else {
            unreachable!("serves observations only")
        };
        let (reply, rx) = oneshot::channel();
        // A front that is gone drops the reply: the actor hears the run
        // ended. (Never full: each actor has one request here at most, and
        // the queue holds one per actor the learner takes.)
        let _ = self.0.try_send(Request {
            conn,
            obs,
            received: Instant::now(),
            reply,
        });
        rx
    }
}
