//! What ends a conversation: [`Stop`] (the run ended) and [`ErrorMsg`]
//! (a refused message) with its [`ErrorCode`].

use rkyv::{Archive, Deserialize, Serialize};

/// The run ended (or the learner is shutting down).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Stop {
    pub reason: String,
    /// The learner is going away: do not wait for another run.
    pub shutdown: bool,
}

/// Actor to learner, in place of its first request of a run: it cannot
/// take part (it cannot build the run's env, say). The daemon offers it
/// other runs; it says hello again at once.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Decline {
    pub run_id: String,
    /// Why, for the daemon's log and `GET /v1/actors`.
    pub reason: String,
}

/// A refused message: what was wrong with it. The sender closes the stream
/// or connection after it.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ErrorMsg {
    pub code: ErrorCode,
    pub text: String,
}

/// The codes of [`ErrorMsg`].
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ErrorCode {
    /// The frame did not pass validation.
    BadFrame = 1,
    /// The length prefix is above the configured maximum.
    FrameTooLarge = 2,
    /// `Hello` carried another protocol version.
    ProtocolVersion = 3,
    /// Missing or wrong token.
    Unauthorized = 4,
    /// Array lengths do not fit the run's spaces.
    BadShape = 5,
    /// NaN or infinity in observations, rewards or actions.
    NonFinite = 6,
    /// A message that makes no sense at this point of the exchange.
    Unexpected = 7,
    /// An action outside the action space.
    BadAction = 8,
    /// The learner has as many actors as it takes (`actors.max_actors`).
    TooManyActors = 9,
}
