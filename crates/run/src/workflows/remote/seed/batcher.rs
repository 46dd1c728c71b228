//! [`Batcher`]: the `seed` front's batching policy — the requests waiting
//! for inference, oldest first, and when to serve them: a full batch, the
//! oldest waited `inference_max_wait_us`, or every actor is waiting. No
//! clock of its own: callers pass `Instant`s.

use crate::vocab::{ConnId, Reply};
use rlfleet_shared::config::DistributedConfig;
use rlfleet_shared::wire::Observations;
use std::time::Duration;
use tokio::time::Instant;

/// One request waiting for an answer.
#[derive(Debug)]
pub(super) struct Pending {
    pub conn: ConnId,
    pub obs: Observations,
    pub received: Instant,
    pub reply: Reply,
    /// Envs that need an action.
    pub act: Vec<u32>,
}

/// The requests waiting, oldest first.
#[derive(Debug, Default)]
pub(super) struct Batcher {
    pub pending: Vec<Pending>,
}

impl Batcher {
    /// Environments the waiting requests need actions for.
    pub fn envs(&self) -> usize {
        self.pending.iter().map(|p| p.act.len()).sum()
    }

    /// When the oldest request must be served.
    pub fn deadline(&self, cfg: &DistributedConfig) -> Option<Instant> {
        let max = Duration::from_micros(cfg.inference_max_wait_us);
        self.pending.first().map(|p| p.received + max)
    }

    /// Serve now? Full batch, waited long enough, or every actor is
    /// waiting (`waiting` counts requests held elsewhere too).
    pub fn ready(
        &self,
        cfg: &DistributedConfig,
        now: Instant,
        waiting: usize,
        actors: usize,
    ) -> bool {
        let Some(deadline) = self.deadline(cfg) else {
            return false;
        };
        self.envs() >= cfg.inference_max_batch as usize
            || now >= deadline
            || self.pending.len() + waiting >= actors
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    fn cfg(max_batch: u32, max_wait_us: u64) -> DistributedConfig {
        DistributedConfig {
            inference_max_batch: max_batch,
            inference_max_wait_us: max_wait_us,
            ..DistributedConfig::default()
        }
    }

    fn pending(conn: ConnId, envs: u32, received: Instant) -> Pending {
        let (reply, _rx) = oneshot::channel();
        Pending {
            conn,
            obs: Observations {
                seq: 0,
                obs: vec![],
                obs_u8: vec![],
                rewards: vec![],
                flags: vec![],
                faults: vec![],
            },
            received,
            reply,
            act: (0..envs).collect(),
        }
    }

    #[test]
    fn nothing_waiting_is_never_ready() {
        let b = Batcher::default();
        let t = Instant::now();
        assert_eq!(b.deadline(&cfg(8, 100)), None);
        assert!(!b.ready(&cfg(8, 100), t + Duration::from_secs(9), 0, 0));
    }

    #[test]
    fn a_full_batch_is_served_at_once() {
        let t = Instant::now();
        let c = cfg(8, 1_000_000);
        let mut b = Batcher::default();
        b.pending.push(pending(1, 4, t));
        assert!(!b.ready(&c, t, 0, 4), "4 of 8 envs, 1 of 4 actors");
        b.pending.push(pending(2, 4, t));
        assert_eq!(b.envs(), 8);
        assert!(b.ready(&c, t, 0, 4), "8 of 8 envs");
    }

    #[test]
    fn the_oldest_request_is_served_at_its_deadline() {
        let t = Instant::now();
        let c = cfg(64, 500);
        let mut b = Batcher::default();
        b.pending.push(pending(1, 1, t));
        b.pending
            .push(pending(2, 1, t + Duration::from_micros(300)));
        assert_eq!(b.deadline(&c), Some(t + Duration::from_micros(500)));
        assert!(!b.ready(&c, t + Duration::from_micros(499), 0, 3));
        assert!(b.ready(&c, t + Duration::from_micros(500), 0, 3));
    }

    #[test]
    fn every_actor_waiting_serves_at_once() {
        let t = Instant::now();
        let c = cfg(64, 1_000_000);
        let mut b = Batcher::default();
        b.pending.push(pending(1, 1, t));
        b.pending.push(pending(2, 1, t));
        assert!(!b.ready(&c, t, 0, 3), "2 of 3 actors");
        assert!(b.ready(&c, t, 1, 3), "the third is parked elsewhere");
        assert!(b.ready(&c, t, 0, 2), "2 of 2 actors");
    }
}
