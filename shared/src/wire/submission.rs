//! [`Submission`]: what an actor of the experience workflows sends and the
//! learner acknowledges in order — a batch of experience, or a request
//! for work — with what both sides read of it.

use super::messages::{EnvFaultReport, Experience, Message, Steps, WorkRequest};

/// What an actor of the experience workflows sends and the learner
/// acknowledges in order: a batch of experience, or a request for work.
/// (Not a message itself: each variant is one.)
#[derive(Debug, Clone, PartialEq)]
// Batches are the common case: boxing one to shrink the rare work request
// would allocate per batch.
#[allow(clippy::large_enum_variant)]
pub enum Submission {
    Batch(Experience),
    Ask(WorkRequest),
}

impl Submission {
    /// The message it travels as.
    pub fn into_message(self) -> Message {
        match self {
            Submission::Batch(e) => Message::Experience(e),
            Submission::Ask(w) => Message::WorkRequest(w),
        }
    }

    /// `msg` as a submission; gives back any other message.
    pub fn from_message(msg: Message) -> Result<Submission, Box<Message>> {
        match msg {
            Message::Experience(e) => Ok(Submission::Batch(e)),
            Message::WorkRequest(w) => Ok(Submission::Ask(w)),
            other => Err(Box::new(other)),
        }
    }

    /// The name of the message it travels as (for logs and errors).
    pub fn kind(&self) -> &'static str {
        match self {
            Submission::Batch(_) => "experience",
            Submission::Ask(_) => "work request",
        }
    }

    /// `msg` is a submission.
    pub fn is_submission(msg: &Message) -> bool {
        matches!(msg, Message::Experience(_) | Message::WorkRequest(_))
    }

    pub fn batch(&self) -> Option<&Experience> {
        match self {
            Submission::Batch(e) => Some(e),
            Submission::Ask(_) => None,
        }
    }

    pub fn actor_id(&self) -> &str {
        match self {
            Submission::Batch(e) => &e.actor_id,
            Submission::Ask(w) => &w.actor_id,
        }
    }

    pub fn session_id(&self) -> u64 {
        match self {
            Submission::Batch(e) => e.session_id,
            Submission::Ask(w) => w.session_id,
        }
    }

    pub fn seq(&self) -> u64 {
        match self {
            Submission::Batch(e) => e.seq,
            Submission::Ask(w) => w.seq,
        }
    }

    pub fn idle_envs(&self) -> &[u32] {
        match self {
            Submission::Batch(e) => &e.idle_envs,
            Submission::Ask(w) => &w.idle_envs,
        }
    }

    /// Episodes the actor abandoned because their env raised.
    pub fn faults(&self) -> &[EnvFaultReport] {
        match self {
            Submission::Batch(e) => &e.faults,
            Submission::Ask(w) => &w.faults,
        }
    }

    pub fn last(&self) -> bool {
        match self {
            Submission::Batch(e) => e.last,
            Submission::Ask(w) => w.last,
        }
    }
}

impl Experience {
    /// A batch of `steps` and nothing else: the first of session 1 of
    /// `actor_id`, acted by version 0 (for tests and tools).
    pub fn lone(actor_id: &str, steps: Steps) -> Experience {
        Experience {
            actor_id: actor_id.into(),
            session_id: 1,
            seq: 1,
            policy_version: 0,
            steps: steps.into(),
            finished: vec![],
            faults: vec![],
            idle_envs: vec![],
            last: false,
        }
    }
}
