//! [`Link`]: one request to the learner and its reply, whatever carries
//! them — a QUIC stream (`connect.rs`'s link, which reads replies as they
//! arrive) or, in the learner's own process, channels ([`InprocLink`]).
//! (An MPI rank's link is in the `mpi_link` module, above this one.)

use rlfleet_shared::wire::{Message, WeightsApart, WeightsMsg};
use std::future::Future;
use std::time::Duration;
use tokio::sync::mpsc;

/// One request to the learner and its reply. `Err` says why the link was
/// lost. Messages are handed over, so a link in the learner's process moves
/// them rather than copying.
pub trait Link: Send {
    fn send(&mut self, msg: Message) -> impl Future<Output = Result<(), String>> + Send;
    /// The next reply (replies come in request order).
    fn recv(&mut self) -> impl Future<Output = Result<Message, String>> + Send;
    fn call(&mut self, msg: Message) -> impl Future<Output = Result<Message, String>> + Send {
        async move {
            self.send(msg).await?;
            self.recv().await
        }
    }
    /// The link is losing datagrams (QUIC's loss counts), so that each
    /// exchange costs probe timeouts: worth fewer, larger batches.
    fn losing(&mut self) -> bool {
        false
    }
    /// Weights the learner sent apart from their `Ack` (QUIC) that have
    /// landed: the newest, when they came on stream `from_stream` or a
    /// later one and are newer than `version`. A link whose weights travel
    /// in their messages has none.
    fn weights_landed(&mut self, from_stream: u64, version: u64) -> Option<WeightsMsg> {
        let _ = (from_stream, version);
        None
    }
    /// Waits until the weights `apart` announces (or newer ones) have
    /// landed: at most `grace` when given (`Ok` either way), else as long
    /// as the link allows a reply.
    fn await_weights(
        &mut self,
        apart: WeightsApart,
        grace: Option<Duration>,
    ) -> impl Future<Output = Result<(), String>> + Send {
        let _ = grace;
        async move {
            Err(format!(
                "weights version {} announced apart on a link that carries none",
                apart.version
            ))
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
    async fn send(&mut self, msg: Message) -> Result<(), String> {
        self.to_learner
            .send(msg)
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

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_shared::wire::{Experience, Steps, Submission};
    use std::sync::Arc;

    /// A batch crosses the in-process link without a copy of its steps:
    /// the learner's end reads the very steps the actor keeps until the
    /// batch is acknowledged.
    #[tokio::test]
    async fn an_in_process_batch_is_moved_and_its_steps_shared() {
        let (to_learner, mut from_actor) = mpsc::channel(4);
        let (_to_actor, from_learner) = mpsc::channel(4);
        let mut link = InprocLink {
            to_learner,
            from_learner,
        };
        let mut steps = Steps::default();
        steps.begin(0, 1, 0, &[0.5; 7056], true);
        steps.step(&[1.0], 1.0, &[0.25; 7056], true);
        let batch = Submission::Batch(Experience::lone("a", steps));
        let kept = batch.clone();
        link.send(batch.into_message()).await.unwrap();
        let Some(Message::Experience(got)) = from_actor.recv().await else {
            panic!("no batch arrived");
        };
        let kept = kept.batch().expect("a batch");
        assert!(Arc::ptr_eq(&got.steps, &kept.steps));
        assert_eq!(&got, kept);
    }
}
