//! Names for logs, metrics and errors: a message's kind, an error code's
//! label, and an error code made into a message.

use super::messages::{ErrorCode, ErrorMsg, Message};

impl Message {
    /// A short name for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Hello(_) => "hello",
            Message::Welcome(_) => "welcome",
            Message::Observations(_) => "observations",
            Message::Actions(_) => "actions",
            Message::Experience(_) => "experience",
            Message::Ack(_) => "ack",
            Message::Stop(_) => "stop",
            Message::Error(_) => "error",
            Message::WorkRequest(_) => "work request",
            Message::Weights(_) => "weights",
            Message::Decline(_) => "decline",
        }
    }
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::BadFrame,
        ErrorCode::FrameTooLarge,
        ErrorCode::ProtocolVersion,
        ErrorCode::Unauthorized,
        ErrorCode::BadShape,
        ErrorCode::NonFinite,
        ErrorCode::Unexpected,
        ErrorCode::BadAction,
        ErrorCode::TooManyActors,
    ];

    /// The label used in metrics.
    pub fn label(self) -> &'static str {
        match self {
            ErrorCode::BadFrame => "bad_frame",
            ErrorCode::FrameTooLarge => "frame_too_large",
            ErrorCode::ProtocolVersion => "protocol_version",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::BadShape => "bad_shape",
            ErrorCode::NonFinite => "non_finite",
            ErrorCode::Unexpected => "unexpected",
            ErrorCode::BadAction => "bad_action",
            ErrorCode::TooManyActors => "too_many_actors",
        }
    }

    pub fn message(self, text: impl Into<String>) -> Message {
        Message::Error(ErrorMsg {
            code: self,
            text: text.into(),
        })
    }
}
