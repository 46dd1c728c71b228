//! The `seed` front's loop: waits for a request, a wake-up from the run or
//! the oldest request's deadline, reads tokio's clock once per turn and
//! hands `now` to [`Front`]'s decisions. (On tokio's paused clock in the
//! tests, so they move time instead of sleeping.)

use super::front::Front;
use std::time::Duration;
use tokio::time::Instant;

impl Front {
    /// Serves until the run ends, then answers everything left with `Stop`.
    pub async fn serve(mut self) {
        loop {
            self.link.tally.turn();
            // Holding a ready batch behind training (`maybe_serve` keeps
            // `held_since` to exactly that), the front waits for the run's
            // `batch_done` (or a request, or the run's end): the oldest
            // request's deadline has passed, and a sleep until it would
            // wake this loop at once, again and again, a core spinning
            // beside the training it waits for.
            let deadline = match self.held_since {
                Some(_) => None,
                None => self.batcher.deadline(&self.cfg),
            };
            let far = Instant::now() + Duration::from_secs(3600);
            let sleep = tokio::time::sleep_until(deadline.unwrap_or(far));
            tokio::select! {
                biased;
                _ = self.link.stop.cancelled() => break,
                ev = self.requests.recv() => match ev {
                    Some(ev) => self.take(ev),
                    None => break,
                },
                _ = self.link.wake.notified() => {}
                _ = sleep, if deadline.is_some() => {}
            }
            while let Ok(ev) = self.requests.try_recv() {
                self.take(ev);
            }
            self.unpark();
            self.maybe_serve(Instant::now());
        }
        self.stop_all();
    }
}
