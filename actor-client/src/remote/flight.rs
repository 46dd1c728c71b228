//! [`Flight`]: the batches (and requests for work) between an actor and its learner —
//! up to `in_flight` sent and not yet acknowledged (replies come in order),
//! the ones the learner's full pool refused (sent again, in order), and
//! which envs were already reported idle (reported once until the reply).
//! Sans-IO: the experience loop sends and receives, and asks the flight
//! what to do.

use rlfleet_shared::wire::{Ack, Submission};
use std::collections::VecDeque;

/// What an acknowledgement did to the batch it answers.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Acked {
    /// Taken (trained, dropped or a duplicate: the learner has it).
    Taken,
    /// The learner's pool was full: the batch goes again later.
    Refused {
        /// It was a batch (not a request for work).
        batch: bool,
    },
}

/// The batches in flight.
#[derive(Debug)]
pub(super) struct Flight {
    /// Most batches sent and not yet acknowledged.
    window: usize,
    /// Sent, awaiting their `Ack`, oldest first.
    sent: VecDeque<Submission>,
    /// Refused because the learner's pool was full: sent again, in order.
    refused: Vec<Submission>,
    /// Envs reported idle in a batch whose reply has not come yet.
    asked: Vec<bool>,
}

impl Flight {
    pub fn new(window: u32, n_envs: usize) -> Flight {
        Flight {
            window: window.max(1) as usize,
            sent: VecDeque::new(),
            refused: Vec::new(),
            asked: vec![false; n_envs],
        }
    }

    /// A reply must be taken before playing on: the window is full, or
    /// replies are due and there is nothing to play, or refused batches
    /// wait to go again once the others are answered.
    pub fn must_take_reply(&self, any_running: bool) -> bool {
        self.sent.len() >= self.window
            || (!self.sent.is_empty() && (!any_running || !self.refused.is_empty()))
    }

    /// Every batch is answered and some were refused: send those again.
    pub fn resend_due(&self) -> bool {
        !self.refused.is_empty() && self.sent.is_empty()
    }

    /// Replies are due (nothing new to report need not be sent).
    pub fn awaiting(&self) -> bool {
        !self.sent.is_empty()
    }

    /// The refused batches, in order, to send again.
    pub fn take_refused(&mut self) -> Vec<Submission> {
        std::mem::take(&mut self.refused)
    }

    /// `s` went out.
    pub fn sent(&mut self, s: Submission) {
        self.sent.push_back(s);
    }

    /// Of the envs that are `idle`, the ones not yet reported idle in a
    /// batch still in flight; marked reported.
    pub fn report_idle(&mut self, idle: Vec<u32>) -> Vec<u32> {
        let fresh: Vec<u32> = idle
            .into_iter()
            .filter(|&i| !self.asked[i as usize])
            .collect();
        for &i in &fresh {
            self.asked[i as usize] = true;
        }
        fresh
    }

    /// Applies the reply to the oldest batch in flight; an error when the
    /// learner answers out of order.
    pub fn ack(&mut self, ack: &Ack) -> anyhow::Result<Acked> {
        let Some(s) = self.sent.pop_front() else {
            anyhow::bail!("an ack for seq {} with no batch in flight", ack.seq);
        };
        anyhow::ensure!(
            ack.seq == s.seq(),
            "an ack for seq {}, the oldest batch in flight is {}",
            ack.seq,
            s.seq()
        );
        if ack.full {
            let batch = s.batch().is_some();
            self.refused.push(s);
            return Ok(Acked::Refused { batch });
        }
        for &i in s.idle_envs() {
            self.asked[i as usize] = false;
        }
        Ok(Acked::Taken)
    }

