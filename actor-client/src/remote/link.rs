//! [`Link`]: one request to the learner and its reply, whatever carries
//! them — a QUIC stream (`connect.rs`'s link, which reads replies as they
//! arrive) or, in the learner's own process, channels ([`InprocLink`]).
//! (An MPI rank's link is in the `mpi_link` module, above this one.)

use rlfleet_shared::wire::Message;
use std::future::Future;
use tokio::sync::mpsc;

/// One request to the learner and its reply. `Err` says why the link was
/// lost.
pub trait Link: Send {
    fn send(&mut self, msg: &Message) -> impl Future<Output = Result<(), String>> + Send;
    /// The next reply (replies come in request order).
    fn recv(&mut self) -> impl Future<Output = Result<Message, String>> + Send;
    fn call(&mut self, msg: &Message) -> impl Future<Output = Result<Message, String>> + Send {
        async move {
            self.send(msg).await?;
            self.recv().await
        }
    }
}

/// An actor in the learner's process: messages as values over channels
/// (the learner's in-process transport holds the other ends).
#[derive(Debug)]
pub struct InprocLink {
    pub to_learner: mpsc::Sender<Message>,
    pub from_learner: mpsc::Receiver<Message>,
}

impl Link for InprocLink {
    async fn send(&mut self, msg: &Message) -> Result<(), String> {
        self.to_learner
            .send(msg.clone())
            .await
            .map_err(|_| "the learner is gone".to_string())
    }

    async fn recv(&mut self) -> Result<Message, String> {
        self.from_learner
            .recv()
            .await
            .ok_or_else(|| "the learner is gone".to_string())
    }
}