    /// Everything not acknowledged (the session ends), oldest first: the
    /// next session sends it again under its original keys.
    pub fn unacknowledged(&mut self) -> Vec<Submission> {
        let mut pending: Vec<Submission> = self.refused.drain(..).collect();
        pending.extend(self.sent.drain(..));
        pending.sort_by_key(Submission::seq);
        pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_shared::wire::{Experience, Steps, WorkRequest};

    /// A batch of `steps` steps, or (0 steps) a request for work.
    fn batch(seq: u64, steps: usize, idle: Vec<u32>) -> Submission {
        if steps == 0 {
            return Submission::Ask(WorkRequest {
                actor_id: "a".into(),
                session_id: 1,
                seq,
                faults: vec![],
                idle_envs: idle,
                last: false,
            });
        }
        Submission::Batch(Experience {
            actor_id: "a".into(),
            session_id: 1,
            seq,
            policy_version: 0,
            steps: {
                let mut s = Steps::default();
                if steps > 0 {
                    s.begin(0, 0, 0, &[0.0], false);
                }
                for _ in 0..steps {
                    s.step(&[0.0], 0.0, &[0.0], false);
                }
                s.into()
            },
            finished: vec![],
            faults: vec![],
            idle_envs: idle,
            last: false,
        })
    }

    fn ack(seq: u64, full: bool) -> Ack {
        Ack {
            seq,
            duplicate: false,
            weights: None,
            weights_apart: None,
            epsilon: 0.0,
            starts: vec![],
            full,
        }
    }

    #[test]
    fn the_window_bounds_batches_in_flight_and_replies_come_in_order() {
        let mut f = Flight::new(2, 1);
        assert!(!f.must_take_reply(true));
        f.sent(batch(1, 3, vec![]));
        assert!(!f.must_take_reply(true), "1 of 2");
        assert!(f.must_take_reply(false), "nothing to play, a reply is due");
        f.sent(batch(2, 3, vec![]));
        assert!(f.must_take_reply(true), "2 of 2");
        assert!(f.ack(&ack(2, false)).is_err(), "seq 1 is the oldest");
        // (The failed ack took seq 1 out: the session ends on that error.)
        assert_eq!(f.ack(&ack(2, false)).unwrap(), Acked::Taken);
        assert!(f.ack(&ack(3, false)).is_err(), "nothing in flight");
    }

    #[test]
    fn refused_batches_go_again_in_order_once_the_rest_is_answered() {
        let mut f = Flight::new(4, 1);
        for seq in 1..=3 {
            f.sent(batch(seq, 3, vec![]));
        }
        assert_eq!(f.ack(&ack(1, false)).unwrap(), Acked::Taken);
        assert_eq!(
            f.ack(&ack(2, true)).unwrap(),
            Acked::Refused { batch: true }
        );
        assert!(f.must_take_reply(true), "refused ones wait for the rest");
        assert!(!f.resend_due());
        assert_eq!(
            f.ack(&ack(3, true)).unwrap(),
            Acked::Refused { batch: true }
        );
        assert!(f.resend_due());
        let again: Vec<u64> = f.take_refused().iter().map(Submission::seq).collect();
        assert_eq!(again, vec![2, 3]);
        assert!(!f.resend_due());
    }

    #[test]
    fn an_idle_env_is_reported_once_until_its_reply() {
        let mut f = Flight::new(4, 3);
        assert_eq!(f.report_idle(vec![0, 2]), vec![0, 2]);
        f.sent(batch(1, 0, vec![0, 2]));
        assert_eq!(f.report_idle(vec![0, 1, 2]), vec![1], "0 and 2 were asked");
        f.sent(batch(2, 0, vec![1]));
        f.ack(&ack(1, false)).unwrap();
        assert_eq!(f.report_idle(vec![0, 2]), vec![0, 2], "answered: ask again");
        // A refused request keeps its envs asked: it goes again as it was.
        f.sent(batch(3, 0, vec![0, 2]));
        assert_eq!(f.ack(&ack(2, false)).unwrap(), Acked::Taken);
        assert_eq!(
            f.ack(&ack(3, true)).unwrap(),
            Acked::Refused { batch: false }
        );
        assert_eq!(f.report_idle(vec![0, 2]), Vec::<u32>::new());
    }

    #[test]
    fn what_was_not_acknowledged_is_kept_for_the_next_session_oldest_first() {
        let mut f = Flight::new(4, 1);
        for seq in 1..=4 {
            f.sent(batch(seq, 3, vec![]));
        }
        f.ack(&ack(1, true)).unwrap();
        f.ack(&ack(2, false)).unwrap();
        let left: Vec<u64> = f.unacknowledged().iter().map(Submission::seq).collect();
        assert_eq!(left, vec![1, 3, 4]);
        assert!(!f.awaiting() && !f.resend_due());
    }
}
